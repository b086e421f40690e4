// Scratch memory for backend calls (scratch.hpp).
#include "backend/scratch.hpp"

#include "backend/backend.hpp"

namespace flx::detail {

Scratch::Scratch(const Backend& be, int dev, uint64_t bytes) {
  if (bytes == 0) return;
  buf_ = be.alloc(dev, size_t(bytes));  // throws before anything is owned
  be_ = &be;
  dev_ = dev;
  bytes_ = bytes;
  stream_ = current_stream(be.id(), dev);
}

Scratch& Scratch::operator=(Scratch&& o) noexcept {
  if (this != &o) {
    release();
    be_ = o.be_;
    dev_ = o.dev_;
    buf_ = o.buf_;
    bytes_ = o.bytes_;
    stream_ = o.stream_;
    o.be_ = nullptr;
    o.buf_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void Scratch::release() noexcept {
  if (buf_) be_->free_used_on(dev_, buf_, stream_);
  buf_ = nullptr;
  bytes_ = 0;
}

}  // namespace flx::detail
