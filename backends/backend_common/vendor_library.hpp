// A vendor compute library (cuBLAS, cuBLASLt, CLBlast; later cuDNN, NCCL)
// that a backend plugin opens when a functional device first needs it,
// instead of linking it. libflx loads every installed plugin to ask
// functional(), so a linked library is mapped into every process that
// probes, CPU-only ones included, even where the backend turns out not to
// work: cuBLASLt alone is some 150 MB of resident memory once loaded.
//
//   const auto& cublas = load_once<CublasApi>(
//       [] { return open_vendor_library("cuBLAS", {"libcublas.so.13", dir + "/libcublas.so.13"}, fix); },
//       [](VendorLibrary& lib, CublasApi& api) { lib.resolve("cublasCreate_v2", api.create); ... });
//   if (!cublas.error.empty()) return fail(FLX_ERR_DEVICE, cublas.error);  // else cublas.api.create(...)
//
// The handle is kept for the life of the process (never dlclose'd: handles
// and thread-local state of the library outlive any one call). Header-only,
// for the plugins; libflx never includes it. Installed: <flx/plugin/...>.
#pragma once

#include <dlfcn.h>

#include <string>
#include <vector>

namespace flx::vendor {

struct VendorLibrary {
  void* handle = nullptr;
  std::string error;  // empty while everything loaded and resolved
  bool ok() const { return handle && error.empty(); }

  // Points fn at the library's symbol `name`; a missing one is recorded in
  // error (an older library than the headers the plugin was built with).
  template <class Fn>
  void resolve(const char* name, Fn*& fn) {
    fn = nullptr;
    if (!handle) return;
    fn = reinterpret_cast<Fn*>(dlsym(handle, name));
    if (!fn) error += std::string(error.empty() ? "" : "; ") + "it lacks " + name + " (too old a version?)";
  }
};

// dlopen (RTLD_NOW | RTLD_LOCAL) of the first candidate that loads: a bare
// soname goes through the usual search (LD_LIBRARY_PATH, the plugin's
// RUNPATH, the system's), a path is taken as it is. When none loads, error
// says what `title` is, every candidate's dlerror, and `fix`.
inline VendorLibrary open_vendor_library(const char* title, const std::vector<std::string>& candidates,
                                         const char* fix) {
  VendorLibrary lib;
  std::string tried;
  for (const std::string& c : candidates) {
    if (c.empty()) continue;
    if ((lib.handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL))) return lib;
    const char* e = dlerror();
    tried += "\n  " + (e ? std::string(e) : c + ": cannot be opened");
  }
  lib.error = std::string(title) + " could not be loaded:" + tried + "\nTo fix: " + fix;
  return lib;
}

// A library's entry points (an Api struct of function pointers), or why
// they could not be loaded.
template <class Api>
struct LoadedApi {
  Api api{};
  std::string error;  // empty when every entry point resolved
};

// open() the library and resolve(lib, api) its entry points, once per
// process, by the first caller (thread-safe); a failure is kept, not
// retried. Each call site (its lambdas' types) has its own library.
template <class Api, class Open, class Resolve>
const LoadedApi<Api>& load_once(Open open, Resolve resolve) {
  static const LoadedApi<Api> loaded = [&] {
    LoadedApi<Api> r;
    VendorLibrary lib = open();
    resolve(lib, r.api);
    if (!lib.ok()) r.error = lib.error;
    return r;
  }();
  return loaded;
}

// The directory of the shared object that holds `addr` (a function of a
// library the plugin links, e.g. the CUDA runtime, beside which its sibling
// libraries usually live); empty when unknown.
inline std::string directory_of(const void* addr) {
  Dl_info info{};
  if (!dladdr(addr, &info) || !info.dli_fname) return {};
  const std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

}  // namespace flx::vendor
