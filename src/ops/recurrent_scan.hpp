// A recurrent layer over a whole sequence as one recorded op: the input
// projection of every time step in one GEMM, then per step the recurrent
// GEMM and the cell's elementwise work as map kernels reading the gates in
// place, and a backward rule that runs backpropagation through time the same
// way. Made of the compute table's gemm, map and copies only, so every
// backend runs it. Not installed.
#pragma once

#include "ops_internal.hpp"

namespace flx::ops {

enum class RecurrentKind { RNN, LSTM, GRU };
// The RNN cell's activations this op runs (others: the layer's ops one by one).
enum class RecurrentAct { Identity, Tanh, Relu, Sigmoid };

// Z, the hidden states h_1..h_T of the cell over x, time last: (H, B, T), and
// for an LSTM (H, B, T + 1) with the last cell state c_T in slot T.
//   x   (in, B, T)       the sequence, time last
//   wi  (k·H, in), wh (k·H, H), b (k·H) or undefined: Flux's Wi, Wh, bias
//   bh  (H) or undefined: a GRU's candidate recurrent bias (GRUCell.bh)
//   h0  (H, B); c0 (H, B) for an LSTM
// The gradient flows to every tracked input (first order: its rule runs
// fused kernels). An undefined tensor, with nothing run, where the op does
// not apply: element types other than Float32 and Float64, operands of
// different types or devices, an empty sequence or batch, or
// FLX_RECURRENT_FUSED=0 in the environment; the layer then runs its cell's
// ops step by step, which give the same result.
Tensor recurrent_scan(RecurrentKind kind, RecurrentAct act, const Tensor& x, const Tensor& wi, const Tensor& wh,
                      const Tensor& b, const Tensor& bh, const Tensor& h0, const Tensor& c0);

}  // namespace flx::ops
