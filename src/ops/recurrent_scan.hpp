// A recurrent layer over a whole sequence as one recorded op: the input
// projection of every time step in one GEMM, then per step the recurrent
// GEMM and the cell's elementwise work as map kernels reading the gates in
// place, and a backward rule that runs backpropagation through time the same
// way. Made of the compute table's gemm, map, permute and copies, so every
// backend runs it; a backend with its own LSTM (the dnn table's rnn_*) runs
// that instead. Not installed.
#pragma once

#include "ops_internal.hpp"

namespace flx::ops {

enum class RecurrentKind { RNN, LSTM, GRU };
// The RNN cell's activations this op runs (others: the layer's ops one by one).
enum class RecurrentAct { Identity, Tanh, Relu, Sigmoid };

// The cell over the sequence x, (in, T, B), from the state h0 (H, B) (and
// c0 for an LSTM): Z, every step's output y, (H, T, B); with_state, the last
// states follow y in Z, (H, T·B + k·B): y's T·B columns, h_T's B, and for an
// LSTM c_T's B.
//   wi  (k·H, in), wh (k·H, H), b (k·H) or undefined: Flux's Wi, Wh, bias
//   bh  (H) or undefined: a GRU's candidate recurrent bias (GRUCell.bh)
// The gradient flows to every tracked input (first order: its rule runs
// fused kernels). An LSTM runs as its backend's own where it has one (the
// dnn table's rnn_*: the CPU's oneDNN LSTM in Float32; FLX_RECURRENT_LIBRARY=0
// turns that off), else, like RNN and GRU, with the compute table. An undefined tensor, with nothing run, where
// the op does not apply: element types other than Float32 and Float64,
// operands of different types or devices, an empty sequence or batch, or
// FLX_RECURRENT_FUSED=0 in the environment; the layer then runs its cell's
// ops step by step, which give the same result.
Tensor recurrent_scan(RecurrentKind kind, RecurrentAct act, const Tensor& x, const Tensor& wi, const Tensor& wh,
                      const Tensor& b, const Tensor& bh, const Tensor& h0, const Tensor& c0, bool with_state);

}  // namespace flx::ops
