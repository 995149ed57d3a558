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
    cudnnMathType_t, cudnnConvolutionFwdAlgo_t, cudnnConvolutionFwdAlgoPerf_t,
    cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionBwdDataAlgoPerf_t>;

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
SAME(cudnnGetConvolutionBackwardDataAlgorithm_v7, GetConvolutionBackwardDataAlgorithm_v7)
SAME(cudnnGetConvolutionBackwardDataWorkspaceSize, GetConvolutionBackwardDataWorkspaceSize)
SAME(cudnnConvolutionBackwardData, ConvolutionBackwardData)
SAME(cudnnAddTensor, AddTensor)
SAME(cudnnTransformTensor, TransformTensor)

using OfficialGraph =
    shimkit::cuda::CudnnGraphSignatures<cudnnStatus_t, cudnnHandle_t, cudnnBackendDescriptor_t,
                                        cudnnBackendDescriptorType_t, cudnnBackendAttributeName_t,
                                        cudnnBackendAttributeType_t>;
#define SAME_GRAPH(fn, sig) [[maybe_unused]] static const OfficialGraph::sig check_##sig = &::fn;
SAME_GRAPH(cudnnBackendCreateDescriptor, BackendCreateDescriptor)
SAME_GRAPH(cudnnBackendDestroyDescriptor, BackendDestroyDescriptor)
SAME_GRAPH(cudnnBackendFinalize, BackendFinalize)
SAME_GRAPH(cudnnBackendSetAttribute, BackendSetAttribute)
SAME_GRAPH(cudnnBackendGetAttribute, BackendGetAttribute)
SAME_GRAPH(cudnnBackendExecute, BackendExecute)
#ifdef SHIMKIT_BREAK_ONE
// A tensor-descriptor function where a filter-descriptor one is declared.
[[maybe_unused]] static const Official::SetFilterNdDescriptor broken =
    &::cudnnSetTensorNdDescriptor;
#endif

namespace cu = shimkit::cuda;
using Mine = cu::CudnnAlgoPerf;
// Both perf structs of the official header have the one stand-in's layout.
template <typename Perf>
constexpr bool same_perf_layout() {
  return sizeof(Perf) == sizeof(Mine) && offsetof(Perf, algo) == offsetof(Mine, algo) &&
         offsetof(Perf, status) == offsetof(Mine, status) &&
         offsetof(Perf, memory) == offsetof(Mine, memory) &&
         offsetof(Perf, mathType) == offsetof(Mine, math_type);
}
static_assert(same_perf_layout<cudnnConvolutionFwdAlgoPerf_t>(), "forward perf layout");
static_assert(same_perf_layout<cudnnConvolutionBwdDataAlgoPerf_t>(), "backward-data perf layout");
static_assert(sizeof(cudnnConvolutionBwdDataAlgo_t) == sizeof(int), "bwd-data algo enum size");
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
static_assert(CUDNN_TENSOR_OP_MATH == cu::kCudnnTensorOpMath, "CUDNN_TENSOR_OP_MATH");
static_assert(sizeof(cudnnBackendDescriptorType_t) == sizeof(int) &&
                  sizeof(cudnnBackendAttributeName_t) == sizeof(int) &&
                  sizeof(cudnnBackendAttributeType_t) == sizeof(int) &&
                  sizeof(cudnnBackendHeurMode_t) == sizeof(int) &&
                  sizeof(cudnnBackendNumericalNote_t) == sizeof(int) &&
                  sizeof(cudnnConvolutionMode_t) == sizeof(int),
              "backend enum sizes");
#define SAME_VALUE(official, mine) static_assert(official == cu::mine, #official);
SAME_VALUE(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, kBackendConvolution)
SAME_VALUE(CUDNN_BACKEND_ENGINE_DESCRIPTOR, kBackendEngine)
SAME_VALUE(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, kBackendEngineCfg)
SAME_VALUE(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, kBackendEngineHeur)
SAME_VALUE(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, kBackendExecutionPlan)
SAME_VALUE(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, kBackendConvForward)
SAME_VALUE(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, kBackendOperationGraph)
SAME_VALUE(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, kBackendVariantPack)
SAME_VALUE(CUDNN_BACKEND_TENSOR_DESCRIPTOR, kBackendTensor)
SAME_VALUE(CUDNN_TYPE_HANDLE, kTypeHandle)
SAME_VALUE(CUDNN_TYPE_DATA_TYPE, kTypeDataType)
SAME_VALUE(CUDNN_TYPE_INT64, kTypeInt64)
SAME_VALUE(CUDNN_TYPE_FLOAT, kTypeFloat)
SAME_VALUE(CUDNN_TYPE_VOID_PTR, kTypeVoidPtr)
SAME_VALUE(CUDNN_TYPE_CONVOLUTION_MODE, kTypeConvolutionMode)
SAME_VALUE(CUDNN_TYPE_HEUR_MODE, kTypeHeurMode)
SAME_VALUE(CUDNN_TYPE_NUMERICAL_NOTE, kTypeNumericalNote)
SAME_VALUE(CUDNN_TYPE_BACKEND_DESCRIPTOR, kTypeBackendDescriptor)
SAME_VALUE(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, kAttrConvCompType)
SAME_VALUE(CUDNN_ATTR_CONVOLUTION_CONV_MODE, kAttrConvMode)
SAME_VALUE(CUDNN_ATTR_CONVOLUTION_DILATIONS, kAttrConvDilations)
SAME_VALUE(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, kAttrConvFilterStrides)
SAME_VALUE(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, kAttrConvPostPaddings)
SAME_VALUE(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, kAttrConvPrePaddings)
SAME_VALUE(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, kAttrConvSpatialDims)
SAME_VALUE(CUDNN_ATTR_ENGINEHEUR_MODE, kAttrEngineHeurMode)
SAME_VALUE(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, kAttrEngineHeurOperationGraph)
SAME_VALUE(CUDNN_ATTR_ENGINEHEUR_RESULTS, kAttrEngineHeurResults)
SAME_VALUE(CUDNN_ATTR_ENGINECFG_ENGINE, kAttrEngineCfgEngine)
SAME_VALUE(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, kAttrExecutionPlanHandle)
SAME_VALUE(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, kAttrExecutionPlanEngineConfig)
SAME_VALUE(CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, kAttrExecutionPlanWorkspaceSize)
SAME_VALUE(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, kAttrConvForwardAlpha)
SAME_VALUE(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, kAttrConvForwardBeta)
SAME_VALUE(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, kAttrConvForwardConvDesc)
SAME_VALUE(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, kAttrConvForwardW)
SAME_VALUE(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, kAttrConvForwardX)
SAME_VALUE(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, kAttrConvForwardY)
SAME_VALUE(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, kBackendConvBackwardData)
SAME_VALUE(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, kAttrConvBwdDataAlpha)
SAME_VALUE(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, kAttrConvBwdDataBeta)
SAME_VALUE(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC, kAttrConvBwdDataConvDesc)
SAME_VALUE(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, kAttrConvBwdDataW)
SAME_VALUE(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, kAttrConvBwdDataDx)
SAME_VALUE(CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, kAttrConvBwdDataDy)
SAME_VALUE(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, kAttrOperationGraphHandle)
SAME_VALUE(CUDNN_ATTR_OPERATIONGRAPH_OPS, kAttrOperationGraphOps)
SAME_VALUE(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, kAttrTensorByteAlignment)
SAME_VALUE(CUDNN_ATTR_TENSOR_DATA_TYPE, kAttrTensorDataType)
SAME_VALUE(CUDNN_ATTR_TENSOR_DIMENSIONS, kAttrTensorDimensions)
SAME_VALUE(CUDNN_ATTR_TENSOR_STRIDES, kAttrTensorStrides)
SAME_VALUE(CUDNN_ATTR_TENSOR_UNIQUE_ID, kAttrTensorUniqueId)
SAME_VALUE(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, kAttrVariantPackUniqueIds)
SAME_VALUE(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, kAttrVariantPackDataPointers)
SAME_VALUE(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, kAttrVariantPackWorkspace)
SAME_VALUE(CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, kAttrEngineNumericalNote)
SAME_VALUE(CUDNN_HEUR_MODE_A, kHeurModeA)
SAME_VALUE(CUDNN_NUMERICAL_NOTE_TENSOR_CORE, kNoteTensorCore)
SAME_VALUE(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS, kNoteDownConvertInputs)
SAME_VALUE(CUDNN_DATA_HALF, kCudnnHalf)
SAME_VALUE(CUDNN_DATA_BFLOAT16, kCudnnBfloat16)
