// Recurrent layers (Flux 0.16's recurrent.jl): the cells RNNCell, LSTMCell
// and GRUCell, which take one time step, and the layers RNN, LSTM and GRU,
// which run a cell over a whole sequence.
//
//   auto lstm = LSTM(3, 5);                 // LSTM(3 => 5)  # 180 parameters
//   Tensor y = lstm(rand(3, 10, 4));        // (features, time, batch) -> (5, 10, 4)
//   auto cell = LSTMCell(3, 5);
//   auto [h, state] = cell(rand(3, 4));     // one step from the zero state: h (5, 4), state {h, c}
//   std::tie(h, state) = cell(rand(3, 4), state);
//
// Parameters as Flux keeps them: Wi (k·out, in), Wh (k·out, out) and a bias
// (k·out), the k gates stacked in Flux's order (LSTM: input, forget, cell,
// output; GRU: reset, update, candidate), Glorot-uniform kernels and a zero
// bias. The initial state is zeros unless given, or learned: with
// {.learned_state = true} a layer holds a trainable `state0` (zeros at first)
// that it starts every sequence from. Layers run every time step's input
// projection as one product and, on the CPU, OpenCL and CUDA alike, the whole
// sequence forward and backward as one recorded op (src/ops/recurrent_scan.cpp).
#pragma once

#include <cstdint>
#include <ostream>
#include <tuple>

#include "flx/activations.hpp"
#include "flx/functor.hpp"
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
struct LSTMState {
  Tensor h;
  Tensor c;
};
FLX_FUNCTOR(LSTMState, h, c)

struct RecurrentOptions {
  bool bias = true;            // learn a bias (Flux's `bias` keyword); false: none
  bool learned_state = false;  // layers only: a trainable initial state `state0`, zeros at first
  // GRU and GRUCell only: a second bias for the candidate's recurrent
  // product, inside the reset gate: h̃ = tanh(Wi_h x + b_h + r ⊙ (Wh_h h + bh)).
  // PyTorch's nn.GRU has it (b_hn), Flux's GRUCell does not; off by default, so
  // that the layer is Flux's, on when loading a PyTorch GRU (docs/checkpoints.md).
  bool recurrent_bias = false;
};

// h' = act.(Wi x .+ Wh h .+ bias); the output is h'.
struct RNNCell {
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

// i, f, g, o = the four gates of Wi x .+ Wh h .+ bias;
// c' = σ(f) ⊙ c + σ(i) ⊙ tanh(g), h' = σ(o) ⊙ tanh(c'); the output is h'.
struct LSTMCell {
  Tensor Wi;    // (4out, in)
  Tensor Wh;    // (4out, out)
  Tensor bias;  // (4out)

  LSTMCell(int64_t in, int64_t out, const RecurrentOptions& o = {});
  LSTMCell(Tensor Wi, Tensor Wh, Tensor bias);
  RecurrentOutput<LSTMState> operator()(const Tensor& x) const;
  RecurrentOutput<LSTMState> operator()(const Tensor& x, const LSTMState& state) const;
};
FLX_FUNCTOR(LSTMCell, Wi, Wh, bias)

// Flux's GRUCell (GRU v1 of Cho et al.): with gx = Wi x, gh = Wh h split in
// three, r = σ(gx_r + gh_r + b_r), z = σ(gx_z + gh_z + b_z),
// h̃ = tanh(gx_h + b_h + r ⊙ (gh_h [+ bh])), h' = (1 - z) ⊙ h̃ + z ⊙ h.
// Flux names this cell's bias `b` (the others' `bias`); so does flx, so that
// the checkpoint keys are Flux's.
struct GRUCell {
  Tensor Wi;  // (3out, in)
  Tensor Wh;  // (3out, out)
  Tensor b;   // (3out)
  Tensor bh;  // (out): the candidate's recurrent bias, undefined unless {.recurrent_bias = true}

  GRUCell(int64_t in, int64_t out, const RecurrentOptions& o = {});
  GRUCell(Tensor Wi, Tensor Wh, Tensor b, Tensor bh = {});
  RecurrentOutput<Tensor> operator()(const Tensor& x) const;
  RecurrentOutput<Tensor> operator()(const Tensor& x, const Tensor& h) const;
};
FLX_FUNCTOR(GRUCell, Wi, Wh, b, bh)

// The layers: the cell over each time step of x, (in, time, batch) or (in,
// time), returning every step's output, (out, time, batch) or (out, time).
// The state given (or state0, or zeros) is (out) or (out, batch).
struct RNN {
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

struct LSTM {
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

struct GRU {
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

// Flux.initialstates: the state a sequence starts from when none is given:
// zeros of (out) in the weights' element type on their device, or a layer's
// learned state0.
Tensor initialstates(const RNNCell& c);
LSTMState initialstates(const LSTMCell& c);
Tensor initialstates(const GRUCell& c);
Tensor initialstates(const RNN& l);
LSTMState initialstates(const LSTM& l);
Tensor initialstates(const GRU& l);

// One line each, as Flux shows them: LSTM(3 => 5)  # 180 parameters. Options
// that are not the defaults follow the sizes: GRU(3 => 5; recurrent_bias=true).
void show_compact(std::ostream& os, const RNNCell& l);
void show_compact(std::ostream& os, const LSTMCell& l);
void show_compact(std::ostream& os, const GRUCell& l);
void show_compact(std::ostream& os, const RNN& l);
void show_compact(std::ostream& os, const LSTM& l);
void show_compact(std::ostream& os, const GRU& l);

// Shape rules (outputsize.hpp): a cell's output (out) or (out, batch) for an
// input (in) or (in, batch); a layer's (out, time[, batch]).
Shape outputsize(const RNNCell& l, const Shape& x);
Shape outputsize(const LSTMCell& l, const Shape& x);
Shape outputsize(const GRUCell& l, const Shape& x);
Shape outputsize(const RNN& l, const Shape& x);
Shape outputsize(const LSTM& l, const Shape& x);
Shape outputsize(const GRU& l, const Shape& x);

}  // namespace flx
