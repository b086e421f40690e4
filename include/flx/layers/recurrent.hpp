// Recurrent layers (Flux 0.16's recurrent.jl): the cells RNNCell, LSTMCell,
// GRUCell and GRUv3Cell, which take one time step, the layers RNN, LSTM, GRU
// and GRUv3, which run a cell over a whole sequence, and Recurrence, which
// runs any cell over a whole sequence.
//
//   auto lstm = LSTM(3, 5);                 // LSTM(3 => 5)  # 180 parameters
//   Tensor y = lstm(rand(3, 10, 4));        // (features, time, batch) -> (5, 10, 4)
//   auto cell = LSTMCell(3, 5);
//   auto [h, state] = cell(rand(3, 4));     // one step from the zero state: h (5, 4), state {h, c}
//   std::tie(h, state) = cell(rand(3, 4), state);
//   auto r = Recurrence(GRUv3Cell(3, 5));   // any cell over a sequence: r(x), r.with_state(x, h)
//
// Each prints as Flux shows it, LSTM(3 => 5)  # 180 parameters, options that
// are not the defaults after the sizes: GRU(3 => 5; recurrent_bias=true).
// A cell's shape rule gives (out) or (out, batch) for (in) or (in, batch), a
// layer's (out, time[, batch]).
//
// Parameters as Flux keeps them: Wi (k·out, in), Wh (k·out, out) and a bias
// (k·out), the k gates stacked in Flux's order (LSTM: input, forget, cell,
// output; GRU: reset, update, candidate), Glorot-uniform kernels and a zero
// bias (Flux's keywords: {.bias = false} for none, .init_kernel and
// .init_recurrent_kernel for other kernels, as RecurrentOptions says). The
// initial state is zeros unless given, or learned: with
// {.learned_state = true} a layer holds a trainable `state0` (zeros at first)
// that it starts every sequence from. Every layer runs through one sequence
// runner (Flux's scan, detail::run_sequence below): for the cells a backend
// knows (RNNCell with tanh, relu, sigmoid or identity, LSTMCell, GRUCell) the
// whole sequence forward and backward as one recorded op, on the CPU, OpenCL
// and CUDA alike (src/ops/recurrent_scan.cpp), for any other cell (GRUv3Cell,
// a cell of your own, halves) the cell step by step.
//
// Each layer's declarations follow its struct: FLX_FUNCTOR (its tensors) or
// FLX_LEAF (none), show_compact (its one-line form, as Flux prints it;
// `os << layer` adds the counts: show.hpp) and outputsize (its shape rule:
// the forward pass's checks and sizes without computing: outputsize.hpp).
#pragma once

#include "flx/export.hpp"

#include <cstdint>
#include <ostream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "flx/activations.hpp"
#include "flx/functor.hpp"
#include "flx/initialisers.hpp"
#include "flx/layers/outputsize.hpp"
#include "flx/layers/show.hpp"

namespace flx {

// What a cell returns, and what a layer's with_state returns: the output and
// the state to carry on with. A struct rather than a std::pair so that the
// two read by name (`.output`, `.state`) as well as by structured binding.
template <class State>
struct RecurrentOutput {
  Tensor output;
  State state;
};
template <class State>
auto flx_functor_fields(detail::tag<RecurrentOutput<State>>) {
  using R = RecurrentOutput<State>;
  return std::make_tuple(detail::Field<R, Tensor>{"output", &R::output}, detail::Field<R, State>{"state", &R::state});
}

// An LSTM's state: the hidden state h (Flux's output) and the cell state c,
// each (out) or (out, batch).
struct FLX_API LSTMState {
  Tensor h;
  Tensor c;
};
FLX_FUNCTOR(LSTMState, h, c)

// Flux's keywords of every recurrent cell and layer (a layer passes them to
// its cell), in the order that designated initialisers must follow:
//   LSTM(3, 5, {.bias = false, .init_recurrent_kernel = orthogonal})
struct FLX_API RecurrentOptions {
  bool bias = true;            // learn a bias (Flux's `bias` keyword); false: none
  bool learned_state = false;  // layers only: a trainable initial state `state0`, zeros at first
  // GRU and GRUCell only: a second bias for the candidate's recurrent
  // product, inside the reset gate: h̃ = tanh(Wi_h x + b_h + r ⊙ (Wh_h h + bh)).
  // PyTorch's nn.GRU has it (b_hn), Flux's GRUCell does not; off by default, so
  // that the layer is Flux's, on when loading a PyTorch GRU (docs/checkpoints.md).
  bool recurrent_bias = false;
  // Flux's init_kernel and init_recurrent_kernel: called with the dims of
  // the input kernel Wi, (k·out, in), and of the recurrent kernel Wh,
  // (k·out, out) (and, for GRUv3Cell, of Wh_h̃, (out, out)), k the number of
  // gates (RNN 1, LSTM 4, GRU and GRUv3 3); each must return an array of
  // those dims. Empty: glorot_uniform, Flux's default for both. Any
  // initialiser of initialisers.hpp is one as it is (`orthogonal`).
  InitFn init_kernel = {};
  InitFn init_recurrent_kernel = {};
};

// h' = act.(Wi x .+ Wh h .+ bias); the output is h'.
struct FLX_API RNNCell {
  Tensor Wi;    // (out, in)
  Tensor Wh;    // (out, out)
  Tensor bias;  // (out), undefined with {.bias = false}
  Activation act;

  RNNCell(int64_t in, int64_t out, Activation act = flx::tanh, const RecurrentOptions& o = {});
  RNNCell(Tensor Wi, Tensor Wh, Tensor bias, Activation act = flx::tanh);
  // x: (in) or (in, batch); h: (out) or (out, batch). Without h, zeros.
  RecurrentOutput<Tensor> operator()(const Tensor& x) const;
  RecurrentOutput<Tensor> operator()(const Tensor& x, const Tensor& h) const;
};
FLX_FUNCTOR(RNNCell, Wi, Wh, bias)
FLX_API void show_compact(std::ostream& os, const RNNCell& l);
FLX_API Shape outputsize(const RNNCell& l, const Shape& x);

// i, f, g, o = the four gates of Wi x .+ Wh h .+ bias;
// c' = σ(f) ⊙ c + σ(i) ⊙ tanh(g), h' = σ(o) ⊙ tanh(c'); the output is h'.
struct FLX_API LSTMCell {
  Tensor Wi;    // (4out, in)
  Tensor Wh;    // (4out, out)
  Tensor bias;  // (4out), undefined with {.bias = false}

  LSTMCell(int64_t in, int64_t out, const RecurrentOptions& o = {});
  LSTMCell(Tensor Wi, Tensor Wh, Tensor bias);
  RecurrentOutput<LSTMState> operator()(const Tensor& x) const;
  RecurrentOutput<LSTMState> operator()(const Tensor& x, const LSTMState& state) const;
};
FLX_FUNCTOR(LSTMCell, Wi, Wh, bias)
FLX_API void show_compact(std::ostream& os, const LSTMCell& l);
FLX_API Shape outputsize(const LSTMCell& l, const Shape& x);

// Flux's GRUCell (GRU v1 of Cho et al.): with gx = Wi x, gh = Wh h split in
// three, r = σ(gx_r + gh_r + b_r), z = σ(gx_z + gh_z + b_z),
// h̃ = tanh(gx_h + b_h + r ⊙ (gh_h [+ bh])), h' = (1 - z) ⊙ h̃ + z ⊙ h.
// Flux names this cell's bias `b` (the others' `bias`); so does flx, so that
// the checkpoint keys are Flux's.
struct FLX_API GRUCell {
  Tensor Wi;  // (3out, in)
  Tensor Wh;  // (3out, out)
  Tensor b;   // (3out), undefined with {.bias = false}
  Tensor bh;  // (out): the candidate's recurrent bias, undefined unless {.recurrent_bias = true}

  GRUCell(int64_t in, int64_t out, const RecurrentOptions& o = {});
  GRUCell(Tensor Wi, Tensor Wh, Tensor b, Tensor bh = {});
  RecurrentOutput<Tensor> operator()(const Tensor& x) const;
  RecurrentOutput<Tensor> operator()(const Tensor& x, const Tensor& h) const;
};
FLX_FUNCTOR(GRUCell, Wi, Wh, b, bh)
FLX_API void show_compact(std::ostream& os, const GRUCell& l);
FLX_API Shape outputsize(const GRUCell& l, const Shape& x);

// Flux's GRUv3Cell (GRU v3 of Cho et al.): the reset gate applied before the
// candidate's own recurrent product. With gx = Wi x + b, gh = Wh h split in
// three, r = σ(gx_r + gh_r), z = σ(gx_z + gh_z),
// h̃ = tanh(gx_h + Wh_h̃ (r ⊙ h)), h' = (1 - z) ⊙ h̃ + z ⊙ h. As in Flux, Wh
// holds three blocks of which the candidate's (the third) is unused (its
// gradient is zero), and the candidate's kernel is Wh_h̃, (out, out): the C++
// field is `Wh_h`, its checkpoint key Flux's "Wh_h̃".
struct FLX_API GRUv3Cell {
  Tensor Wi;    // (3out, in)
  Tensor Wh;    // (3out, out)
  Tensor b;     // (3out), undefined with {.bias = false}
  Tensor Wh_h;  // (out, out): Flux's Wh_h̃

  GRUv3Cell(int64_t in, int64_t out, const RecurrentOptions& o = {});
  GRUv3Cell(Tensor Wi, Tensor Wh, Tensor b, Tensor Wh_h);
  RecurrentOutput<Tensor> operator()(const Tensor& x) const;
  RecurrentOutput<Tensor> operator()(const Tensor& x, const Tensor& h) const;
};
FLX_API void show_compact(std::ostream& os, const GRUv3Cell& l);
FLX_API Shape outputsize(const GRUv3Cell& l, const Shape& x);
inline auto flx_functor_fields(detail::tag<GRUv3Cell>) {
  using C = GRUv3Cell;
  return std::make_tuple(detail::Field<C, Tensor>{"Wi", &C::Wi}, detail::Field<C, Tensor>{"Wh", &C::Wh},
                         detail::Field<C, Tensor>{"b", &C::b}, detail::Field<C, Tensor>{"Wh_h\u0303", &C::Wh_h});
}

// The layers: the cell over each time step of x, (in, time, batch) or (in,
// time), returning every step's output, (out, time, batch) or (out, time).
// The state given (or state0, or zeros) is (out) or (out, batch).
struct FLX_API RNN {
  RNNCell cell;
  Tensor state0;  // (out): the learned initial state, undefined unless {.learned_state = true}

  RNN(int64_t in, int64_t out, Activation act = flx::tanh, const RecurrentOptions& o = {});
  explicit RNN(RNNCell cell, Tensor state0 = {});
  Tensor operator()(const Tensor& x) const;
  Tensor operator()(const Tensor& x, const Tensor& h) const;
  // Flux's return_state = true: the outputs and the final state.
  RecurrentOutput<Tensor> with_state(const Tensor& x) const;
  RecurrentOutput<Tensor> with_state(const Tensor& x, const Tensor& h) const;
};
FLX_FUNCTOR(RNN, cell, state0)
FLX_API void show_compact(std::ostream& os, const RNN& l);
FLX_API Shape outputsize(const RNN& l, const Shape& x);

struct FLX_API LSTM {
  LSTMCell cell;
  LSTMState state0;  // (out) each: the learned initial state, undefined unless {.learned_state = true}

  LSTM(int64_t in, int64_t out, const RecurrentOptions& o = {});
  explicit LSTM(LSTMCell cell, LSTMState state0 = {});
  Tensor operator()(const Tensor& x) const;
  Tensor operator()(const Tensor& x, const LSTMState& state) const;
  RecurrentOutput<LSTMState> with_state(const Tensor& x) const;
  RecurrentOutput<LSTMState> with_state(const Tensor& x, const LSTMState& state) const;
};
FLX_FUNCTOR(LSTM, cell, state0)
FLX_API void show_compact(std::ostream& os, const LSTM& l);
FLX_API Shape outputsize(const LSTM& l, const Shape& x);

struct FLX_API GRU {
  GRUCell cell;
  Tensor state0;

  GRU(int64_t in, int64_t out, const RecurrentOptions& o = {});
  explicit GRU(GRUCell cell, Tensor state0 = {});
  Tensor operator()(const Tensor& x) const;
  Tensor operator()(const Tensor& x, const Tensor& h) const;
  RecurrentOutput<Tensor> with_state(const Tensor& x) const;
  RecurrentOutput<Tensor> with_state(const Tensor& x, const Tensor& h) const;
};
FLX_FUNCTOR(GRU, cell, state0)
FLX_API void show_compact(std::ostream& os, const GRU& l);
FLX_API Shape outputsize(const GRU& l, const Shape& x);

// Flux's GRUv3: GRUv3Cell over a sequence (step by step: no backend has it).
struct FLX_API GRUv3 {
  GRUv3Cell cell;
  Tensor state0;

  GRUv3(int64_t in, int64_t out, const RecurrentOptions& o = {});
  explicit GRUv3(GRUv3Cell cell, Tensor state0 = {});
  Tensor operator()(const Tensor& x) const;
  Tensor operator()(const Tensor& x, const Tensor& h) const;
  RecurrentOutput<Tensor> with_state(const Tensor& x) const;
  RecurrentOutput<Tensor> with_state(const Tensor& x, const Tensor& h) const;
};
FLX_FUNCTOR(GRUv3, cell, state0)
FLX_API void show_compact(std::ostream& os, const GRUv3& l);
FLX_API Shape outputsize(const GRUv3& l, const Shape& x);

// Flux.initialstates: the state a sequence starts from when none is given:
// zeros of (out) in the weights' element type on their device, or a layer's
// learned state0.
FLX_API Tensor initialstates(const RNNCell& c);
FLX_API LSTMState initialstates(const LSTMCell& c);
FLX_API Tensor initialstates(const GRUCell& c);
FLX_API Tensor initialstates(const GRUv3Cell& c);
FLX_API Tensor initialstates(const RNN& l);
FLX_API LSTMState initialstates(const LSTM& l);
FLX_API Tensor initialstates(const GRU& l);
FLX_API Tensor initialstates(const GRUv3& l);

// ---- the sequence runner (Flux's scan) -----------------------------------------

namespace detail {

// A sequence (in, T, B) and whether it came without its batch dim (in, T).
struct FLX_API Sequence {
  Tensor x;  // (in, T, B)
  bool batched;
  int64_t T, B;
};
// x checked as `layer`'s input, (in, time, batch) or (in, time) with at least
// one step (in < 0: any number of features); DimensionMismatch naming the
// layer, what it expects and x's shape.
FLX_API Sequence as_sequence(const std::string& layer, const Tensor& x, int64_t in);
// The same rule on shapes (outputsize): x's shape with `out` features.
FLX_API Shape sequence_shape(const std::string& layer, const Shape& x, int64_t in, int64_t out);
// (out, T, B) and the state parts (out, B) as the caller gave x: without a
// batch dim, (out, T) and (out).
FLX_API Tensor unbatch_output(const Tensor& y, const Sequence& s);
FLX_API Tensor unbatch_state(const Tensor& h, const Sequence& s);
// The outputs of every step, each (out, B), as one (out, T, B).
FLX_API Tensor stack_steps(const std::vector<Tensor>& outs);
// Time step t of xt = permutedims(x, (0, 2, 1)), (in, B, T): (in, B).
inline Tensor step_input(const Tensor& xt, int64_t t) {
  return reshape(xt.slice_last(t, t + 1), Shape{xt.shape()[0], xt.shape()[1]});
}

// The state a layer of a built-in cell is given, checked before any step runs
// (the error naming the layer); a cell of your own checks it itself.
FLX_API void check_sequence_state(const std::string& layer, const RNNCell& c, const Tensor& h, int64_t batch);
FLX_API void check_sequence_state(const std::string& layer, const LSTMCell& c, const LSTMState& s, int64_t batch);
FLX_API void check_sequence_state(const std::string& layer, const GRUCell& c, const Tensor& h, int64_t batch);
FLX_API void check_sequence_state(const std::string& layer, const GRUv3Cell& c, const Tensor& h, int64_t batch);
template <class Cell, class State>
void check_sequence_state(const std::string&, const Cell&, const State&, int64_t) {}

// The whole sequence as one op, for the cells a backend runs
// (src/ops/recurrent_scan.cpp): true with *out set to the outputs (out, T, B)
// and, when want_state, the last state (out, B) (else undefined parts);
// false where the op does not apply, and for any other cell.
FLX_API bool fused_sequence(const RNNCell& c, const Sequence& s, const Tensor& h, bool want_state,
                    RecurrentOutput<Tensor>* out);
FLX_API bool fused_sequence(const LSTMCell& c, const Sequence& s, const LSTMState& st, bool want_state,
                    RecurrentOutput<LSTMState>* out);
FLX_API bool fused_sequence(const GRUCell& c, const Sequence& s, const Tensor& h, bool want_state,
                    RecurrentOutput<Tensor>* out);
template <class Cell, class State>
bool fused_sequence(const Cell&, const Sequence&, const State&, bool, RecurrentOutput<State>*) {
  return false;
}

// The cell over each step of s.x: y (out, T, B) and the last state. A cell
// returns its output and its state, as a RecurrentOutput, a std::pair or a
// std::tuple (Flux's (output, state)).
template <class Cell, class State>
RecurrentOutput<State> scan_steps(const Cell& cell, const Sequence& s, State state) {
  const Tensor xt = permutedims(s.x, {0, 2, 1});  // (in, B, T): each step a contiguous view
  std::vector<Tensor> outs;
  outs.reserve(size_t(s.T));
  for (int64_t t = 0; t < s.T; ++t) {
    auto [y, next] = cell(step_input(xt, t), state);
    outs.push_back(y);
    state = std::move(next);
  }
  return {stack_steps(outs), std::move(state)};
}

// The number of input features of a cell that has a Wi (in, out) kernel; -1
// (any) for one that has none.
template <class Cell>
int64_t cell_input_size(const Cell& c) {
  if constexpr (requires { c.Wi.shape(); }) return c.Wi.shape()[1];
  else return -1;
}

// Flux's scan, behind every recurrent layer: x (in, time[, batch]) checked
// as `layer`'s input, the state checked, then the backend's fused op where
// it applies, else the cell step by step; the outputs (out, time[, batch])
// and the last state (when want_state; the fused op skips it otherwise).
template <class Cell, class State>
RecurrentOutput<State> run_sequence(const std::string& layer, const Cell& cell, const Tensor& x, const State& state,
                                    bool want_state) {
  const Sequence s = as_sequence(layer, x, cell_input_size(cell));
  check_sequence_state(layer, cell, state, s.batched ? s.B : 1);
  RecurrentOutput<State> r{};
  if (!fused_sequence(cell, s, state, want_state, &r)) r = scan_steps(cell, s, state);
  return {unbatch_output(r.output, s), fmap([&](const Tensor& t) { return unbatch_state(t, s); }, r.state)};
}

}  // namespace detail

// Flux's Recurrence: any cell over a (features, time, batch) or (features,
// time) sequence, as the layers above run theirs: r(x[, state]) returns
// every step's output, (out, time[, batch]); r.with_state(x[, state]) the
// outputs and the last state (Flux's `return_state = true`). The cell is a
// struct declared with FLX_FUNCTOR whose cell(x_t, state) returns its output
// and its next state (a RecurrentOutput, std::pair or std::tuple), x_t being
// (features, batch); without a state given, initialstates(cell) (found by
// argument lookup) is the first. Recurrence of a built-in cell is that
// cell's layer: RNNCell, LSTMCell and GRUCell run as one fused op.
template <class Cell>
struct Recurrence {
  Cell cell;

  explicit Recurrence(Cell c) : cell(std::move(c)) {}
  Tensor operator()(const Tensor& x) const { return with_state_(x, initialstates(cell), false).output; }
  template <class State>
  Tensor operator()(const Tensor& x, const State& state) const {
    return with_state_(x, state, false).output;
  }
  auto with_state(const Tensor& x) const { return with_state_(x, initialstates(cell), true); }
  template <class State>
  RecurrentOutput<State> with_state(const Tensor& x, const State& state) const {
    return with_state_(x, state, true);
  }

 private:
  template <class State>
  RecurrentOutput<State> with_state_(const Tensor& x, const State& state, bool want) const {
    return detail::run_sequence(detail::layer_string(*this), cell, x, state, want);
  }

 public:
  // Shows as Flux's, Recurrence(RNNCell(2 => 3, tanh)).
  FLX_LAYER_TEMPLATE(Recurrence, cell)
};
template <class Cell>
auto initialstates(const Recurrence<Cell>& r) {
  return initialstates(r.cell);
}
// (out, time[, batch]) for x (in, time[, batch]), out from the cell's own
// shape rule for one step, (in, batch) -> (out, batch).
template <class Cell>
Shape outputsize(const Recurrence<Cell>& r, const Shape& x) {
  const std::string name = detail::layer_string(r);
  Shape y = detail::sequence_shape(name, x, detail::cell_input_size(r.cell), 0);
  const Shape step = outputsize(r.cell, Shape{x[0], x.ndims() == 3 ? x[2] : 1});
  y[0] = step[0];
  return y;
}

}  // namespace flx
