#include "shims/cuda/cudnn_api.h"

#include <cstdlib>
#include <cstring>

#include "shims/cuda/cuda_api.h"

namespace shimkit {
namespace cuda {
namespace {

CudnnLibrary load_cudnn() {
  CudnnLibrary d;
  void* lib =
      open_library("cuDNN", "SHIMKIT_CUDNN", {"libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"},
                   true, &d.library, &d.error);
  if (lib == nullptr) return d;
  std::string missing;
  Cudnn::GetVersion get_version = nullptr;
  bind(lib, "cudnnGetVersion", &get_version, &missing);
  bind(lib, "cudnnGetErrorString", &d.get_error_string, &missing);
  bind(lib, "cudnnCreate", &d.create, &missing);
  bind(lib, "cudnnSetStream", &d.set_stream, &missing);
  bind(lib, "cudnnCreateTensorDescriptor", &d.create_tensor, &missing);
  bind(lib, "cudnnSetTensorNdDescriptor", &d.set_tensor, &missing);
  bind(lib, "cudnnDestroyTensorDescriptor", &d.destroy_tensor, &missing);
  bind(lib, "cudnnCreateFilterDescriptor", &d.create_filter, &missing);
  bind(lib, "cudnnSetFilterNdDescriptor", &d.set_filter, &missing);
  bind(lib, "cudnnDestroyFilterDescriptor", &d.destroy_filter, &missing);
  bind(lib, "cudnnCreateConvolutionDescriptor", &d.create_conv, &missing);
  bind(lib, "cudnnSetConvolutionNdDescriptor", &d.set_conv, &missing);
  bind(lib, "cudnnSetConvolutionGroupCount", &d.set_group_count, &missing);
  bind(lib, "cudnnSetConvolutionMathType", &d.set_math_type, &missing);
  bind(lib, "cudnnDestroyConvolutionDescriptor", &d.destroy_conv, &missing);
  bind(lib, "cudnnGetConvolutionForwardAlgorithm_v7", &d.get_forward_algorithm, &missing);
  bind(lib, "cudnnGetConvolutionForwardWorkspaceSize", &d.get_workspace_size, &missing);
  bind(lib, "cudnnConvolutionForward", &d.convolution_forward, &missing);
  bind(lib, "cudnnGetConvolutionBackwardDataAlgorithm_v7", &d.get_backward_data_algorithm,
       &missing);
  bind(lib, "cudnnGetConvolutionBackwardDataWorkspaceSize", &d.get_backward_data_workspace_size,
       &missing);
  bind(lib, "cudnnConvolutionBackwardData", &d.convolution_backward_data, &missing);
  bind(lib, "cudnnAddTensor", &d.add_tensor, &missing);
  bind(lib, "cudnnTransformTensor", &d.transform_tensor, &missing);
  if (!missing.empty()) {
    d.error = d.library + ": missing " + missing + " (not cuDNN 8/9?)";
    return d;
  }
  d.version = get_version();
  d.ok = true;
  std::string graph_missing;
  bind(lib, "cudnnBackendCreateDescriptor", &d.create_descriptor, &graph_missing);
  bind(lib, "cudnnBackendDestroyDescriptor", &d.destroy_descriptor, &graph_missing);
  bind(lib, "cudnnBackendFinalize", &d.finalize, &graph_missing);
  bind(lib, "cudnnBackendSetAttribute", &d.set_attribute, &graph_missing);
  bind(lib, "cudnnBackendGetAttribute", &d.get_attribute, &graph_missing);
  bind(lib, "cudnnBackendExecute", &d.execute, &graph_missing);
  const char* api = std::getenv("SHIMKIT_CUDNN_API");
  d.graph_ok = graph_missing.empty() && (api == nullptr || std::strcmp(api, "legacy") != 0);
  return d;
}

}  // namespace

const CudnnLibrary& cudnn_library() {
  static const CudnnLibrary d = load_cudnn();
  return d;
}

}  // namespace cuda
}  // namespace shimkit
