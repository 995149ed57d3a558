// cuDNN, loaded at run time with dlopen like the CUDA runtime and cuBLAS
// (shims/cuda/cuda_api.h): the CUDA shim library keeps no link-time CUDA
// dependency and still runs every convolution when cuDNN is absent (on the
// host, slowly).
//
// Only cuDNN's stable "legacy" convolution API is used (present in cuDNN 8
// and 9). The signatures are declared from type parameters so that a test
// can instantiate them with the official header types (cudnn.h) and check,
// at compile time, that every declaration matches (tests/cuda).
#ifndef SHIMKIT_SHIMS_CUDA_CUDNN_API_H_
#define SHIMKIT_SHIMS_CUDA_CUDNN_API_H_

#include <cstddef>
#include <string>

namespace shimkit {
namespace cuda {

// `Status` is cudnnStatus_t, `Handle` cudnnHandle_t, `Tensor`/`Filter`/`Conv`
// the three descriptor types, `DataType` cudnnDataType_t, `Format`
// cudnnTensorFormat_t, `Mode` cudnnConvolutionMode_t, `Math`
// cudnnMathType_t, `Algo` cudnnConvolutionFwdAlgo_t, `Perf`
// cudnnConvolutionFwdAlgoPerf_t.
template <typename Status, typename Handle, typename Stream, typename Tensor, typename Filter,
          typename Conv, typename DataType, typename Format, typename Mode, typename Math,
          typename Algo, typename Perf>
struct CudnnSignatures {
  using GetVersion = size_t (*)();
  using GetErrorString = const char* (*)(Status);
  using Create = Status (*)(Handle*);
  using SetStream = Status (*)(Handle, Stream);
  using CreateTensorDescriptor = Status (*)(Tensor*);
  using SetTensorNdDescriptor = Status (*)(Tensor, DataType, int, const int[], const int[]);
  using DestroyTensorDescriptor = Status (*)(Tensor);
  using CreateFilterDescriptor = Status (*)(Filter*);
  using SetFilterNdDescriptor = Status (*)(Filter, DataType, Format, int, const int[]);
  using DestroyFilterDescriptor = Status (*)(Filter);
  using CreateConvolutionDescriptor = Status (*)(Conv*);
  using SetConvolutionNdDescriptor = Status (*)(Conv, int, const int[], const int[], const int[],
                                                Mode, DataType);
  using SetConvolutionGroupCount = Status (*)(Conv, int);
  using SetConvolutionMathType = Status (*)(Conv, Math);
  using DestroyConvolutionDescriptor = Status (*)(Conv);
  using GetConvolutionForwardAlgorithm_v7 = Status (*)(Handle, const Tensor, const Filter,
                                                       const Conv, const Tensor, const int, int*,
                                                       Perf*);
  using GetConvolutionForwardWorkspaceSize = Status (*)(Handle, const Tensor, const Filter,
                                                        const Conv, const Tensor, Algo, size_t*);
  using ConvolutionForward = Status (*)(Handle, const void*, const Tensor, const void*,
                                        const Filter, const void*, const Conv, Algo, void*, size_t,
                                        const void*, const Tensor, void*);
  using AddTensor = Status (*)(Handle, const void*, const Tensor, const void*, const void*,
                               const Tensor, void*);
};

// ABI-identical stand-in for cudnnConvolutionFwdAlgoPerf_t.
struct CudnnFwdAlgoPerf {
  int algo;
  int status;
  float time;
  size_t memory;
  int determinism;
  int math_type;
  int reserved[3];
};

constexpr int kCudnnSuccess = 0;           // CUDNN_STATUS_SUCCESS
constexpr int kCudnnFloat = 0;             // CUDNN_DATA_FLOAT
constexpr int kCudnnNchw = 0;              // CUDNN_TENSOR_NCHW
constexpr int kCudnnNhwc = 1;              // CUDNN_TENSOR_NHWC
constexpr int kCudnnCrossCorrelation = 1;  // CUDNN_CROSS_CORRELATION (what torch runs)
constexpr int kCudnnFmaMath = 3;           // CUDNN_FMA_MATH: true float32, no TF32

using Cudnn = CudnnSignatures<int, void*, void*, void*, void*, void*, int, int, int, int, int,
                              CudnnFwdAlgoPerf>;

// The loaded cuDNN; `ok` is false (and `error` says why) when no libcudnn
// could be opened or a function is missing.
struct CudnnLibrary {
  bool ok = false;
  std::string error;
  std::string library;
  size_t version = 0;
  Cudnn::GetErrorString get_error_string = nullptr;
  Cudnn::Create create = nullptr;
  Cudnn::SetStream set_stream = nullptr;
  Cudnn::CreateTensorDescriptor create_tensor = nullptr;
  Cudnn::SetTensorNdDescriptor set_tensor = nullptr;
  Cudnn::DestroyTensorDescriptor destroy_tensor = nullptr;
  Cudnn::CreateFilterDescriptor create_filter = nullptr;
  Cudnn::SetFilterNdDescriptor set_filter = nullptr;
  Cudnn::DestroyFilterDescriptor destroy_filter = nullptr;
  Cudnn::CreateConvolutionDescriptor create_conv = nullptr;
  Cudnn::SetConvolutionNdDescriptor set_conv = nullptr;
  Cudnn::SetConvolutionGroupCount set_group_count = nullptr;
  Cudnn::SetConvolutionMathType set_math_type = nullptr;
  Cudnn::DestroyConvolutionDescriptor destroy_conv = nullptr;
  Cudnn::GetConvolutionForwardAlgorithm_v7 get_forward_algorithm = nullptr;
  Cudnn::GetConvolutionForwardWorkspaceSize get_workspace_size = nullptr;
  Cudnn::ConvolutionForward convolution_forward = nullptr;
  Cudnn::AddTensor add_tensor = nullptr;
};

// Loaded once per process (thread-safe); never throws. SHIMKIT_CUDNN names
// an explicit library path; SHIMKIT_CUDNN=0 turns cuDNN off.
const CudnnLibrary& cudnn_library();

}  // namespace cuda
}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CUDA_CUDNN_API_H_
