// libflx's internal interface for flx::distributed: everything that library
// uses from libflx beyond the public headers, declared once here. libflx
// exports these with FLX_API (so flx::distributed, a library of its own,
// links them), but they are not public API: no installed header declares
// them, they may change with any release, and programs must not call them.
// src/distributed/ includes only the public headers, its own headers and
// this one (tests/arch/check_layers.py checks it); tests/symbols checks that
// libflx exports nothing else outside the public API.
//
// Why these: flx::distributed moves a tensor's bytes itself (MPI reads and
// writes device or pinned host memory; NCCL runs on the CUDA plugin's comm
// table on a stream of its own), watches backward passes to reduce
// gradients while the pass runs, pauses recording while it synchronizes
// state, and reads one preference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "flx/backend.h"
#include "flx/device.hpp"
#include "flx/export.hpp"
#include "flx/tensor.hpp"
#include "internal/gradient_observer.hpp"

namespace flx::detail {
class Backend;
class StreamGuard;
}  // namespace flx::detail
namespace flx::autograd {
class PauseScope;
}

namespace flx::internal {

// ---- a tensor's storage ----------------------------------------------------
// Its device memory (the buffer and the tensor's byte offset in it).
FLX_API flx_mem mem(const Tensor& t);
// Host pointer to the data when the device is host-addressable, else null.
FLX_API void* host_data(const Tensor& t);
// numel × element size, overflow-checked (ArgumentError naming the shape).
FLX_API size_t checked_nbytes(const Shape& s, DType t);
// A new tensor of `shape` over t's storage, `offset_bytes` past t's start.
FLX_API Tensor share(const Tensor& t, const Shape& shape, uint64_t offset_bytes);
// x /= divisor in place, on x's device (an average after a sum).
FLX_API void divide_in_place(const Tensor& x, double divisor);

// ---- the dispatch layer's calls on one backend -----------------------------
// A handle on the backend serving a device, with the dispatch layer's
// signatures (each call runs on the device's current stream). Copyable; the
// backend outlives every handle.
class FLX_API BackendCalls {
 public:
  explicit BackendCalls(const Device& d);  // loads d's backend if need be
  static BackendCalls of(const Tensor& t);  // the backend holding t's storage

  std::string abi_version() const;
  int device_count() const;
  void* host_alloc(size_t bytes) const;
  void host_free(void* p) const noexcept;
  flx_stream stream_create(int dev) const;
  void stream_destroy(int dev, flx_stream s) const noexcept;
  void synchronize(int dev) const;
  flx_event event_create(int dev) const;
  void event_destroy(int dev, flx_event e) const noexcept;
  void event_record(int dev, flx_event e) const;
  void stream_wait_event(int dev, flx_event e) const;
  bool event_query(int dev, flx_event e) const;
  void copy_h2d(int dev, flx_mem dst, const void* src, size_t bytes) const;
  void copy_d2h(int dev, void* dst, flx_mem src, size_t bytes) const;
  void copy_d2d(int dev, flx_mem dst, flx_mem src, size_t bytes) const;
  void fill(int dev, flx_mem dst, DType t, size_t n, double value) const;
  void cast(int dev, flx_mem dst, DType dst_t, flx_mem src, DType src_t, size_t n) const;
  void* device_address(int dev, flx_mem m) const;
  // The comm table (collectives; the CUDA plugin's, on NCCL).
  bool has_comm() const;
  flx_comm_id comm_id() const;
  flx_comm comm_init(int dev, int nranks, int rank, const flx_comm_id& id) const;
  bool comm_poll(flx_comm c) const;
  void collective(int dev, flx_comm c, const flx_collective_desc& d) const;
  void comm_abort(flx_comm c) const noexcept;
  void comm_destroy(flx_comm c) const noexcept;

 private:
  explicit BackendCalls(const detail::Backend* be) : be_(be) {}
  const detail::Backend* be_;
};

// Makes `s` the current stream of `device` on this thread for the scope's
// lifetime, then restores the previous one.
class FLX_API StreamScope {
 public:
  StreamScope(const Device& device, flx_stream s);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  std::unique_ptr<detail::StreamGuard> guard_;
};

// ---- autodiff ---------------------------------------------------------------
// GradientObserver: autograd's, in internal/gradient_observer.hpp.
FLX_API void add_gradient_observer(const std::shared_ptr<GradientObserver>& o);

// Runs its scope with recording off (as optimiser steps and checkpoints do).
class FLX_API RecordingPause {
 public:
  RecordingPause();
  ~RecordingPause();
  RecordingPause(const RecordingPause&) = delete;
  RecordingPause& operator=(const RecordingPause&) = delete;

 private:
  std::unique_ptr<autograd::PauseScope> scope_;
};

// ---- preferences -----------------------------------------------------------
// The boolean [Flux] `key` of LocalPreferences.toml, or nullopt when the
// file or the key is absent; *source names the file.
FLX_API std::optional<bool> preference_bool(const std::string& key, std::string* source);

// ---- optimiser state -------------------------------------------------------
// Every part of an optimiser state's rule states, named after the
// parameter (checkpoints and distributed::synchronize use the same names):
// <path>.state.t<i> for each leaf's tensors, <path>.state.scalars for its
// host numbers (the vector itself, so a caller can write it back),
// <path>.state.child<j>. for sub-rules. Opt is OptState, const or not.
// A template on the public OptState: nothing of libflx's is called.
template <class Opt, class OnTensor, class OnScalars>
void walk_opt_state(Opt& opt, OnTensor on_tensor, OnScalars on_scalars) {
  auto walk = [&](auto& self, auto& st, const std::string& prefix) -> void {
    for (size_t i = 0; i < st.tensors.size(); ++i)
      if (st.tensors[i].defined()) on_tensor(prefix + "t" + std::to_string(i), st.tensors[i]);
    if (!st.scalars.empty()) on_scalars(prefix + "scalars", st.scalars);
    for (size_t j = 0; j < st.children.size(); ++j)
      self(self, st.children[j], prefix + "child" + std::to_string(j) + ".");
  };
  for (auto& leaf : opt.entries()) walk(walk, leaf.state, (leaf.path.empty() ? "tensor" : leaf.path) + ".state.");
}

}  // namespace flx::internal
