// FLX_API: the one export macro. libflx is built with hidden visibility
// (-fvisibility=hidden -fvisibility-inlines-hidden), so only what carries
// FLX_API is in its dynamic symbol table: the classes and functions of the
// public headers (include/flx/), and the functions of the internal interface
// that flx::distributed uses (src/internal/distributed_interface.hpp; not
// for users). Templates defined in headers need nothing: a program
// instantiates its own. Error and its subclasses carry it so that their
// typeinfo is one across libflx, its satellites and programs (a catch in a
// program matches what libflx throws).
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define FLX_API __attribute__((visibility("default")))
#else
#define FLX_API
#endif
