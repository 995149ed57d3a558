// cuDNN, loaded at run time with dlopen like the CUDA runtime and cuBLAS
// (shims/cuda/cuda_api.h): the CUDA shim library keeps no link-time CUDA
// dependency and still runs every convolution when cuDNN is absent (on the
// host, slowly).
//
// Two APIs are used, both present in cuDNN 8 and 9: the backend ("graph") API,
// whose finalized execution plans are cached per geometry so that a
// convolution costs one variant pack and one execute (what torch does), and
// the "legacy" convolution API as the fallback when the graph API offers no
// engine. The signatures are declared from type parameters so that a test
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
// cudnnConvolutionFwdAlgoPerf_t, `BwdDataAlgo` cudnnConvolutionBwdDataAlgo_t,
// `BwdDataPerf` cudnnConvolutionBwdDataAlgoPerf_t.
template <typename Status, typename Handle, typename Stream, typename Tensor, typename Filter,
          typename Conv, typename DataType, typename Format, typename Mode, typename Math,
          typename Algo, typename Perf, typename BwdDataAlgo, typename BwdDataPerf>
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
  // Backward data: a transposed convolution (ATen's cuDNN path runs it so).
  using GetConvolutionBackwardDataAlgorithm_v7 = Status (*)(Handle, const Filter, const Tensor,
                                                            const Conv, const Tensor, const int,
                                                            int*, BwdDataPerf*);
  using GetConvolutionBackwardDataWorkspaceSize = Status (*)(Handle, const Filter, const Tensor,
                                                             const Conv, const Tensor, BwdDataAlgo,
                                                             size_t*);
  using ConvolutionBackwardData = Status (*)(Handle, const void*, const Filter, const void*,
                                             const Tensor, const void*, const Conv, BwdDataAlgo,
                                             void*, size_t, const void*, const Tensor, void*);
  using AddTensor = Status (*)(Handle, const void*, const Tensor, const void*, const void*,
                               const Tensor, void*);
  using TransformTensor = Status (*)(Handle, const void*, const Tensor, const void*, const void*,
                                     const Tensor, void*);
};

// The backend API: `BackendDesc` is cudnnBackendDescriptor_t, `DescType`
// cudnnBackendDescriptorType_t, `AttrName` cudnnBackendAttributeName_t,
// `AttrType` cudnnBackendAttributeType_t.
template <typename Status, typename Handle, typename BackendDesc, typename DescType,
          typename AttrName, typename AttrType>
struct CudnnGraphSignatures {
  using BackendCreateDescriptor = Status (*)(DescType, BackendDesc*);
  using BackendDestroyDescriptor = Status (*)(BackendDesc);
  using BackendFinalize = Status (*)(BackendDesc);
  using BackendSetAttribute = Status (*)(BackendDesc, AttrName, AttrType, int64_t, const void*);
  using BackendGetAttribute = Status (*)(BackendDesc const, AttrName, AttrType, int64_t, int64_t*,
                                         void*);
  using BackendExecute = Status (*)(Handle, BackendDesc, BackendDesc);
};

// ABI-identical stand-in for cudnnConvolutionFwdAlgoPerf_t and
// cudnnConvolutionBwdDataAlgoPerf_t (one layout).
struct CudnnAlgoPerf {
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
constexpr int kCudnnHalf = 2;              // CUDNN_DATA_HALF
constexpr int kCudnnBfloat16 = 9;          // CUDNN_DATA_BFLOAT16
constexpr int kCudnnNchw = 0;              // CUDNN_TENSOR_NCHW
constexpr int kCudnnNhwc = 1;              // CUDNN_TENSOR_NHWC
constexpr int kCudnnCrossCorrelation = 1;  // CUDNN_CROSS_CORRELATION (what torch runs)
constexpr int kCudnnFmaMath = 3;           // CUDNN_FMA_MATH: true float32, no TF32
constexpr int kCudnnTensorOpMath = 1;      // CUDNN_TENSOR_OP_MATH: TF32 allowed (torch's default)

// Backend descriptor types (cudnnBackendDescriptorType_t).
constexpr int kBackendConvolution = 1;    // CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR
constexpr int kBackendEngine = 2;         // CUDNN_BACKEND_ENGINE_DESCRIPTOR
constexpr int kBackendEngineCfg = 3;      // CUDNN_BACKEND_ENGINECFG_DESCRIPTOR
constexpr int kBackendEngineHeur = 4;     // CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR
constexpr int kBackendExecutionPlan = 5;  // CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR
constexpr int kBackendConvForward = 10;   // CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR
constexpr int kBackendConvBackwardData = 12;  // ..._CONVOLUTION_BACKWARD_DATA_DESCRIPTOR
constexpr int kBackendOperationGraph = 15;    // CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR
constexpr int kBackendVariantPack = 16;       // CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR
constexpr int kBackendTensor = 17;            // CUDNN_BACKEND_TENSOR_DESCRIPTOR
// Attribute value types (cudnnBackendAttributeType_t).
constexpr int kTypeHandle = 0;
constexpr int kTypeDataType = 1;
constexpr int kTypeInt64 = 3;
constexpr int kTypeFloat = 4;
constexpr int kTypeVoidPtr = 6;
constexpr int kTypeConvolutionMode = 7;
constexpr int kTypeHeurMode = 8;
constexpr int kTypeNumericalNote = 11;
constexpr int kTypeBackendDescriptor = 15;
// Attribute names (cudnnBackendAttributeName_t).
constexpr int kAttrConvCompType = 100;
constexpr int kAttrConvMode = 101;
constexpr int kAttrConvDilations = 102;
constexpr int kAttrConvFilterStrides = 103;
constexpr int kAttrConvPostPaddings = 104;
constexpr int kAttrConvPrePaddings = 105;
constexpr int kAttrConvSpatialDims = 106;
constexpr int kAttrEngineHeurMode = 200;
constexpr int kAttrEngineHeurOperationGraph = 201;
constexpr int kAttrEngineHeurResults = 202;
constexpr int kAttrEngineCfgEngine = 300;
constexpr int kAttrExecutionPlanHandle = 400;
constexpr int kAttrExecutionPlanEngineConfig = 401;
constexpr int kAttrExecutionPlanWorkspaceSize = 402;
constexpr int kAttrConvForwardAlpha = 700;
constexpr int kAttrConvForwardBeta = 701;
constexpr int kAttrConvForwardConvDesc = 702;
constexpr int kAttrConvForwardW = 703;
constexpr int kAttrConvForwardX = 704;
constexpr int kAttrConvForwardY = 705;
constexpr int kAttrConvBwdDataAlpha = 706;
constexpr int kAttrConvBwdDataBeta = 707;
constexpr int kAttrConvBwdDataConvDesc = 708;
constexpr int kAttrConvBwdDataW = 709;
constexpr int kAttrConvBwdDataDx = 710;
constexpr int kAttrConvBwdDataDy = 711;
constexpr int kAttrOperationGraphHandle = 800;
constexpr int kAttrOperationGraphOps = 801;
constexpr int kAttrTensorByteAlignment = 900;
constexpr int kAttrTensorDataType = 901;
constexpr int kAttrTensorDimensions = 902;
constexpr int kAttrTensorStrides = 903;
constexpr int kAttrTensorUniqueId = 906;
constexpr int kAttrVariantPackUniqueIds = 1000;
constexpr int kAttrVariantPackDataPointers = 1001;
constexpr int kAttrVariantPackWorkspace = 1003;
constexpr int kAttrEngineNumericalNote = 1303;
// Heuristic mode and the numerical notes that mean "not true float32".
constexpr int kHeurModeA = 3;              // CUDNN_HEUR_MODE_A
constexpr int kNoteTensorCore = 0;         // CUDNN_NUMERICAL_NOTE_TENSOR_CORE
constexpr int kNoteDownConvertInputs = 1;  // CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS

using Cudnn = CudnnSignatures<int, void*, void*, void*, void*, void*, int, int, int, int, int,
                              CudnnAlgoPerf, int, CudnnAlgoPerf>;
using CudnnGraph = CudnnGraphSignatures<int, void*, void*, int, int, int>;

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
  Cudnn::GetConvolutionBackwardDataAlgorithm_v7 get_backward_data_algorithm = nullptr;
  Cudnn::GetConvolutionBackwardDataWorkspaceSize get_backward_data_workspace_size = nullptr;
  Cudnn::ConvolutionBackwardData convolution_backward_data = nullptr;
  Cudnn::AddTensor add_tensor = nullptr;
  Cudnn::TransformTensor transform_tensor = nullptr;
  // The backend API; `graph_ok` is false (the legacy API runs every
  // convolution) when a function is missing or SHIMKIT_CUDNN_API=legacy.
  bool graph_ok = false;
  CudnnGraph::BackendCreateDescriptor create_descriptor = nullptr;
  CudnnGraph::BackendDestroyDescriptor destroy_descriptor = nullptr;
  CudnnGraph::BackendFinalize finalize = nullptr;
  CudnnGraph::BackendSetAttribute set_attribute = nullptr;
  CudnnGraph::BackendGetAttribute get_attribute = nullptr;
  CudnnGraph::BackendExecute execute = nullptr;
};

// Loaded once per process (thread-safe); never throws. SHIMKIT_CUDNN names
// an explicit library path; SHIMKIT_CUDNN=0 turns cuDNN off;
// SHIMKIT_CUDNN_API=legacy keeps convolutions on the legacy API.
const CudnnLibrary& cudnn_library();

}  // namespace cuda
}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CUDA_CUDNN_API_H_
