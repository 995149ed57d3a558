// Row softmax for the slim CPU attention (shim_attention.cpp): max, exp, sum
// and scale of one row of scores, with AVX-512 and AVX2 versions picked once
// from the running CPU (__builtin_cpu_supports) and a portable one for other
// machines. Like ATen's CPU attention, exp is a polynomial (Cody-Waite range
// reduction, degree-7 minimax polynomial; within 1 float ulp of e^x over the
// range softmax uses) instead of a libm call per element; -inf gives exactly
// 0, so masked keys weigh nothing.
#ifndef SHIMKIT_SHIMS_SOFTMAX_ROWS_H_
#define SHIMKIT_SHIMS_SOFTMAX_ROWS_H_

#include <cstdint>

namespace shimkit {

// row[0..n) = softmax(row[0..n)) in place; returns log(sum(exp(row))) (the
// log-sum-exp), -inf when every entry is -inf (the row is then all zeros).
float softmax_row(float* row, int64_t n);
double softmax_row(double* row, int64_t n);

// The float versions one by one (softmax_row uses the best the CPU runs).
enum class SoftmaxKernel { kPortable, kAvx2, kAvx512 };
// Whether this machine (and build) can run `kernel`.
bool softmax_kernel_available(SoftmaxKernel kernel);
// softmax_row with `kernel`, which must be available.
float softmax_row_with(SoftmaxKernel kernel, float* row, int64_t n);

// The portable version's e^x for x <= 88.3 (0 below -87.3, including -inf).
float exp_poly(float x);

}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_SOFTMAX_ROWS_H_
