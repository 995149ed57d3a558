// The CPU library's device file: it holds no accelerator, so the shim core
// creates and copies host tensors only (shims/cuda/cuda_hooks.cpp is the CUDA
// library's counterpart).
#include "shims/slim_tensor.h"

namespace shimkit {

const DeviceHooks* accelerator_hooks() { return nullptr; }

}  // namespace shimkit
