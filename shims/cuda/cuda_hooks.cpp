// The CUDA library's device file: the hooks through which the one shim core
// (shims/shim_core.cpp, shims/slim_tensor.cpp) allocates, pins and copies
// CUDA memory. The implementations live in cuda_context.cpp.
#include "shims/cuda/cuda_context.h"

namespace shimkit {
namespace cuda {
namespace {

constexpr DeviceHooks kCudaHooks = {device::kCUDA,  "CUDA",      check_device_index,
                                    device_storage, copy_device, pinned_storage};

}  // namespace

const DeviceHooks& cuda_hooks() { return kCudaHooks; }

}  // namespace cuda

const DeviceHooks* accelerator_hooks() { return &cuda::cuda_hooks(); }

}  // namespace shimkit
