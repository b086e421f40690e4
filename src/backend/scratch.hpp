// Scratch memory a backend call asks for, in the protocol of backend.h
// ("workspace and reserve space"): a *_workspace or *_reserve_size call
// says how many bytes for a descriptor, the dispatch layer allocates them
// with the device's own allocator on the current stream
// (Backend::scratch), and frees them stream-ordered when the Scratch goes,
// so the memory is reused only once the stream it was used on has passed
// the call. A workspace lives for one call (reduce's, Backend::reduce). A
// reserve space lives from a forward call to its backward call: the op keeps
// it (a shared_ptr<Scratch>) in its autodiff record, whose backward rule
// hands it to the backward call, and it goes with the record. Not installed.
#pragma once

#include <cstdint>

#include "flx/backend.h"

namespace flx::detail {

class Backend;

class Scratch {
 public:
  Scratch() = default;
  // bytes of be's device dev on the current stream; nothing for 0.
  // OutOfMemory when the allocator cannot.
  Scratch(const Backend& be, int dev, uint64_t bytes);
  Scratch(Scratch&& o) noexcept { *this = static_cast<Scratch&&>(o); }
  Scratch& operator=(Scratch&& o) noexcept;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { release(); }

  flx_mem mem() const { return {buf_, 0}; }  // NULL buf when there is none
  uint64_t bytes() const { return bytes_; }

 private:
  void release() noexcept;

  const Backend* be_ = nullptr;
  int dev_ = 0;
  flx_buffer buf_ = nullptr;
  uint64_t bytes_ = 0;
  flx_stream stream_ = nullptr;  // allocated on: freed after the work queued there
};

}  // namespace flx::detail
