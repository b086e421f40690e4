// Tensor handles, storage, moves between devices, and the factories.
#include <atomic>
#include <cstring>
#include <utility>

#include "autograd.hpp"
#include "devices/registry.hpp"
#include "flx/arrays.hpp"
#include "flx/ops.hpp"
#include "util/host_vector.hpp"
#include "backend_common/philox.hpp"
#include "tensor_impl.hpp"

namespace flx {
namespace detail {

Storage::Storage(const Backend* b, int d, size_t n)
    : be(b), dev(d), buf(nullptr), nbytes(n), stream(current_stream(b->id(), d)) {
  buf = be->alloc(dev, n);
  note_alloc(be->id(), dev, int64_t(n));
}
Storage::~Storage() {
  if (!buf) return;
  be->free_used_on(dev, buf, stream);
  note_free(be->id(), dev, int64_t(nbytes));
}

Tensor share(const Tensor& t, const Shape& shape, uint64_t offset_bytes) {
  auto i = std::make_shared<TensorImpl>();
  const auto& src = *t.impl();
  i->storage = src.storage;
  i->offset = offset_bytes;
  i->shape = shape;
  i->dtype = src.dtype;
  i->device = src.device;
  return Tensor::from_impl(std::move(i));
}

size_t checked_nbytes(const Shape& s, DType t) {
  int64_t bytes = 0;
  FLX_CHECK(!__builtin_mul_overflow(s.numel(), int64_t(dtype_size(t)), &bytes), ArgumentError, "a ", t,
            " tensor of shape ", s, " would need more than 2^63 - 1 bytes (", s.numel(), " elements of ",
            dtype_size(t), " bytes); check the dims passed");
  return size_t(bytes);
}

void* host_data(const Tensor& t) {
  const auto& i = *t.impl();
  void* base = i.storage->be->host_address(i.storage->dev, i.storage->buf);
  return base ? static_cast<char*>(base) + i.offset : nullptr;
}

}  // namespace detail

using detail::impl;

const Shape& Tensor::shape() const {
  FLX_CHECK(impl_, ArgumentError, "this tensor is undefined (e.g. a gradient that did not flow); check defined()");
  return impl_->shape;
}
int64_t Tensor::size(int dim) const {
  FLX_CHECK(dim >= 0, ArgumentError, "size: dims are 0-based and non-negative; got ", dim);
  return dim < ndims() ? shape()[dim] : 1;
}
DType Tensor::dtype() const {
  shape();
  return impl_->dtype;
}
Device Tensor::device() const {
  shape();
  return impl_->device;
}
bool Tensor::requires_grad() const { return impl_ && impl_->node != nullptr; }
// Always a new handle: backward rules save their op's output detached
// before the node is attached to it, and sharing the output's own record
// there would make node → rule → output → node a cycle that never frees.
Tensor Tensor::detach() const {
  if (!impl_) return *this;
  return detail::share(*this, impl_->shape, impl_->offset);
}

void Tensor::read_host(DType as, void* out, size_t n, const char* what) const {
  FLX_CHECK(size_t(numel()) == n, ArgumentError, what, ": expected a tensor with ", n, " element(s); got shape ",
            shape().str());
  Tensor src = dtype() == as ? *this : detach().to(as);
  if (n == 0) return;
  const auto& b = detail::be(src);
  b.copy_d2h(detail::dev(src), out, detail::mem(src), n * dtype_size(as));
  b.synchronize(detail::dev(src));
}

Tensor Tensor::slice_last(int64_t start, int64_t stop) const {
  int nd = ndims();
  FLX_CHECK(nd > 0, DimensionMismatch, "slice_last: a 0-dim tensor has no last dimension");
  int64_t n = shape()[nd - 1];
  FLX_CHECK(0 <= start && start <= stop && stop <= n, DimensionMismatch, "slice_last: range [", start, ", ", stop,
            ") is not within the last dimension (size ", n, ") of a tensor of shape ", shape().str());
  Shape s = shape();
  s[nd - 1] = stop - start;
  int64_t obs = n ? numel() / n : 0;
  Tensor out = detail::share(*this, s, impl_->offset + uint64_t(start * obs) * dtype_size(dtype()));
  if (autograd::tracked(*this)) {
    Shape full = shape();
    DType t = dtype();
    Device d = device();
    autograd::record("slice_last", autograd::Order::Higher, out, {*this},
                     [full, t, d, start, stop, obs](const Tensor& g, const bool*, Tensor* gi) {
      if (detail::is_recording()) {  // an enclosing gradient call records this one: differentiable ops
        std::vector<int64_t> pads(2 * size_t(full.size()), 0);
        pads[pads.size() - 2] = start;
        pads[pads.size() - 1] = full[full.size() - 1] - stop;
        gi[0] = pad_zeros(g, pads);
        return;
      }
      Tensor z = empty(t, full, d);
      const auto& b = detail::be(z);
      b.fill(detail::dev(z), detail::mem(z), t, size_t(z.numel()), 0.0);
      flx_mem dst = detail::mem(z);
      dst.offset += uint64_t(start * obs) * dtype_size(t);
      b.copy_d2d(detail::dev(z), dst, detail::mem(g), size_t(g.numel()) * dtype_size(t));
      gi[0] = z;
    });
  }
  return out;
}

Tensor Tensor::to(Device d) const {
  if (device() == d) return *this;
  Tensor out = empty(dtype(), shape(), d);
  size_t bytes = size_t(numel()) * dtype_size(dtype());
  const auto& sb = detail::be(*this);
  const auto& db = detail::be(out);
  if (bytes) {
    if (&sb == &db) {
      sb.copy_peer(detail::dev(out), detail::mem(out), detail::dev(*this), detail::mem(*this), bytes);
    } else if (void* src = detail::host_data(*this)) {
      db.copy_h2d(detail::dev(out), detail::mem(out), src, bytes);
    } else if (void* dst = detail::host_data(out)) {
      sb.copy_d2h(detail::dev(*this), dst, detail::mem(*this), bytes);
    } else {  // two different GPU backends: stage through the host
      auto tmp = detail::host_vector<char>(bytes, "moving a tensor between backends");
      sb.copy_d2h(detail::dev(*this), tmp.data(), detail::mem(*this), bytes);
      sb.synchronize(detail::dev(*this));
      db.copy_h2d(detail::dev(out), detail::mem(out), tmp.data(), bytes);
    }
    sb.synchronize(detail::dev(*this));
    db.synchronize(detail::dev(out));
  }
  // Differentiable: the gradient goes back to the source device.
  Device src_dev = device();
  autograd::record("to(device)", autograd::Order::Higher, out, {*this},
                   [src_dev](const Tensor& g, const bool*, Tensor* gi) { gi[0] = g.to(src_dev); });
  return out;
}

// ---- factories ---------------------------------------------------------------

namespace {
std::atomic<uint64_t> g_seed{0x5eed'f1f0'cafe'0001ull};
std::atomic<uint64_t> g_counter{0};

void fill_value(const Tensor& t, double v) {
  const auto& b = detail::be(t);
  b.fill(detail::dev(t), detail::mem(t), t.dtype(), size_t(t.numel()), v);
}
Tensor random_fill(DType t, const Shape& s, int dist, double a, double b, Device d = {}) {
  FLX_CHECK(is_floating(t), TypeError, "rand/randn: expected a floating element type; got ", t);
  Tensor out = empty(t, s, d);
  const auto& be = detail::be(out);
  be.random(detail::dev(out), detail::mem(out), t, size_t(out.numel()), dist, g_seed.load(), g_counter.fetch_add(1),
            a, b);
  return out;
}
}  // namespace

namespace detail {
Tensor rand_on(DType t, const Shape& s, Device d) { return random_fill(t, s, FLX_RANDOM_UNIFORM, 0.0, 1.0, d); }
}  // namespace detail

void set_seed(uint64_t seed) {
  g_seed = seed;
  g_counter = 0;
}

namespace detail {
// The stream random_fill would use next (attention's dropout, drawn in
// pieces: src/ops/attention.hpp).
std::pair<uint64_t, uint64_t> next_fill_stream() { return {g_seed.load(), g_counter.fetch_add(1)}; }
uint64_t draw_seed() {
  auto r = philox::bits(g_seed.load(), g_counter.fetch_add(1), 0);
  return uint64_t(r.x[0]) << 32 | r.x[1];
}
}  // namespace detail

Tensor empty(DType t, const Shape& s, Device d) {
  for (auto e : s) FLX_CHECK(e >= 0, DimensionMismatch, "dims must be non-negative; got ", s);
  const auto& b = detail::backend_of(d);
  auto i = std::make_shared<detail::TensorImpl>();
  i->storage = std::make_shared<detail::Storage>(&b, d.ordinal(), detail::checked_nbytes(s, t));
  i->shape = s;
  i->dtype = t;
  i->device = d;
  return Tensor::from_impl(std::move(i));
}
Tensor full(DType t, double value, const Shape& s) {
  Tensor out = empty(t, s);
  fill_value(out, value);
  return out;
}
Tensor zeros(DType t, const Shape& s) { return full(t, 0.0, s); }
Tensor ones(DType t, const Shape& s) { return full(t, 1.0, s); }
Tensor rand(DType t, const Shape& s) { return random_fill(t, s, FLX_RANDOM_UNIFORM, 0.0, 1.0); }
Tensor randn(DType t, const Shape& s) { return random_fill(t, s, FLX_RANDOM_NORMAL, 0.0, 1.0); }

Tensor from_host(const void* data, DType t, const Shape& s) {
  FLX_CHECK(data || s.numel() == 0, ArgumentError, "from_host: expected a pointer to ", s.numel(), " ",
            dtype_name(t), " element(s) for shape ", s.str(), "; got a null pointer (pass the data's address, or an "
            "empty shape for no data)");
  Tensor out = empty(t, s);
  if (size_t bytes = size_t(s.numel()) * dtype_size(t)) std::memcpy(detail::host_data(out), data, bytes);
  return out;
}

}  // namespace flx
