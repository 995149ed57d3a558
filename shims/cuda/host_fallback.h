// Running a CPU shim for a CUDA op: the correct, slow path for what cuBLAS(Lt)
// or cuDNN cannot take and for ops with no device kernel here. Inputs are
// mirrored to the host, the CPU shim runs there, and its results are copied
// back (into a given `out`) or uploaded as new device tensors in the geometry
// the CPU op chose. Each call synchronises, so it cannot be captured in a
// CUDA graph (replay then gives up, with the reason, and runs eagerly).
#ifndef SHIMKIT_SHIMS_CUDA_HOST_FALLBACK_H_
#define SHIMKIT_SHIMS_CUDA_HOST_FALLBACK_H_

#include <array>
#include <cstddef>
#include <deque>
#include <string>
#include <vector>

#include "shims/cuda/cuda_context.h"
#include "shims/shim_internal.h"

namespace shimkit {
namespace cuda {

// A handle that views `t` without owning it (valid while `t` lives).
inline AtenTensorHandle borrow_handle(SlimTensor& t) {
  return reinterpret_cast<AtenTensorHandle>(&t);
}

// Owns a handle a CPU shim returned.
struct HandleOwner {
  AtenTensorHandle h = nullptr;
  HandleOwner() = default;
  HandleOwner(const HandleOwner&) = delete;
  HandleOwner& operator=(const HandleOwner&) = delete;
  ~HandleOwner() {
    if (h != nullptr) aoti_torch_delete_tensor_object(h);
  }
};

// Host mirrors of the tensors behind device handles, alive as long as this
// object (a deque: handles to earlier mirrors stay valid).
class HostMirrors {
 public:
  // A handle to a host mirror of `h`'s tensor; null stays null.
  AtenTensorHandle operator()(AtenTensorHandle h) {
    if (h == nullptr) return nullptr;
    mirrors_.push_back(host_mirror(as_tensor(h)));
    return borrow_handle(mirrors_.back());
  }

 private:
  std::deque<SlimTensor> mirrors_;
};

// Runs `cpu_op(host_out, host_inputs)` on host mirrors and copies the written
// output back into `out`.
template <typename CpuOp>
void on_host_into(const SlimTensor& out, const std::vector<const SlimTensor*>& inputs,
                  CpuOp&& cpu_op) {
  SlimTensor hout = host_mirror(out);
  std::vector<SlimTensor> mirrors;
  mirrors.reserve(inputs.size());
  for (const SlimTensor* t : inputs) mirrors.push_back(host_mirror(*t));
  if (cpu_op(hout, mirrors) != AOTI_TORCH_SUCCESS) throw ShimError(shimkit_shim_last_error());
  copy_tensor(out, hout);
}

// Runs `cpu_op(results)`, a CPU shim that returns N new host tensors, and
// hands each back in `rets` uploaded to `device_index` (all or none).
template <size_t N, typename CpuOp>
void results_on_host(int32_t device_index, const std::array<AtenTensorHandle*, N>& rets,
                     CpuOp&& cpu_op) {
  for (AtenTensorHandle* r : rets) check_out(r);
  std::array<HandleOwner, N> host;
  if (cpu_op(host) != AOTI_TORCH_SUCCESS) throw ShimError(shimkit_shim_last_error());
  std::array<HandleOwner, N> device;
  for (size_t i = 0; i < N; ++i) {
    device[i].h = to_handle(upload(as_tensor(host[i].h), device_index));
  }
  for (size_t i = 0; i < N; ++i) {
    *rets[i] = device[i].h;
    device[i].h = nullptr;
  }
}

// The CUDA device `h`'s tensor lives on; throws naming `what` if it is not on one.
inline int32_t cuda_device_of(AtenTensorHandle h, const char* what) {
  const SlimTensor& t = as_tensor(h);
  if (!is_cuda(t)) throw ShimError(std::string(what) + ": tensor is not on a CUDA device");
  return t.device_index();
}

}  // namespace cuda
}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CUDA_HOST_FALLBACK_H_
