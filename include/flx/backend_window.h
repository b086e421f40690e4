/* flx backend ABI: the window rules of max pooling and softmax's row state,
 * written once.
 *
 * Which element of a pooling window is its maximum (and so takes the
 * gradient), and how softmax's row maximum treats a NaN, are rules that the
 * CPU backend, the CUDA kernels and the OpenCL kernels (this file is
 * embedded in their source: backends/opencl/CMakeLists.txt's
 * _flx_ocl_included) must apply alike, or a NaN or a tie in the input gives
 * each device another result or another gradient. So they are element
 * functions here, in the subset shared by C++, CUDA C and OpenCL C, as
 * backend_elem.h's are; the includer defines FLX_ELEM_FN first (see
 * backend_elem.h) and nothing else: this header includes nothing and needs
 * no helper (OpenCL's dnn family, which pooling is part of, has no
 * backend_elem.h).
 *
 * The CPU is the reference (DESIGN: the conformance suite compares every
 * device with it), and these are its rules. Some CPU loops keep the rule in
 * a hand-written form because that form is what makes them fast (the
 * unpadded max pooling's branchless WindowScan and its 2x2 backward,
 * cpu_dnn_direct.cpp); Float32 softmax's row maximum in 8 running maxima
 * (cpu_softmax.cpp) calls softmax_max itself. tests/test_window_rules.cpp
 * states the rules' results (ties, -0 and 0, NaN, -Inf, padding) for
 * every device, the CPU's fast loops included, and compares each device
 * with the CPU; tests/plugins/test_plugin_dnn.cpp checks the plugins'
 * pooling against an independent reference (tests/dnn_reference.hpp),
 * windows of padding only included.
 */
#ifndef FLX_BACKEND_WINDOW_H
#define FLX_BACKEND_WINDOW_H

/* ---- max pooling -----------------------------------------------------------
 * A window is scanned in window order (dim 0 fastest, as cuDNN and oneDNN
 * scan it), its elements inside the input only: padding is never met, so it
 * never wins, and a window of padding only has no maximum (its result is
 * -Inf and its gradient goes nowhere).
 *
 * Whether element v, met after the elements whose maximum is best, becomes
 * the window's maximum (and the element that holds it). first: v is the
 * window's first element inside the input (best is then meaningless).
 *  - a larger value wins;
 *  - a NaN wins and then stays: the result is the window's first NaN (as
 *    Julia's max and PyTorch's max_pool propagate it);
 *  - an equal value does not (-0 and 0 are equal): the first maximum keeps
 *    its place, and with it the gradient. */
FLX_ELEM_FN int pool_max_takes(CT v, CT best, int first) { return first || (best == best && (v > best || v != v)); }

/* Whether the window's maximum best sends the gradient to the element that
 * holds it: not when it is NaN (backend.h's reference: a NaN maximum
 * equals no element, so its dy goes nowhere). */
FLX_ELEM_FN int pool_max_sends(CT best) { return best == best; }

/* ---- softmax's row state ---------------------------------------------------
 * softmax(x) = exp(x - m) / s along a row, m the row's maximum and s the sum
 * of exp(x - m): m is taken first (a running maximum from -Inf, over the
 * row's elements or over partial maxima of pieces of the row, in any
 * grouping), then s.
 *
 * The running maximum's step: x wins when it is larger. A NaN never wins
 * (std::max's rule, and that of x86's max instructions): a row that holds
 * a NaN still comes out all NaN, since its term exp(NaN - m) makes s NaN;
 * and a row of NaNs keeps m = -Inf. */
FLX_ELEM_FN CT softmax_max(CT m, CT x) { return m < x ? x : m; }

#endif /* FLX_BACKEND_WINDOW_H */
