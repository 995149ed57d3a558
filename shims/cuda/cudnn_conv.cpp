// Forward convolution through cuDNN's legacy API. One "plan" per argument
// geometry (descriptors, algorithm, workspace size) is cached per thread:
// building one costs tens of microseconds, a blob runs the same geometry on
// every call.
#include "shims/cuda/cudnn_conv.h"

#include <atomic>
#include <climits>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "shims/cuda/cuda_context.h"
#include "shims/cuda/cudnn_api.h"

namespace shimkit {
namespace cuda {
namespace {

std::atomic<int64_t> g_on_cudnn{0};
std::atomic<int64_t> g_on_host{0};
thread_local std::string t_last_fallback;

// A failed cuDNN call, with what was being done.
struct CudnnFailure {
  std::string what;
};

void ok(int status, const char* what) {
  if (status == kCudnnSuccess) return;
  const CudnnLibrary& d = cudnn_library();
  throw CudnnFailure{std::string(what) + ": " + d.get_error_string(status) + " (cuDNN status " +
                     std::to_string(status) + ")"};
}

// One cuDNN handle per thread and device, kept for the thread's lifetime
// (destroying it at exit can run after the CUDA context is gone).
void* cudnn_handle(int32_t device_index) {
  thread_local std::unordered_map<int32_t, void*> handles;
  auto it = handles.find(device_index);
  if (it != handles.end()) return it->second;
  const int32_t previous = current_device();
  set_current_device(device_index);
  void* h = nullptr;
  const int status = cudnn_library().create(&h);
  set_current_device(previous);
  ok(status, "cudnnCreate");
  handles.emplace(device_index, h);
  return h;
}

// Descriptors and the chosen algorithm for one argument geometry.
struct Plan {
  void* x = nullptr;
  void* y = nullptr;
  void* bias = nullptr;
  void* w = nullptr;
  void* conv = nullptr;
  int algo = 0;
  size_t workspace = 0;

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    const CudnnLibrary& d = cudnn_library();
    if (x != nullptr) d.destroy_tensor(x);
    if (y != nullptr) d.destroy_tensor(y);
    if (bias != nullptr) d.destroy_tensor(bias);
    if (w != nullptr) d.destroy_filter(w);
    if (conv != nullptr) d.destroy_conv(conv);
  }
};

// cuDNN takes int dims; false when a value does not fit.
bool to_ints(const std::vector<int64_t>& in, std::vector<int>* out) {
  out->clear();
  for (int64_t v : in) {
    if (v < 0 || v > INT_MAX) return false;
    out->push_back(static_cast<int>(v));
  }
  return true;
}

void* tensor_descriptor(const std::vector<int>& sizes, const std::vector<int>& strides) {
  const CudnnLibrary& d = cudnn_library();
  void* desc = nullptr;
  ok(d.create_tensor(&desc), "cudnnCreateTensorDescriptor");
  const int status =
      d.set_tensor(desc, kCudnnFloat, static_cast<int>(sizes.size()), sizes.data(), strides.data());
  if (status != kCudnnSuccess) d.destroy_tensor(desc);
  ok(status, "cudnnSetTensorNdDescriptor");
  return desc;
}

std::unique_ptr<Plan> make_plan(void* handle, const std::vector<int>& x_sizes,
                                const std::vector<int>& x_strides, const std::vector<int>& w_sizes,
                                int w_format, const std::vector<int>& y_sizes,
                                const std::vector<int>& y_strides, const ConvParams& p,
                                int64_t groups, bool with_bias) {
  const CudnnLibrary& d = cudnn_library();
  auto plan = std::make_unique<Plan>();
  plan->x = tensor_descriptor(x_sizes, x_strides);
  plan->y = tensor_descriptor(y_sizes, y_strides);
  if (with_bias) plan->bias = tensor_descriptor({1, y_sizes[1], 1, 1}, {y_sizes[1], 1, 1, 1});
  ok(d.create_filter(&plan->w), "cudnnCreateFilterDescriptor");
  ok(d.set_filter(plan->w, kCudnnFloat, w_format, 4, w_sizes.data()), "cudnnSetFilterNdDescriptor");
  ok(d.create_conv(&plan->conv), "cudnnCreateConvolutionDescriptor");
  const int pad[2] = {static_cast<int>(p.padding[0]), static_cast<int>(p.padding[1])};
  const int stride[2] = {static_cast<int>(p.stride[0]), static_cast<int>(p.stride[1])};
  const int dilation[2] = {static_cast<int>(p.dilation[0]), static_cast<int>(p.dilation[1])};
  ok(d.set_conv(plan->conv, 2, pad, stride, dilation, kCudnnCrossCorrelation, kCudnnFloat),
     "cudnnSetConvolutionNdDescriptor");
  ok(d.set_group_count(plan->conv, static_cast<int>(groups)), "cudnnSetConvolutionGroupCount");
  // Plain float32 arithmetic: the blob was checked against float32 eager.
  ok(d.set_math_type(plan->conv, kCudnnFmaMath), "cudnnSetConvolutionMathType");
  CudnnFwdAlgoPerf perf[8] = {};
  int returned = 0;
  ok(d.get_forward_algorithm(handle, plan->x, plan->w, plan->conv, plan->y, 8, &returned, perf),
     "cudnnGetConvolutionForwardAlgorithm_v7");
  const CudnnFwdAlgoPerf* chosen = nullptr;
  for (int i = 0; i < returned && i < 8; ++i) {
    // Ranked by cuDNN's heuristics; skip tensor-op (TF32) maths.
    if (perf[i].status == kCudnnSuccess &&
        (perf[i].math_type == kCudnnFmaMath || perf[i].math_type == 0)) {
      chosen = &perf[i];
      break;
    }
  }
  if (chosen == nullptr) throw CudnnFailure{"cuDNN offers no float32 algorithm for this conv"};
  plan->algo = chosen->algo;
  ok(d.get_workspace_size(handle, plan->x, plan->w, plan->conv, plan->y, plan->algo,
                          &plan->workspace),
     "cudnnGetConvolutionForwardWorkspaceSize");
  return plan;
}

// Strides of a dense tensor in `format`, ignoring dims of size one (their
// stride is never used).
bool dense_in(const SlimTensor& t, const std::vector<int64_t>& want) {
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (t.sizes()[i] != 1 && t.strides()[i] != want[static_cast<size_t>(i)]) return false;
  }
  return true;
}

bool all_on(const SlimTensor& t, int32_t device) {
  return is_cuda(t) && t.device_index() == device && t.dtype() == dtype::kFloat32;
}

}  // namespace

void count_conv(bool on_cudnn, const std::string& why) {
  (on_cudnn ? g_on_cudnn : g_on_host).fetch_add(1, std::memory_order_relaxed);
  if (!on_cudnn) t_last_fallback = why;
}

int64_t conv_count(bool on_cudnn) {
  return (on_cudnn ? g_on_cudnn : g_on_host).load(std::memory_order_relaxed);
}

const std::string& last_conv_fallback() { return t_last_fallback; }

bool cudnn_convolution(const SlimTensor& input_in, const SlimTensor& weight_in,
                       const SlimTensor* bias, const ConvParams& params, int64_t groups,
                       SlimTensor* out, std::string* why) {
  const CudnnLibrary& d = cudnn_library();
  if (!d.ok) {
    *why = d.error;
    return false;
  }
  const ConvShape s = conv_shape(input_in, weight_in, params, groups);
  const int32_t device = input_in.device_index();
  if (!all_on(input_in, device) || !all_on(weight_in, device) ||
      (bias != nullptr && !all_on(*bias, device))) {
    *why = "tensors are not all float32 on one CUDA device";
    return false;
  }
  if (bias != nullptr) {
    check_conv_bias(*bias, s.oc);
    if (s.oc > 1 && bias->strides()[0] != 1) {
      *why = "bias is not contiguous";
      return false;
    }
  }
  const SlimTensor x = lift_conv_1d(input_in);
  SlimTensor w = lift_conv_1d(weight_in);
  // cuDNN filters have a format, not strides: bring the weight into the
  // output's format if it is not dense in it already (a stream-ordered copy).
  const std::vector<int64_t> w_sizes(w.sizes().begin(), w.sizes().end());
  const std::vector<int64_t> w_want =
      s.channels_last ? channels_last_strides(w_sizes) : contiguous_strides(w_sizes);
  if (!dense_in(w, w_want)) {
    SlimTensor dense =
        SlimTensor::empty(w_sizes.data(), w_want.data(), 4, dtype::kFloat32, device::kCUDA, device);
    copy_tensor(dense, w);
    w = dense;
  }
  std::vector<int> xs, xst, ws, ys, yst;
  const std::vector<int64_t> x_sizes(x.sizes().begin(), x.sizes().end());
  const std::vector<int64_t> x_strides(x.strides().begin(), x.strides().end());
  if (!to_ints(x_sizes, &xs) || !to_ints(x_strides, &xst) || !to_ints(w_sizes, &ws) ||
      !to_ints(s.out_sizes, &ys) || !to_ints(s.out_strides, &yst) || groups > INT_MAX ||
      params.padding[0] > INT_MAX || params.padding[1] > INT_MAX || params.stride[0] > INT_MAX ||
      params.stride[1] > INT_MAX || params.dilation[0] > INT_MAX || params.dilation[1] > INT_MAX) {
    *why = "a size or stride does not fit cuDNN's int";
    return false;
  }
  const int w_format = s.channels_last ? kCudnnNhwc : kCudnnNchw;
  std::vector<int64_t> key = {device, w_format, groups, bias != nullptr ? 1 : 0};
  key.insert(key.end(), x_sizes.begin(), x_sizes.end());
  key.insert(key.end(), x_strides.begin(), x_strides.end());
  key.insert(key.end(), w_sizes.begin(), w_sizes.end());
  for (int i = 0; i < 2; ++i) {
    key.insert(key.end(), {params.stride[i], params.padding[i], params.dilation[i]});
  }
  thread_local std::map<std::vector<int64_t>, std::unique_ptr<Plan>> plans;
  try {
    void* handle = cudnn_handle(device);
    auto it = plans.find(key);
    if (it == plans.end()) {
      if (plans.size() >= 256) plans.clear();  // a blob has a handful of geometries
      it = plans
               .emplace(key, make_plan(handle, xs, xst, ws, w_format, ys, yst, params, groups,
                                       bias != nullptr))
               .first;
    }
    const Plan& plan = *it->second;
    SlimTensor y = SlimTensor::empty(s.out_sizes.data(), s.out_strides.data(), 4, dtype::kFloat32,
                                     device::kCUDA, device);
    std::shared_ptr<Storage> workspace;
    if (plan.workspace > 0) workspace = device_storage(plan.workspace, device);
    ok(d.set_stream(handle, current_stream(device)), "cudnnSetStream");
    const float one = 1.0f, zero = 0.0f;
    ok(d.convolution_forward(handle, &one, plan.x, x.data_ptr(), plan.w, w.data_ptr(), plan.conv,
                             plan.algo, workspace ? workspace->data() : nullptr, plan.workspace,
                             &zero, plan.y, y.data_ptr()),
       "cudnnConvolutionForward");
    if (bias != nullptr) {
      ok(d.add_tensor(handle, &one, plan.bias, bias->data_ptr(), &one, plan.y, y.data_ptr()),
         "cudnnAddTensor");
    }
    *out = conv_output_view(y, s);
    return true;
  } catch (const CudnnFailure& failure) {
    *why = failure.what;
    return false;
  }
}

}  // namespace cuda
}  // namespace shimkit
