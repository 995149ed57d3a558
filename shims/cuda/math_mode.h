// Which float32 arithmetic the CUDA shims use: true float32 (shimkit's
// default), or TF32 tensor cores where torch would allow them. torch has two
// switches, and so do the shims: cuDNN convolutions
// (torch.backends.cudnn.allow_tf32, on by default in torch) and float32
// matmuls on cuBLAS/cuBLASLt (torch.backends.cuda.matmul.allow_tf32, off by
// default in torch). Process-wide; the environment sets each at first use
// (SHIMKIT_CUDNN_TF32=1, SHIMKIT_MATMUL_TF32=1). Convolution and GEMM plans
// are keyed by the switch, so a change takes effect at the next call.
#ifndef SHIMKIT_SHIMS_CUDA_MATH_MODE_H_
#define SHIMKIT_SHIMS_CUDA_MATH_MODE_H_

namespace shimkit {
namespace cuda {

enum class Tf32Use {
  kConvolutions,  // float32 convolutions on cuDNN
  kMatmuls,       // float32 GEMMs (mm, addmm, bmm) on cuBLAS and cuBLASLt
};

bool tf32_allowed(Tf32Use use);
void set_tf32_allowed(Tf32Use use, bool allowed);

}  // namespace cuda
}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CUDA_MATH_MODE_H_
