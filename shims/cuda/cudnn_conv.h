// Convolution, plain and transposed, on the GPU through cuDNN
// (shims/cuda/cudnn_api.h).
// aoti_torch_cuda_convolution tries this first and runs the host path only
// when cuDNN is absent or cannot take the arguments; the counters below say
// which path ran, so a benchmark cannot mistake one for the other.
#ifndef SHIMKIT_SHIMS_CUDA_CUDNN_CONV_H_
#define SHIMKIT_SHIMS_CUDA_CUDNN_CONV_H_

#include <cstdint>
#include <string>

#include "shims/conv_geometry.h"
#include "shims/conv_transpose_geometry.h"
#include "shims/slim_tensor.h"

namespace shimkit {
namespace cuda {

// Runs `input` (x) weight (+ bias) on cuDNN (float32, float16 or bfloat16
// data, float32 arithmetic; no TF32 unless allowed: math_mode.h), into a new device tensor
// in ATen's output geometry (conv_geometry.h); transposed when `transpose` is
// given (conv_transpose_geometry.h). Returns false,
// with `why` set, when cuDNN is unavailable or refuses these tensors (any
// cuDNN status but success): the caller then runs the host path, which
// recomputes the whole output. Throws ShimError on invalid arguments.
bool cudnn_convolution(const SlimTensor& input, const SlimTensor& weight, const SlimTensor* bias,
                       const ConvParams& params, const ConvTranspose* transpose, int64_t groups,
                       SlimTensor* out, std::string* why);

// Process-wide counts of convolutions run on cuDNN and on the host, and
// (per thread) why the last host run did not use cuDNN.
void count_conv(bool on_cudnn, const std::string& why);
int64_t conv_count(bool on_cudnn);
const std::string& last_conv_fallback();
// Of those on cuDNN, how many ran through the graph API (the rest: legacy);
// and how many plans were built (once per thread and geometry).
int64_t conv_graph_count();
int64_t conv_plan_count();

}  // namespace cuda
}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CUDA_CUDNN_CONV_H_
