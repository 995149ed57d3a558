// The slim CUDA shims on whatever machine runs the test. Without a usable GPU
// (CI): every CUDA request fails with a clear message and the CPU path keeps
// working. With one: bad device indices and device types are still refused.
#include <cstdio>
#include <cstring>
#include <string>

#include "shims/cuda/aoti_shim_cuda_abi.h"

namespace {

int g_failures = 0;

void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s (last error: %s)\n", what, shimkit_shim_last_error());
    ++g_failures;
  }
}

bool error_mentions(const char* needle) {
  return std::strstr(shimkit_shim_last_error(), needle) != nullptr;
}

void cpu_path_works() {
  const int64_t sizes[] = {2, 3};
  const int64_t strides[] = {3, 1};
  float data[6] = {1, 2, 3, 4, 5, 6};
  AtenTensorHandle src = nullptr, dst = nullptr, copy = nullptr;
  expect(aoti_torch_create_tensor_from_blob(data, 2, sizes, strides, 0, aoti_torch_dtype_float32(),
                                            aoti_torch_device_type_cpu(), 0, &src) == 0,
         "CPU from_blob");
  expect(aoti_torch_empty_strided(2, sizes, strides, aoti_torch_dtype_float32(),
                                  aoti_torch_device_type_cpu(), -1, &dst) == 0,
         "CPU empty_strided");
  expect(aoti_torch_copy_(dst, src, 0) == 0, "CPU copy_");
  expect(aoti_torch_clone(dst, &copy) == 0, "CPU clone");
  void* p = nullptr;
  expect(copy != nullptr && aoti_torch_get_data_ptr(copy, &p) == 0 &&
             static_cast<float*>(p)[5] == 6.0f,
         "CPU clone holds the values");
  for (AtenTensorHandle h : {src, dst, copy}) {
    if (h != nullptr) aoti_torch_delete_tensor_object(h);
  }
}

void refuses_bad_devices(int32_t count) {
  const int64_t sizes[] = {4};
  AtenTensorHandle t = nullptr;
  expect(aoti_torch_empty_strided(1, sizes, nullptr, aoti_torch_dtype_float32(),
                                  aoti_torch_device_type_cuda(), -1, &t) != 0 &&
             error_mentions("negative index"),
         "negative CUDA index refused");
  expect(aoti_torch_empty_strided(1, sizes, nullptr, aoti_torch_dtype_float32(),
                                  aoti_torch_device_type_mps(), 0, &t) != 0 &&
             error_mentions("CPU and CUDA tensors only"),
         "MPS device type refused");
  if (count > 0) {
    expect(aoti_torch_empty_strided(1, sizes, nullptr, aoti_torch_dtype_float32(),
                                    aoti_torch_device_type_cuda(), count, &t) != 0 &&
               error_mentions("out of range"),
           "CUDA index past the last device refused");
  }
  expect(t == nullptr, "no tensor handed out on failure");
}

void without_cuda() {
  const std::string reason = shimkit_cuda_unavailable_reason();
  std::printf("no usable CUDA: %s\n", reason.c_str());
  expect(!reason.empty(), "a reason is given");
  const int64_t sizes[] = {4};
  AtenTensorHandle t = nullptr;
  expect(aoti_torch_empty_strided(1, sizes, nullptr, aoti_torch_dtype_float32(),
                                  aoti_torch_device_type_cuda(), 0, &t) != 0 &&
             error_mentions(reason.c_str()),
         "CUDA empty_strided fails with the reason");
  expect(aoti_torch_empty_strided_pinned(1, sizes, nullptr, aoti_torch_dtype_float32(),
                                         aoti_torch_device_type_cpu(), -1, &t) != 0,
         "pinned memory needs CUDA");
  float host[4] = {};
  const int64_t strides[] = {1};
  expect(aoti_torch_create_tensor_from_blob(host, 1, sizes, strides, 0, aoti_torch_dtype_float32(),
                                            aoti_torch_device_type_cuda(), 0, &t) != 0,
         "CUDA from_blob fails");
  CUDAGuardHandle guard = nullptr;
  expect(aoti_torch_create_cuda_guard(0, &guard) != 0 && guard == nullptr, "CUDA guard fails");
  void* stream = nullptr;
  expect(aoti_torch_get_current_cuda_stream(0, &stream) != 0, "current stream fails");
  expect(t == nullptr, "no tensor handed out on failure");
}

}  // namespace

int main() {
  const int32_t count = shimkit_cuda_device_count();
  cpu_path_works();
  refuses_bad_devices(count);
  if (count < 0) without_cuda();
  cpu_path_works();  // still works after the CUDA failures
  if (g_failures == 0) std::printf("ok (%d CUDA device(s))\n", count);
  return g_failures == 0 ? 0 : 1;
}
