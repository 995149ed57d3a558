// oneDNN matrix multiply for the slim CPU GEMM shims (matmul_onednn.cpp).
#ifndef SHIMKIT_SHIMS_MATMUL_ONEDNN_H_
#define SHIMKIT_SHIMS_MATMUL_ONEDNN_H_

#include "shims/slim_tensor.h"

namespace shimkit {

// out = a @ b (+ bias, broadcast to out) for float32 2-D tensors, read and
// written in place with their strides. `bias` is 0-, 1- or 2-D and must not
// overlap `out`. Returns false, having written nothing, when oneDNN is absent
// or would take the case only with its reference (slow) implementation; the
// caller then multiplies another way.
bool onednn_matmul(const SlimTensor& a, const SlimTensor& b, const SlimTensor* bias,
                   const SlimTensor& out);

}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_MATMUL_ONEDNN_H_
