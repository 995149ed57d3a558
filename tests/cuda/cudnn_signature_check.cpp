// Compiles only if every cuDNN declaration in shims/cuda/cudnn_api.h matches
// the official cudnn.h, and the stand-in types and constants are ABI-equal.
// Built by tests/cuda/test_cuda_build.py (with the headers fetched by
// tools/fetch_nvidia_headers.py) and on the GPU machine (tools/gpu). With
// -DSHIMKIT_BREAK_ONE it also checks one function against a wrong
// signature: the negative control, which must fail to compile.
#include <cudnn.h>

#include <cstddef>

#include "shims/cuda/cudnn_api.h"

using Official = shimkit::cuda::CudnnSignatures<
    cudnnStatus_t, cudnnHandle_t, cudaStream_t, cudnnTensorDescriptor_t, cudnnFilterDescriptor_t,
    cudnnConvolutionDescriptor_t, cudnnDataType_t, cudnnTensorFormat_t, cudnnConvolutionMode_t,
    cudnnMathType_t, cudnnConvolutionFwdAlgo_t, cudnnConvolutionFwdAlgoPerf_t>;

// Initialising a pointer of the declared type compiles only if the types are
// identical.
#define SAME(fn, sig) [[maybe_unused]] static const Official::sig check_##sig = &::fn;
SAME(cudnnGetVersion, GetVersion)
SAME(cudnnGetErrorString, GetErrorString)
SAME(cudnnCreate, Create)
SAME(cudnnSetStream, SetStream)
SAME(cudnnCreateTensorDescriptor, CreateTensorDescriptor)
SAME(cudnnSetTensorNdDescriptor, SetTensorNdDescriptor)
SAME(cudnnDestroyTensorDescriptor, DestroyTensorDescriptor)
SAME(cudnnCreateFilterDescriptor, CreateFilterDescriptor)
SAME(cudnnSetFilterNdDescriptor, SetFilterNdDescriptor)
SAME(cudnnDestroyFilterDescriptor, DestroyFilterDescriptor)
SAME(cudnnCreateConvolutionDescriptor, CreateConvolutionDescriptor)
SAME(cudnnSetConvolutionNdDescriptor, SetConvolutionNdDescriptor)
SAME(cudnnSetConvolutionGroupCount, SetConvolutionGroupCount)
SAME(cudnnSetConvolutionMathType, SetConvolutionMathType)
SAME(cudnnDestroyConvolutionDescriptor, DestroyConvolutionDescriptor)
SAME(cudnnGetConvolutionForwardAlgorithm_v7, GetConvolutionForwardAlgorithm_v7)
SAME(cudnnGetConvolutionForwardWorkspaceSize, GetConvolutionForwardWorkspaceSize)
SAME(cudnnConvolutionForward, ConvolutionForward)
SAME(cudnnAddTensor, AddTensor)
#ifdef SHIMKIT_BREAK_ONE
// A tensor-descriptor function where a filter-descriptor one is declared.
[[maybe_unused]] static const Official::SetFilterNdDescriptor broken =
    &::cudnnSetTensorNdDescriptor;
#endif

namespace cu = shimkit::cuda;
using Perf = cudnnConvolutionFwdAlgoPerf_t;
using Mine = cu::CudnnFwdAlgoPerf;
static_assert(sizeof(Perf) == sizeof(Mine), "perf struct size");
static_assert(offsetof(Perf, algo) == offsetof(Mine, algo), "perf.algo");
static_assert(offsetof(Perf, status) == offsetof(Mine, status), "perf.status");
static_assert(offsetof(Perf, memory) == offsetof(Mine, memory), "perf.memory");
static_assert(offsetof(Perf, mathType) == offsetof(Mine, math_type), "perf.mathType");
static_assert(sizeof(cudnnStatus_t) == sizeof(int) && sizeof(cudnnDataType_t) == sizeof(int),
              "enum sizes");
static_assert(sizeof(cudnnConvolutionFwdAlgo_t) == sizeof(int), "algo enum size");
static_assert(CUDNN_STATUS_SUCCESS == cu::kCudnnSuccess, "CUDNN_STATUS_SUCCESS");
static_assert(CUDNN_DATA_FLOAT == cu::kCudnnFloat, "CUDNN_DATA_FLOAT");
static_assert(CUDNN_TENSOR_NCHW == cu::kCudnnNchw, "CUDNN_TENSOR_NCHW");
static_assert(CUDNN_TENSOR_NHWC == cu::kCudnnNhwc, "CUDNN_TENSOR_NHWC");
static_assert(CUDNN_CROSS_CORRELATION == cu::kCudnnCrossCorrelation, "CUDNN_CROSS_CORRELATION");
static_assert(CUDNN_FMA_MATH == cu::kCudnnFmaMath, "CUDNN_FMA_MATH");
static_assert(CUDNN_DEFAULT_MATH == 0, "CUDNN_DEFAULT_MATH");
