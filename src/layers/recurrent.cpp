// RNN, LSTM, GRU and GRUv3: Flux's cells and layers, their checks and
// printing, and the non-template parts of the sequence runner (Flux's scan,
// detail::run_sequence in the header). A cell's step is made of recorded ops
// (any device, any order of derivative); a layer runs the whole sequence as
// one fused op where it applies (src/ops/recurrent_scan.cpp), else its cell
// step by step.
#include "flx/layers/recurrent.hpp"

#include <sstream>
#include <string>
#include <vector>

#include "flx/autodiff.hpp"
#include "flx/layers/basic.hpp"
#include "ops/recurrent_scan.hpp"

namespace flx {
namespace {

using ops::RecurrentKind;

std::string shape_of(const Tensor& t) { return t.defined() ? t.shape().str() : std::string("undefined"); }

template <class L>
std::string named(const L& l) {
  std::ostringstream os;
  show_compact(os, l);
  return os.str();
}

void check_sizes(const char* layer, int64_t in, int64_t out) {
  FLX_CHECK(in > 0 && out > 0, ArgumentError, layer, ": sizes must be positive; got ", in, " => ", out);
}

// A cell has no initial state of its own, and only a GRU has a candidate
// recurrent bias.
void check_cell_options(const char* cell, const char* layer, const RecurrentOptions& o, bool gru) {
  FLX_CHECK(!o.learned_state, ArgumentError, cell, ": learned_state is an option of the layer (", layer,
            "), which keeps the initial state; a cell starts from the state you pass it");
  FLX_CHECK(gru || !o.recurrent_bias, ArgumentError, cell,
            ": recurrent_bias is an option of GRU and GRUCell only (PyTorch's b_hn); ", cell,
            "'s biases add up into its one bias");
}

// A new kernel of `dims`: the option's initialiser (Flux's init_kernel or
// init_recurrent_kernel), checked to have returned an array of those dims,
// the error naming the layer, the option and the kernel; glorot_uniform
// (Flux's default for both) where the option is empty.
Tensor new_kernel(const std::string& layer, const char* option, const char* kernel, const InitFn& init,
                  const Shape& dims) {
  if (!init) return glorot_uniform(dims);
  Tensor w = init(dims);
  FLX_CHECK(w.defined() && w.shape() == dims, DimensionMismatch, layer, ": the .", option,
            " function must return an array of the dims it is given, ", dims, " for ", kernel, "; got ",
            shape_of(w));
  return w;
}

// A new cell's parameters, drawn in Flux's order (Wi, Wh, then GRUv3's
// Wh_h̃): a cell of k gates, with a zero bias (in the kernels' element type,
// as Flux's create_bias) unless {.bias = false}, a GRU's candidate recurrent
// bias with {.recurrent_bias = true}, and (v3) GRUv3's Wh_h̃.
struct CellWeights {
  Tensor wi, wh, b, bh, whh;
};
CellWeights new_weights(const std::string& layer, int k, int64_t in, int64_t out, const RecurrentOptions& o,
                        bool v3 = false) {
  const std::string gates = k == 1 ? "" : std::to_string(k) + "·";
  CellWeights w;
  w.wi = new_kernel(layer, "init_kernel", ("Wi (" + gates + "out, in)").c_str(), o.init_kernel, Shape{k * out, in});
  w.wh = new_kernel(layer, "init_recurrent_kernel", ("Wh (" + gates + "out, out)").c_str(), o.init_recurrent_kernel,
                    Shape{k * out, out});
  if (v3)
    w.whh = new_kernel(layer, "init_recurrent_kernel", "Wh_h\u0303 (out, out)", o.init_recurrent_kernel,
                       Shape{out, out});
  if (o.bias) w.b = zeros(w.wi.dtype(), Shape{k * out});
  if (o.recurrent_bias) w.bh = zeros(w.wi.dtype(), Shape{out});
  return w;
}

// A layer's cell, its parameters drawn as the cell's constructor draws them;
// its sizes and options checked first, so that an error names the layer,
// not its cell.
CellWeights layer_weights(const char* layer, int k, int64_t in, int64_t out, const RecurrentOptions& o, bool gru,
                          bool v3 = false) {
  check_sizes(layer, in, out);
  FLX_CHECK(gru || !o.recurrent_bias, ArgumentError, layer,
            ": recurrent_bias is an option of GRU and GRUCell only (PyTorch's b_hn); ", layer,
            "'s biases add up into its one bias");
  return new_weights(layer, k, in, out, o, v3);
}

// Wi (k·H, in), Wh (k·H, H), bias (k·H) or undefined, as a cell of k gates needs them.
void check_weights(const char* cell, int k, const Tensor& wi, const Tensor& wh, const Tensor& b, const char* bname) {
  FLX_CHECK(wi.defined() && wi.ndims() == 2 && wi.shape()[0] > 0 && wi.shape()[0] % k == 0, DimensionMismatch, cell,
            ": Wi must be a matrix (", k == 1 ? "" : std::to_string(k) + "·", "out, in); got shape ", shape_of(wi));
  const int64_t rows = wi.shape()[0], h = rows / k;
  FLX_CHECK(wh.defined() && wh.shape() == (Shape{rows, h}), DimensionMismatch, cell, ": Wh must have shape ",
            Shape{rows, h}, " to match Wi ", wi.shape(), "; got ", shape_of(wh));
  FLX_CHECK(!b.defined() || b.shape() == Shape{rows}, DimensionMismatch, cell, ": ", bname, " must have shape (",
            rows, ") to match Wi ", wi.shape(), "; got ", b.shape());
}

void check_state0(const std::string& layer, const char* what, const Tensor& s, int64_t out) {
  FLX_CHECK(!s.defined() || s.shape() == Shape{out}, DimensionMismatch, layer, ": the learned initial state ", what,
            " must have shape (", out, "); got ", s.shape());
}

// x: (in) or (in, batch); the output (out) or (out, batch).
Shape step_shape(const std::string& cell, const Shape& x, int64_t in, int64_t out, const std::string& got) {
  FLX_CHECK((x.ndims() == 1 || x.ndims() == 2) && x[0] == in, DimensionMismatch, cell, ": expected an input of ", in,
            " features, (", in, ") or (", in, ", batch); got shape ", got,
            ". A whole sequence (features, time, batch) goes to the layer (RNN, LSTM, GRU) instead");
  Shape y = x;
  y[0] = out;
  return y;
}
void check_step_input(const std::string& cell, const Tensor& x, int64_t in) {
  if (!x.defined()) (void)step_shape(cell, Shape{}, in, 0, "undefined");
  (void)step_shape(cell, x.shape(), in, 0, x.shape().str());
}

// A state part of (out) or (out, batch), batch that of x when x has one
// (batch_of_x < 0: x has none).
void check_state(const std::string& layer, const char* what, const Tensor& s, int64_t out, int64_t batch_of_x) {
  const bool ok = s.defined() && (s.ndims() == 1 || s.ndims() == 2) && s.shape()[0] == out &&
                  (s.ndims() == 1 || batch_of_x < 0 || s.shape()[1] == batch_of_x);
  FLX_CHECK(ok, DimensionMismatch, layer, ": expected the state ", what, " of shape (", out, ") or (", out, ", ",
            batch_of_x < 0 ? std::string("batch") : std::to_string(batch_of_x), "); got shape ", shape_of(s),
            ". initialstates(layer) gives the zero state");
}

// x: (in, time, batch) or (in, time); the output (out, time[, batch]). in < 0:
// any number of features (a cell of your own, whose size is its own business).
Shape sequence_shape_of(const std::string& layer, const Shape& x, int64_t in, int64_t out, const std::string& got) {
  if (in < 0) {
    FLX_CHECK(x.ndims() == 2 || x.ndims() == 3, DimensionMismatch, layer,
              ": expected a sequence (features, time, batch) or (features, time); got shape ", got,
              x.ndims() == 1 ? ". One time step goes to the cell (.cell) instead" : "");
  } else {
    FLX_CHECK((x.ndims() == 2 || x.ndims() == 3) && x[0] == in, DimensionMismatch, layer,
              ": expected a sequence of ", in, " features, (", in, ", time, batch) or (", in, ", time); got shape ",
              got, x.ndims() == 1 ? ". One time step goes to the cell (.cell) instead" : "");
  }
  FLX_CHECK(x[1] > 0, DimensionMismatch, layer, ": expected at least one time step; got shape ", x);
  Shape y = x;
  y[0] = out;
  return y;
}

// Wi x .+ b, (k·H) or (k·H, batch): one GEMM with the bias fused where the
// backend can (as Dense does).
Tensor project(const Tensor& wi, const Tensor& x, const Tensor& b) {
  return ops::dense(wi, x, b, Activation{});  // the default Activation is identity
}

// The k gates of g, (k·H) or (k·H, batch), each (H) or (H, batch): the
// gate index moved last, then a view of each slot.
std::vector<Tensor> chunk(const Tensor& g, int k) {
  const int64_t h = g.shape()[0] / k;
  std::vector<Tensor> out;
  if (g.ndims() == 1) {
    const Tensor m = reshape(g, {h, k});
    for (int j = 0; j < k; ++j) out.push_back(reshape(m.slice_last(j, j + 1), {h}));
  } else {
    const int64_t b = g.shape()[1];
    const Tensor m = permutedims(reshape(g, {h, k, b}), {0, 2, 1});
    for (int j = 0; j < k; ++j) out.push_back(reshape(m.slice_last(j, j + 1), {h, b}));
  }
  return out;
}

// A state (out) or (out, B) as the fused op takes it: (out, B).
Tensor batch_state(const Tensor& s, int64_t b) {
  return s.ndims() == 1 ? ops::broadcast_to(s, Shape{s.shape()[0], b}) : s;
}

ops::RecurrentAct fused_act(const Activation& a, bool* supported) {
  using Kind = Activation::Kind;
  *supported = true;
  switch (a.kind()) {
    case Kind::Identity: return ops::RecurrentAct::Identity;
    case Kind::Tanh: return ops::RecurrentAct::Tanh;
    case Kind::Relu: return ops::RecurrentAct::Relu;
    case Kind::Sigmoid: return ops::RecurrentAct::Sigmoid;
    default: *supported = false; return ops::RecurrentAct::Identity;
  }
}

// The fused op's Z as the runner takes it: the outputs (H, T, B) and, when
// asked for, the last state's parts (H, B) (src/ops/recurrent_scan.hpp).
struct Unpacked {
  Tensor y, h, c;
};
Unpacked unpack(const Tensor& z, const detail::Sequence& s, bool with_state, bool lstm) {
  if (!with_state) return {z, Tensor{}, Tensor{}};
  const int64_t h = z.shape()[0], tb = s.T * s.B;
  Unpacked u{reshape(z.slice_last(0, tb), {h, s.T, s.B}), reshape(z.slice_last(tb, tb + s.B), {h, s.B}), Tensor{}};
  if (lstm) u.c = reshape(z.slice_last(tb + s.B, tb + 2 * s.B), {h, s.B});
  return u;
}

// How a layer's parameters print after its sizes (Julia's keyword syntax).
void show_options(std::ostream& os, bool bias, bool learned_state, bool recurrent_bias) {
  std::vector<std::string> kw;
  if (!bias) kw.push_back("bias=false");
  if (learned_state) kw.push_back("learned_state=true");
  if (recurrent_bias) kw.push_back("recurrent_bias=true");
  for (size_t i = 0; i < kw.size(); ++i) os << (i ? ", " : "; ") << kw[i];
}


Tensor zeros_like_rows(const Tensor& w, int64_t n) { return zeros(w.dtype(), Shape{n}).to(w.device()); }

}  // namespace

// ---- cells -------------------------------------------------------------------

RNNCell::RNNCell(int64_t in, int64_t out, Activation a, const RecurrentOptions& o) : act(std::move(a)) {
  check_sizes("RNNCell", in, out);
  check_cell_options("RNNCell", "RNN", o, false);
  CellWeights w = new_weights("RNNCell", 1, in, out, o);
  Wi = std::move(w.wi), Wh = std::move(w.wh), bias = std::move(w.b);
}
RNNCell::RNNCell(Tensor wi, Tensor wh, Tensor b, Activation a)
    : Wi(std::move(wi)), Wh(std::move(wh)), bias(std::move(b)), act(std::move(a)) {
  check_weights("RNNCell", 1, Wi, Wh, bias, "bias");
}
RecurrentOutput<Tensor> RNNCell::operator()(const Tensor& x) const { return (*this)(x, initialstates(*this)); }
RecurrentOutput<Tensor> RNNCell::operator()(const Tensor& x, const Tensor& h) const {
  const std::string name = named(*this);
  check_step_input(name, x, Wi.shape()[1]);
  check_state(name, "h", h, Wh.shape()[1], x.ndims() == 2 ? x.shape()[1] : -1);
  Tensor h2 = act(project(Wi, x, bias) + matmul(Wh, h));
  return {h2, h2};
}

LSTMCell::LSTMCell(int64_t in, int64_t out, const RecurrentOptions& o) {
  check_sizes("LSTMCell", in, out);
  check_cell_options("LSTMCell", "LSTM", o, false);
  CellWeights w = new_weights("LSTMCell", 4, in, out, o);
  Wi = std::move(w.wi), Wh = std::move(w.wh), bias = std::move(w.b);
}
LSTMCell::LSTMCell(Tensor wi, Tensor wh, Tensor b) : Wi(std::move(wi)), Wh(std::move(wh)), bias(std::move(b)) {
  check_weights("LSTMCell", 4, Wi, Wh, bias, "bias");
}
RecurrentOutput<LSTMState> LSTMCell::operator()(const Tensor& x) const { return (*this)(x, initialstates(*this)); }
RecurrentOutput<LSTMState> LSTMCell::operator()(const Tensor& x, const LSTMState& s) const {
  const std::string name = named(*this);
  const int64_t out = Wh.shape()[1], batch = x.defined() && x.ndims() == 2 ? x.shape()[1] : -1;
  check_step_input(name, x, Wi.shape()[1]);
  check_state(name, "h", s.h, out, batch);
  check_state(name, "c", s.c, out, batch);
  const auto g = chunk(project(Wi, x, bias) + matmul(Wh, s.h), 4);  // input, forget, cell, output
  Tensor c = sigmoid(g[1]) * s.c + sigmoid(g[0]) * flx::tanh(g[2]);
  Tensor h = sigmoid(g[3]) * flx::tanh(c);
  return {h, {h, c}};
}

GRUCell::GRUCell(int64_t in, int64_t out, const RecurrentOptions& o) {
  check_sizes("GRUCell", in, out);
  check_cell_options("GRUCell", "GRU", o, true);
  CellWeights w = new_weights("GRUCell", 3, in, out, o);
  Wi = std::move(w.wi), Wh = std::move(w.wh), b = std::move(w.b), bh = std::move(w.bh);
}
GRUCell::GRUCell(Tensor wi, Tensor wh, Tensor b0, Tensor bh0)
    : Wi(std::move(wi)), Wh(std::move(wh)), b(std::move(b0)), bh(std::move(bh0)) {
  check_weights("GRUCell", 3, Wi, Wh, b, "b");
  FLX_CHECK(!bh.defined() || bh.shape() == Shape{Wh.shape()[1]}, DimensionMismatch,
            "GRUCell: bh (the candidate's recurrent bias) must have shape (", Wh.shape()[1], "); got ", bh.shape());
}
RecurrentOutput<Tensor> GRUCell::operator()(const Tensor& x) const { return (*this)(x, initialstates(*this)); }
RecurrentOutput<Tensor> GRUCell::operator()(const Tensor& x, const Tensor& h) const {
  const std::string name = named(*this);
  check_step_input(name, x, Wi.shape()[1]);
  check_state(name, "h", h, Wh.shape()[1], x.ndims() == 2 ? x.shape()[1] : -1);
  const auto gx = chunk(project(Wi, x, b), 3), gh = chunk(matmul(Wh, h), 3);  // reset, update, candidate
  Tensor r = sigmoid(gx[0] + gh[0]), z = sigmoid(gx[1] + gh[1]);
  Tensor n = flx::tanh(gx[2] + r * (bh.defined() ? gh[2] + bh : gh[2]));
  Tensor h2 = (1.0 - z) * n + z * h;
  return {h2, h2};
}

GRUv3Cell::GRUv3Cell(int64_t in, int64_t out, const RecurrentOptions& o) {
  check_sizes("GRUv3Cell", in, out);
  check_cell_options("GRUv3Cell", "GRUv3", o, false);
  CellWeights w = new_weights("GRUv3Cell", 3, in, out, o, true);
  Wi = std::move(w.wi), Wh = std::move(w.wh), b = std::move(w.b), Wh_h = std::move(w.whh);
}
GRUv3Cell::GRUv3Cell(Tensor wi, Tensor wh, Tensor b0, Tensor whh)
    : Wi(std::move(wi)), Wh(std::move(wh)), b(std::move(b0)), Wh_h(std::move(whh)) {
  check_weights("GRUv3Cell", 3, Wi, Wh, b, "b");
  const int64_t out = Wh.shape()[1];
  FLX_CHECK(Wh_h.defined() && Wh_h.shape() == (Shape{out, out}), DimensionMismatch,
            "GRUv3Cell: Wh_h (Flux's Wh_h\u0303, the candidate's recurrent kernel) must have shape ",
            Shape{out, out}.str(), " to match Wh ", Wh.shape().str(), "; got ", shape_of(Wh_h));
}
RecurrentOutput<Tensor> GRUv3Cell::operator()(const Tensor& x) const { return (*this)(x, initialstates(*this)); }
RecurrentOutput<Tensor> GRUv3Cell::operator()(const Tensor& x, const Tensor& h) const {
  const std::string name = named(*this);
  check_step_input(name, x, Wi.shape()[1]);
  check_state(name, "h", h, Wh.shape()[1], x.ndims() == 2 ? x.shape()[1] : -1);
  const auto gx = chunk(project(Wi, x, b), 3), gh = chunk(matmul(Wh, h), 3);  // reset, update, (unused)
  Tensor r = sigmoid(gx[0] + gh[0]), z = sigmoid(gx[1] + gh[1]);
  Tensor n = flx::tanh(gx[2] + matmul(Wh_h, r * h));
  Tensor h2 = (1.0 - z) * n + z * h;
  return {h2, h2};
}

// ---- the sequence runner's parts -----------------------------------------------

namespace detail {

Shape sequence_shape(const std::string& layer, const Shape& x, int64_t in, int64_t out) {
  return sequence_shape_of(layer, x, in, out, x.str());
}
Sequence as_sequence(const std::string& layer, const Tensor& x, int64_t in) {
  if (!x.defined()) (void)sequence_shape_of(layer, Shape{}, in, 0, "undefined");
  (void)sequence_shape_of(layer, x.shape(), in, 0, x.shape().str());
  const bool batched = x.ndims() == 3;
  const int64_t T = x.shape()[1], B = batched ? x.shape()[2] : 1;
  return {batched ? x : reshape(x, {x.shape()[0], T, 1}), batched, T, B};
}
Tensor unbatch_output(const Tensor& y, const Sequence& s) {
  return s.batched ? y : reshape(y, {y.shape()[0], s.T});
}
Tensor unbatch_state(const Tensor& h, const Sequence& s) {
  return !h.defined() || s.batched || h.ndims() == 1 ? h : reshape(h, {h.shape()[0]});
}
Tensor stack_steps(const std::vector<Tensor>& outs) { return permutedims(ops::stack_last(outs), {0, 2, 1}); }

void check_sequence_state(const std::string& layer, const RNNCell& c, const Tensor& h, int64_t batch) {
  check_state(layer, "h", h, c.Wh.shape()[1], batch);
}
void check_sequence_state(const std::string& layer, const LSTMCell& c, const LSTMState& s, int64_t batch) {
  check_state(layer, "h", s.h, c.Wh.shape()[1], batch);
  check_state(layer, "c", s.c, c.Wh.shape()[1], batch);
}
void check_sequence_state(const std::string& layer, const GRUCell& c, const Tensor& h, int64_t batch) {
  check_state(layer, "h", h, c.Wh.shape()[1], batch);
}
void check_sequence_state(const std::string& layer, const GRUv3Cell& c, const Tensor& h, int64_t batch) {
  check_state(layer, "h", h, c.Wh.shape()[1], batch);
}

bool fused_sequence(const RNNCell& c, const Sequence& s, const Tensor& h, bool want_state,
                    RecurrentOutput<Tensor>* out) {
  bool supported = false;
  const auto act = fused_act(c.act, &supported);
  if (!supported) return false;
  const Tensor z = ops::recurrent_scan(RecurrentKind::RNN, act, s.x, c.Wi, c.Wh, c.bias, Tensor{},
                                       batch_state(h, s.B), Tensor{}, want_state);
  if (!z.defined()) return false;
  const Unpacked u = unpack(z, s, want_state, false);
  *out = {u.y, u.h};
  return true;
}
bool fused_sequence(const LSTMCell& c, const Sequence& s, const LSTMState& st, bool want_state,
                    RecurrentOutput<LSTMState>* out) {
  const Tensor z = ops::recurrent_scan(RecurrentKind::LSTM, ops::RecurrentAct::Identity, s.x, c.Wi, c.Wh, c.bias,
                                       Tensor{}, batch_state(st.h, s.B), batch_state(st.c, s.B), want_state);
  if (!z.defined()) return false;
  const Unpacked u = unpack(z, s, want_state, true);
  *out = {u.y, {u.h, u.c}};
  return true;
}
bool fused_sequence(const GRUCell& c, const Sequence& s, const Tensor& h, bool want_state,
                    RecurrentOutput<Tensor>* out) {
  const Tensor z = ops::recurrent_scan(RecurrentKind::GRU, ops::RecurrentAct::Identity, s.x, c.Wi, c.Wh, c.b, c.bh,
                                       batch_state(h, s.B), Tensor{}, want_state);
  if (!z.defined()) return false;
  const Unpacked u = unpack(z, s, want_state, false);
  *out = {u.y, u.h};
  return true;
}

}  // namespace detail

// ---- layers ------------------------------------------------------------------

RNN::RNN(int64_t in, int64_t out, Activation act, const RecurrentOptions& o)
    : cell([&] {
        CellWeights w = layer_weights("RNN", 1, in, out, o, false);
        return RNNCell(std::move(w.wi), std::move(w.wh), std::move(w.b), std::move(act));
      }()) {
  if (o.learned_state) state0 = zeros(cell.Wh.dtype(), Shape{out});
}
RNN::RNN(RNNCell c, Tensor s0) : cell(std::move(c)), state0(std::move(s0)) {
  check_state0(named(*this), "state0", state0, cell.Wh.shape()[1]);
}
Tensor RNN::operator()(const Tensor& x) const { return (*this)(x, initialstates(*this)); }
Tensor RNN::operator()(const Tensor& x, const Tensor& h) const {
  return detail::run_sequence(named(*this), cell, x, h, false).output;
}
RecurrentOutput<Tensor> RNN::with_state(const Tensor& x) const { return with_state(x, initialstates(*this)); }
RecurrentOutput<Tensor> RNN::with_state(const Tensor& x, const Tensor& h) const {
  return detail::run_sequence(named(*this), cell, x, h, true);
}

LSTM::LSTM(int64_t in, int64_t out, const RecurrentOptions& o)
    : cell([&] {
        CellWeights w = layer_weights("LSTM", 4, in, out, o, false);
        return LSTMCell(std::move(w.wi), std::move(w.wh), std::move(w.b));
      }()) {
  if (o.learned_state) state0 = {zeros(cell.Wh.dtype(), Shape{out}), zeros(cell.Wh.dtype(), Shape{out})};
}
LSTM::LSTM(LSTMCell c, LSTMState s0) : cell(std::move(c)), state0(std::move(s0)) {
  const std::string name = named(*this);
  FLX_CHECK(state0.h.defined() == state0.c.defined(), ArgumentError, name,
            ": a learned initial state needs both h and c (or neither)");
  check_state0(name, "h", state0.h, cell.Wh.shape()[1]);
  check_state0(name, "c", state0.c, cell.Wh.shape()[1]);
}
Tensor LSTM::operator()(const Tensor& x) const { return (*this)(x, initialstates(*this)); }
Tensor LSTM::operator()(const Tensor& x, const LSTMState& st) const {
  return detail::run_sequence(named(*this), cell, x, st, false).output;
}
RecurrentOutput<LSTMState> LSTM::with_state(const Tensor& x) const { return with_state(x, initialstates(*this)); }
RecurrentOutput<LSTMState> LSTM::with_state(const Tensor& x, const LSTMState& st) const {
  return detail::run_sequence(named(*this), cell, x, st, true);
}

GRU::GRU(int64_t in, int64_t out, const RecurrentOptions& o)
    : cell([&] {
        CellWeights w = layer_weights("GRU", 3, in, out, o, true);
        return GRUCell(std::move(w.wi), std::move(w.wh), std::move(w.b), std::move(w.bh));
      }()) {
  if (o.learned_state) state0 = zeros(cell.Wh.dtype(), Shape{out});
}
GRU::GRU(GRUCell c, Tensor s0) : cell(std::move(c)), state0(std::move(s0)) {
  check_state0(named(*this), "state0", state0, cell.Wh.shape()[1]);
}
Tensor GRU::operator()(const Tensor& x) const { return (*this)(x, initialstates(*this)); }
Tensor GRU::operator()(const Tensor& x, const Tensor& h) const {
  return detail::run_sequence(named(*this), cell, x, h, false).output;
}
RecurrentOutput<Tensor> GRU::with_state(const Tensor& x) const { return with_state(x, initialstates(*this)); }
RecurrentOutput<Tensor> GRU::with_state(const Tensor& x, const Tensor& h) const {
  return detail::run_sequence(named(*this), cell, x, h, true);
}

GRUv3::GRUv3(int64_t in, int64_t out, const RecurrentOptions& o)
    : cell([&] {
        CellWeights w = layer_weights("GRUv3", 3, in, out, o, false, true);
        return GRUv3Cell(std::move(w.wi), std::move(w.wh), std::move(w.b), std::move(w.whh));
      }()) {
  if (o.learned_state) state0 = zeros(cell.Wh.dtype(), Shape{out});
}
GRUv3::GRUv3(GRUv3Cell c, Tensor s0) : cell(std::move(c)), state0(std::move(s0)) {
  check_state0(named(*this), "state0", state0, cell.Wh.shape()[1]);
}
Tensor GRUv3::operator()(const Tensor& x) const { return (*this)(x, initialstates(*this)); }
Tensor GRUv3::operator()(const Tensor& x, const Tensor& h) const {
  return detail::run_sequence(named(*this), cell, x, h, false).output;
}
RecurrentOutput<Tensor> GRUv3::with_state(const Tensor& x) const { return with_state(x, initialstates(*this)); }
RecurrentOutput<Tensor> GRUv3::with_state(const Tensor& x, const Tensor& h) const {
  return detail::run_sequence(named(*this), cell, x, h, true);
}

// ---- initial states ----------------------------------------------------------

Tensor initialstates(const RNNCell& c) { return zeros_like_rows(c.Wh, c.Wh.shape()[1]); }
LSTMState initialstates(const LSTMCell& c) {
  return {zeros_like_rows(c.Wh, c.Wh.shape()[1]), zeros_like_rows(c.Wh, c.Wh.shape()[1])};
}
Tensor initialstates(const GRUCell& c) { return zeros_like_rows(c.Wh, c.Wh.shape()[1]); }
Tensor initialstates(const GRUv3Cell& c) { return zeros_like_rows(c.Wh, c.Wh.shape()[1]); }
Tensor initialstates(const RNN& l) { return l.state0.defined() ? l.state0 : initialstates(l.cell); }
LSTMState initialstates(const LSTM& l) { return l.state0.h.defined() ? l.state0 : initialstates(l.cell); }
Tensor initialstates(const GRU& l) { return l.state0.defined() ? l.state0 : initialstates(l.cell); }
Tensor initialstates(const GRUv3& l) { return l.state0.defined() ? l.state0 : initialstates(l.cell); }

// ---- printing ----------------------------------------------------------------

void show_compact(std::ostream& os, const RNNCell& l) {
  os << "RNNCell(" << l.Wi.shape()[1] << " => " << l.Wi.shape()[0] << ", " << l.act;
  show_options(os, l.bias.defined(), false, false);
  os << ")";
}
void show_compact(std::ostream& os, const LSTMCell& l) {
  os << "LSTMCell(" << l.Wi.shape()[1] << " => " << l.Wi.shape()[0] / 4;
  show_options(os, l.bias.defined(), false, false);
  os << ")";
}
void show_compact(std::ostream& os, const GRUCell& l) {
  os << "GRUCell(" << l.Wi.shape()[1] << " => " << l.Wi.shape()[0] / 3;
  show_options(os, l.b.defined(), false, l.bh.defined());
  os << ")";
}
void show_compact(std::ostream& os, const GRUv3Cell& l) {
  os << "GRUv3Cell(" << l.Wi.shape()[1] << " => " << l.Wi.shape()[0] / 3;
  show_options(os, l.b.defined(), false, false);
  os << ")";
}
void show_compact(std::ostream& os, const RNN& l) {
  os << "RNN(" << l.cell.Wi.shape()[1] << " => " << l.cell.Wi.shape()[0] << ", " << l.cell.act;
  show_options(os, l.cell.bias.defined(), l.state0.defined(), false);
  os << ")";
}
void show_compact(std::ostream& os, const LSTM& l) {
  os << "LSTM(" << l.cell.Wi.shape()[1] << " => " << l.cell.Wi.shape()[0] / 4;
  show_options(os, l.cell.bias.defined(), l.state0.h.defined(), false);
  os << ")";
}
void show_compact(std::ostream& os, const GRU& l) {
  os << "GRU(" << l.cell.Wi.shape()[1] << " => " << l.cell.Wi.shape()[0] / 3;
  show_options(os, l.cell.b.defined(), l.state0.defined(), l.cell.bh.defined());
  os << ")";
}
void show_compact(std::ostream& os, const GRUv3& l) {
  os << "GRUv3(" << l.cell.Wi.shape()[1] << " => " << l.cell.Wi.shape()[0] / 3;
  show_options(os, l.cell.b.defined(), l.state0.defined(), false);
  os << ")";
}
// ---- shape rules (outputsize) ----------------------------------------------------

Shape outputsize(const RNNCell& l, const Shape& x) {
  return step_shape(named(l), x, l.Wi.shape()[1], l.Wh.shape()[1], x.str());
}
Shape outputsize(const LSTMCell& l, const Shape& x) {
  return step_shape(named(l), x, l.Wi.shape()[1], l.Wh.shape()[1], x.str());
}
Shape outputsize(const GRUCell& l, const Shape& x) {
  return step_shape(named(l), x, l.Wi.shape()[1], l.Wh.shape()[1], x.str());
}
Shape outputsize(const GRUv3Cell& l, const Shape& x) {
  return step_shape(named(l), x, l.Wi.shape()[1], l.Wh.shape()[1], x.str());
}
Shape outputsize(const RNN& l, const Shape& x) {
  return sequence_shape_of(named(l), x, l.cell.Wi.shape()[1], l.cell.Wh.shape()[1], x.str());
}
Shape outputsize(const LSTM& l, const Shape& x) {
  return sequence_shape_of(named(l), x, l.cell.Wi.shape()[1], l.cell.Wh.shape()[1], x.str());
}
Shape outputsize(const GRU& l, const Shape& x) {
  return sequence_shape_of(named(l), x, l.cell.Wi.shape()[1], l.cell.Wh.shape()[1], x.str());
}
Shape outputsize(const GRUv3& l, const Shape& x) {
  return sequence_shape_of(named(l), x, l.cell.Wi.shape()[1], l.cell.Wh.shape()[1], x.str());
}

}  // namespace flx
