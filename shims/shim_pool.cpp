// Slim CPU pooling fallbacks, 2-D and 3-D: avg_pool, max_pool with indices,
// adaptive average and adaptive max pooling. Inductor generates its own loops
// for small windows and calls these for large ones (a global 7x7 average,
// SPP's 9x9 and 13x13 max pools, AdaptiveMaxPool2d(1) over a 9x9 map, video
// models' 3-D pools). Semantics are ATen's CPU kernels': output sizes,
// ceil_mode, dilation, count_include_pad, divisor_override, NaN-propagating
// maxima with the index of the last NaN, indices flat within each plane, and
// the output's memory format (ATen's meta functions: channels_last for a
// channels_last 4-D input; for 5-D inputs only max pooling keeps
// channels_last_3d). float16 and bfloat16 accumulate in float, round once.
//
// Spatial arrays are indexed depth, height, width; 2-D pooling has depth 1
// (size, kernel and stride 1, padding 0), so one loop nest serves both.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "shims/scalar_types.h"
#include "shims/shim_internal.h"

namespace shimkit {
namespace {

constexpr int kDims = 3;  // depth, height, width

// A pooling input as planes (N * C) of [D, H, W] with each axis's stride,
// whatever its layout (unbatched or batched, contiguous or channels-last).
struct Planes {
  int spatial = 2;  // 2 or 3
  bool batched = false;
  int64_t batch = 1, channels = 0;
  int64_t size[kDims] = {1, 1, 1};
  int64_t batch_stride = 0, channel_stride = 0;
  int64_t stride[kDims] = {0, 0, 0};
};

Planes planes_of(const SlimTensor& in, int spatial, const char* op) {
  if (in.dim() != spatial + 1 && in.dim() != spatial + 2) {
    throw ShimError(std::string(op) + ": expected a " + std::to_string(spatial + 1) + "-D or " +
                    std::to_string(spatial + 2) + "-D input, got " + std::to_string(in.dim()) +
                    "-D");
  }
  Planes p;
  p.spatial = spatial;
  p.batched = in.dim() == spatial + 2;
  const int64_t first = p.batched ? 1 : 0;
  if (p.batched) {
    p.batch = in.sizes()[0];
    p.batch_stride = in.strides()[0];
  }
  p.channels = in.sizes()[first];
  p.channel_stride = in.strides()[first];
  for (int i = 0; i < spatial; ++i) {
    p.size[kDims - spatial + i] = in.sizes()[first + 1 + i];
    p.stride[kDims - spatial + i] = in.strides()[first + 1 + i];
  }
  for (int i = 0; i < kDims; ++i) {
    if (p.size[i] <= 0) throw ShimError(std::string(op) + ": empty spatial dimensions");
  }
  return p;
}

// A new output shaped like `in` with spatial sizes `out`, channels-last when
// `in` is and the op keeps that format (ATen's meta functions).
SlimTensor pooled_like(const SlimTensor& in, const Planes& p, const int64_t out[kDims],
                       int32_t dtype, bool keeps_channels_last) {
  std::vector<int64_t> sizes;
  if (p.batched) sizes.push_back(p.batch);
  sizes.push_back(p.channels);
  sizes.insert(sizes.end(), out + kDims - p.spatial, out + kDims);
  const int64_t rank = static_cast<int64_t>(sizes.size());
  if (p.batched && keeps_channels_last && in.is_channels_last()) {
    const std::vector<int64_t> strides = channels_last_strides(sizes);
    return SlimTensor::empty(sizes.data(), strides.data(), rank, dtype, in.device_type(),
                             in.device_index());
  }
  return SlimTensor::empty(sizes.data(), nullptr, rank, dtype, in.device_type(), in.device_index());
}

// 4-D outputs keep channels_last in every pooling op; 5-D ones
// channels_last_3d only in max pooling.
bool keeps_channels_last(int spatial, bool max_pooling) { return spatial == 2 || max_pooling; }

// Where element (n, c, z, y, x) of a pooled tensor lives (its own strides).
struct Offsets {
  int64_t batch = 0, channel = 0;
  int64_t at[kDims] = {0, 0, 0};

  int64_t of(int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) const {
    return n * batch + c * channel + z * at[0] + y * at[1] + x * at[2];
  }
};

Offsets offsets_of(const SlimTensor& t, const Planes& p) {
  Offsets o;
  const int64_t first = p.batched ? 1 : 0;
  o.batch = p.batched ? t.strides()[0] : 0;
  o.channel = t.strides()[first];
  for (int i = 0; i < p.spatial; ++i) o.at[kDims - p.spatial + i] = t.strides()[first + 1 + i];
  return o;
}

// Spatial sizes of a pooled tensor, depth first (1 for 2-D pooling).
void spatial_of(const SlimTensor& t, const Planes& p, int64_t out[kDims]) {
  for (int i = 0; i < kDims; ++i) out[i] = 1;
  for (int i = 0; i < p.spatial; ++i) {
    out[kDims - p.spatial + i] = t.sizes()[t.dim() - p.spatial + i];
  }
}

// One window parameter list as the ABI passes it (one value, or one per
// spatial dim), right-aligned into `out`; `fill` for 2-D pooling's depth.
void read_list(const int64_t* values, int64_t len, const Planes& p, int64_t fill,
               int64_t out[kDims], const char* op, const char* what) {
  if (len != 1 && len != p.spatial) {
    throw ShimError(std::string(op) + ": " + what + " must have 1 or " + std::to_string(p.spatial) +
                    " values");
  }
  if (values == nullptr) throw ShimError(std::string(op) + ": null " + what);
  for (int i = 0; i < kDims; ++i) out[i] = fill;
  for (int i = 0; i < p.spatial; ++i) out[kDims - p.spatial + i] = values[len == 1 ? 0 : i];
}

// A sliding window: kernel, stride, padding and dilation per spatial dim.
struct Window {
  int64_t kernel[kDims], stride[kDims], pad[kDims], dilation[kDims];
};

Window read_window(const Planes& p, const int64_t* kernel, int64_t kernel_len,
                   const int64_t* stride, int64_t stride_len, const int64_t* padding,
                   int64_t padding_len, const int64_t* dilation, int64_t dilation_len,
                   const char* op) {
  Window w{};
  read_list(kernel, kernel_len, p, 1, w.kernel, op, "kernel_size");
  // An empty stride means the kernel size (ATen's default).
  if (stride_len == 0) {
    std::copy(w.kernel, w.kernel + kDims, w.stride);
  } else {
    read_list(stride, stride_len, p, 1, w.stride, op, "stride");
  }
  read_list(padding, padding_len, p, 0, w.pad, op, "padding");
  if (dilation != nullptr) {
    read_list(dilation, dilation_len, p, 1, w.dilation, op, "dilation");
  } else {
    std::fill(w.dilation, w.dilation + kDims, 1);
  }
  for (int i = 0; i < kDims; ++i) {
    if (w.kernel[i] <= 0 || w.stride[i] <= 0 || w.dilation[i] <= 0) {
      throw ShimError(std::string(op) + ": kernel_size, stride and dilation must be positive");
    }
    if (w.pad[i] < 0 || 2 * w.pad[i] > w.kernel[i]) {
      throw ShimError(std::string(op) + ": padding must be at most half the kernel size");
    }
  }
  return w;
}

// ATen's pooling_output_shape.
int64_t pooled_size(int64_t input, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation,
                    bool ceil_mode) {
  const int64_t span = input + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  // The last window must start inside the input or its left padding.
  if (ceil_mode && (out - 1) * stride >= input + pad) --out;
  return out;
}

void window_output(const Planes& p, const Window& w, bool ceil_mode, int64_t out[kDims],
                   const char* op) {
  for (int i = 0; i < kDims; ++i) {
    out[i] = pooled_size(p.size[i], w.kernel[i], w.pad[i], w.stride[i], w.dilation[i], ceil_mode);
    if (out[i] <= 0) throw ShimError(std::string(op) + ": the output would be empty");
  }
}

// Calls `f(n, c, z, y, x)` for every output element of `out_size`.
template <typename F>
void for_each_output(const Planes& p, const int64_t out_size[kDims], F&& f) {
  for (int64_t n = 0; n < p.batch; ++n) {
    for (int64_t c = 0; c < p.channels; ++c) {
      for (int64_t z = 0; z < out_size[0]; ++z) {
        for (int64_t y = 0; y < out_size[1]; ++y) {
          for (int64_t x = 0; x < out_size[2]; ++x) f(n, c, z, y, x);
        }
      }
    }
  }
}

struct AvgOptions {
  bool count_include_pad;
  const int64_t* divisor_override;
};

template <typename T>
void avg_pool(const SlimTensor& in, const Planes& p, const SlimTensor& out, const Window& w,
              const AvgOptions& options) {
  using Acc = typename Scalar<T>::Compute;
  const T* src = static_cast<const T*>(in.data_ptr());
  T* dst = static_cast<T*>(out.data_ptr());
  const Offsets os = offsets_of(out, p);
  int64_t out_size[kDims];
  spatial_of(out, p, out_size);
  for_each_output(p, out_size, [&](int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) {
    const int64_t at[kDims] = {z, y, x};
    int64_t lo[kDims], hi[kDims];
    int64_t padded_count = 1, count = 1;
    for (int i = 0; i < kDims; ++i) {
      lo[i] = at[i] * w.stride[i] - w.pad[i];
      hi[i] = std::min(lo[i] + w.kernel[i], p.size[i] + w.pad[i]);
      padded_count *= hi[i] - lo[i];
      lo[i] = std::max<int64_t>(lo[i], 0);
      hi[i] = std::min(hi[i], p.size[i]);
      count *= std::max<int64_t>(hi[i] - lo[i], 0);
    }
    T* o = dst + os.of(n, c, z, y, x);
    if (count == 0) {
      Scalar<T>::store(o, Acc(0));
      return;
    }
    const T* plane = src + n * p.batch_stride + c * p.channel_stride;
    Acc sum = 0;
    for (int64_t i = lo[0]; i < hi[0]; ++i) {
      for (int64_t j = lo[1]; j < hi[1]; ++j) {
        for (int64_t k = lo[2]; k < hi[2]; ++k) {
          sum += static_cast<Acc>(
              Scalar<T>::load(plane + i * p.stride[0] + j * p.stride[1] + k * p.stride[2]));
        }
      }
    }
    const int64_t divisor = options.divisor_override != nullptr ? *options.divisor_override
                            : options.count_include_pad         ? padded_count
                                                                : count;
    Scalar<T>::store(o, sum / static_cast<Acc>(divisor));
  });
}

SlimTensor run_avg_pool(const SlimTensor& in, int spatial, const int64_t* kernel,
                        int64_t kernel_len, const int64_t* stride, int64_t stride_len,
                        const int64_t* padding, int64_t padding_len, bool ceil_mode,
                        bool count_include_pad, const int64_t* divisor_override) {
  const char* op = spatial == 2 ? "avg_pool2d" : "avg_pool3d";
  const Planes p = planes_of(in, spatial, op);
  const Window w =
      read_window(p, kernel, kernel_len, stride, stride_len, padding, padding_len, nullptr, 0, op);
  if (divisor_override != nullptr && *divisor_override == 0) {
    throw ShimError(std::string(op) + ": divisor must be non-zero");
  }
  int64_t out_size[kDims];
  window_output(p, w, ceil_mode, out_size, op);
  SlimTensor out =
      pooled_like(in, p, out_size, in.dtype(), keeps_channels_last(spatial, /*max_pooling=*/false));
  const AvgOptions options{count_include_pad, divisor_override};
  dispatch_floating(in.dtype(), op,
                    [&](auto tag) { avg_pool<decltype(tag)>(in, p, out, w, options); });
  return out;
}

// The running maximum of a window as ATen's CPU kernels keep it: NaN wins,
// and among NaNs the last; among equal values the first.
template <typename Acc>
struct RunningMax {
  Acc value;
  int64_t index;

  void see(Acc v, int64_t at) {
    if (v > value || std::isnan(v)) {
      value = v;
      index = at;
    }
  }
};

template <typename T>
void max_pool(const SlimTensor& in, const Planes& p, const SlimTensor& out,
              const SlimTensor& indices, const Window& w) {
  using Acc = typename Scalar<T>::Compute;
  const T* src = static_cast<const T*>(in.data_ptr());
  T* dst = static_cast<T*>(out.data_ptr());
  int64_t* idx = static_cast<int64_t*>(indices.data_ptr());
  const Offsets os = offsets_of(out, p), is = offsets_of(indices, p);
  int64_t out_size[kDims];
  spatial_of(out, p, out_size);
  for_each_output(p, out_size, [&](int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) {
    const int64_t at[kDims] = {z, y, x};
    int64_t lo[kDims], hi[kDims];
    for (int i = 0; i < kDims; ++i) {
      // The window's taps inside the input: lo, lo + dilation, ... below hi.
      lo[i] = at[i] * w.stride[i] - w.pad[i];
      hi[i] = std::min(lo[i] + (w.kernel[i] - 1) * w.dilation[i] + 1, p.size[i]);
      while (lo[i] < 0) lo[i] += w.dilation[i];
    }
    const T* plane = src + n * p.batch_stride + c * p.channel_stride;
    RunningMax<Acc> best{-std::numeric_limits<Acc>::infinity(),
                         (lo[0] * p.size[1] + lo[1]) * p.size[2] + lo[2]};
    for (int64_t i = lo[0]; i < hi[0]; i += w.dilation[0]) {
      for (int64_t j = lo[1]; j < hi[1]; j += w.dilation[1]) {
        for (int64_t k = lo[2]; k < hi[2]; k += w.dilation[2]) {
          best.see(static_cast<Acc>(Scalar<T>::load(plane + i * p.stride[0] + j * p.stride[1] +
                                                    k * p.stride[2])),
                   (i * p.size[1] + j) * p.size[2] + k);
        }
      }
    }
    Scalar<T>::store(dst + os.of(n, c, z, y, x), best.value);
    idx[is.of(n, c, z, y, x)] = best.index;
  });
}

// (values, int64 indices flat within each plane).
std::pair<SlimTensor, SlimTensor> run_max_pool(const SlimTensor& in, int spatial,
                                               const int64_t* kernel, int64_t kernel_len,
                                               const int64_t* stride, int64_t stride_len,
                                               const int64_t* padding, int64_t padding_len,
                                               const int64_t* dilation, int64_t dilation_len,
                                               bool ceil_mode) {
  const char* op = spatial == 2 ? "max_pool2d_with_indices" : "max_pool3d_with_indices";
  const Planes p = planes_of(in, spatial, op);
  const Window w = read_window(p, kernel, kernel_len, stride, stride_len, padding, padding_len,
                               dilation, dilation_len, op);
  int64_t out_size[kDims];
  window_output(p, w, ceil_mode, out_size, op);
  const bool keep = keeps_channels_last(spatial, /*max_pooling=*/true);
  SlimTensor out = pooled_like(in, p, out_size, in.dtype(), keep);
  SlimTensor indices = pooled_like(in, p, out_size, dtype::kInt64, keep);
  dispatch_floating(in.dtype(), op,
                    [&](auto tag) { max_pool<decltype(tag)>(in, p, out, indices, w); });
  return {std::move(out), std::move(indices)};
}

// ATen's adaptive window along one dim: [floor(o * I / O), ceil((o + 1) * I / O)).
int64_t adaptive_start(int64_t o, int64_t input, int64_t output) { return o * input / output; }
int64_t adaptive_end(int64_t o, int64_t input, int64_t output) {
  return ((o + 1) * input + output - 1) / output;
}

void adaptive_output(const Planes& p, const int64_t* output_size, int64_t output_size_len,
                     int64_t out[kDims], const char* op) {
  if (output_size_len != p.spatial || output_size == nullptr) {
    throw ShimError(std::string(op) + ": output_size needs " + std::to_string(p.spatial) +
                    " values");
  }
  for (int i = 0; i < kDims; ++i) out[i] = 1;
  for (int i = 0; i < p.spatial; ++i) {
    out[kDims - p.spatial + i] = output_size[i];
    if (output_size[i] <= 0) throw ShimError(std::string(op) + ": output_size must be positive");
  }
}

// Calls `f(n, c, z, y, x, lo, hi)` for every output element with its
// adaptive window [lo, hi) per spatial dim.
template <typename F>
void for_each_adaptive_window(const Planes& p, const int64_t out_size[kDims], F&& f) {
  for_each_output(p, out_size, [&](int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) {
    const int64_t at[kDims] = {z, y, x};
    int64_t lo[kDims], hi[kDims];
    for (int i = 0; i < kDims; ++i) {
      lo[i] = adaptive_start(at[i], p.size[i], out_size[i]);
      hi[i] = adaptive_end(at[i], p.size[i], out_size[i]);
    }
    f(n, c, z, y, x, lo, hi);
  });
}

template <typename T>
void adaptive_max(const SlimTensor& in, const Planes& p, const SlimTensor& out,
                  const SlimTensor& indices) {
  using Acc = typename Scalar<T>::Compute;
  const T* src = static_cast<const T*>(in.data_ptr());
  T* dst = static_cast<T*>(out.data_ptr());
  int64_t* idx = static_cast<int64_t*>(indices.data_ptr());
  const Offsets os = offsets_of(out, p), is = offsets_of(indices, p);
  int64_t out_size[kDims];
  spatial_of(out, p, out_size);
  for_each_adaptive_window(
      p, out_size,
      [&](int64_t n, int64_t c, int64_t z, int64_t y, int64_t x, const int64_t* lo,
          const int64_t* hi) {
        const T* plane = src + n * p.batch_stride + c * p.channel_stride;
        RunningMax<Acc> best{-std::numeric_limits<Acc>::infinity(),
                             (lo[0] * p.size[1] + lo[1]) * p.size[2] + lo[2]};
        for (int64_t i = lo[0]; i < hi[0]; ++i) {
          for (int64_t j = lo[1]; j < hi[1]; ++j) {
            for (int64_t k = lo[2]; k < hi[2]; ++k) {
              best.see(static_cast<Acc>(Scalar<T>::load(plane + i * p.stride[0] + j * p.stride[1] +
                                                        k * p.stride[2])),
                       (i * p.size[1] + j) * p.size[2] + k);
            }
          }
        }
        Scalar<T>::store(dst + os.of(n, c, z, y, x), best.value);
        idx[is.of(n, c, z, y, x)] = best.index;
      });
}

template <typename T>
void adaptive_avg(const SlimTensor& in, const Planes& p, const SlimTensor& out) {
  using Acc = typename Scalar<T>::Compute;
  const T* src = static_cast<const T*>(in.data_ptr());
  T* dst = static_cast<T*>(out.data_ptr());
  const Offsets os = offsets_of(out, p);
  int64_t out_size[kDims];
  spatial_of(out, p, out_size);
  for_each_adaptive_window(
      p, out_size,
      [&](int64_t n, int64_t c, int64_t z, int64_t y, int64_t x, const int64_t* lo,
          const int64_t* hi) {
        const T* plane = src + n * p.batch_stride + c * p.channel_stride;
        Acc sum = 0;
        for (int64_t i = lo[0]; i < hi[0]; ++i) {
          for (int64_t j = lo[1]; j < hi[1]; ++j) {
            for (int64_t k = lo[2]; k < hi[2]; ++k) {
              sum += static_cast<Acc>(
                  Scalar<T>::load(plane + i * p.stride[0] + j * p.stride[1] + k * p.stride[2]));
            }
          }
        }
        const int64_t count = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
        Scalar<T>::store(dst + os.of(n, c, z, y, x), sum / static_cast<Acc>(count));
      });
}

std::pair<SlimTensor, SlimTensor> run_adaptive_max_pool(const SlimTensor& in, int spatial,
                                                        const int64_t* output_size,
                                                        int64_t output_size_len) {
  const char* op = spatial == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d";
  const Planes p = planes_of(in, spatial, op);
  int64_t out_size[kDims];
  adaptive_output(p, output_size, output_size_len, out_size, op);
  // Adaptive max pooling keeps the format as average pooling does (ATen's
  // adaptive_max_pool3d writes contiguous output whatever the input).
  const bool keep = keeps_channels_last(spatial, /*max_pooling=*/false);
  SlimTensor out = pooled_like(in, p, out_size, in.dtype(), keep);
  SlimTensor indices = pooled_like(in, p, out_size, dtype::kInt64, keep);
  dispatch_floating(in.dtype(), op,
                    [&](auto tag) { adaptive_max<decltype(tag)>(in, p, out, indices); });
  return {std::move(out), std::move(indices)};
}

SlimTensor run_adaptive_avg_pool(const SlimTensor& in, int spatial, const int64_t* output_size,
                                 int64_t output_size_len) {
  const char* op = spatial == 2 ? "_adaptive_avg_pool2d" : "_adaptive_avg_pool3d";
  const Planes p = planes_of(in, spatial, op);
  int64_t out_size[kDims];
  adaptive_output(p, output_size, output_size_len, out_size, op);
  SlimTensor out =
      pooled_like(in, p, out_size, in.dtype(), keeps_channels_last(spatial, /*max_pooling=*/false));
  dispatch_floating(in.dtype(), op, [&](auto tag) { adaptive_avg<decltype(tag)>(in, p, out); });
  return out;
}

// The ABI's two results from a (values, indices) pair.
void hand_out(std::pair<SlimTensor, SlimTensor> pooled, AtenTensorHandle* ret0,
              AtenTensorHandle* ret1) {
  *ret0 = to_handle(std::move(pooled.first));
  *ret1 = to_handle(std::move(pooled.second));
}

}  // namespace
}  // namespace shimkit

using shimkit::as_tensor;
using shimkit::check_out;
using shimkit::to_handle;

extern "C" {

AOTITorchError aoti_torch_cpu_avg_pool2d(AtenTensorHandle self, const int64_t* kernel_size,
                                         int64_t kernel_size_len_, const int64_t* stride,
                                         int64_t stride_len_, const int64_t* padding,
                                         int64_t padding_len_, int32_t ceil_mode,
                                         int32_t count_include_pad, int64_t* divisor_override,
                                         AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    check_out(ret0);
    *ret0 = to_handle(shimkit::run_avg_pool(
        as_tensor(self), 2, kernel_size, kernel_size_len_, stride, stride_len_, padding,
        padding_len_, ceil_mode != 0, count_include_pad != 0, divisor_override));
  });
}

AOTITorchError aoti_torch_cpu_avg_pool3d(AtenTensorHandle self, const int64_t* kernel_size,
                                         int64_t kernel_size_len_, const int64_t* stride,
                                         int64_t stride_len_, const int64_t* padding,
                                         int64_t padding_len_, int32_t ceil_mode,
                                         int32_t count_include_pad, int64_t* divisor_override,
                                         AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    check_out(ret0);
    *ret0 = to_handle(shimkit::run_avg_pool(
        as_tensor(self), 3, kernel_size, kernel_size_len_, stride, stride_len_, padding,
        padding_len_, ceil_mode != 0, count_include_pad != 0, divisor_override));
  });
}

AOTITorchError aoti_torch_cpu_max_pool2d_with_indices(
    AtenTensorHandle self, const int64_t* kernel_size, int64_t kernel_size_len_,
    const int64_t* stride, int64_t stride_len_, const int64_t* padding, int64_t padding_len_,
    const int64_t* dilation, int64_t dilation_len_, int32_t ceil_mode, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1) {
  return SHIMKIT_GUARD({
    check_out(ret0);
    check_out(ret1);
    shimkit::hand_out(shimkit::run_max_pool(as_tensor(self), 2, kernel_size, kernel_size_len_,
                                            stride, stride_len_, padding, padding_len_, dilation,
                                            dilation_len_, ceil_mode != 0),
                      ret0, ret1);
  });
}

AOTITorchError aoti_torch_cpu_max_pool3d_with_indices(
    AtenTensorHandle self, const int64_t* kernel_size, int64_t kernel_size_len_,
    const int64_t* stride, int64_t stride_len_, const int64_t* padding, int64_t padding_len_,
    const int64_t* dilation, int64_t dilation_len_, int32_t ceil_mode, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1) {
  return SHIMKIT_GUARD({
    check_out(ret0);
    check_out(ret1);
    shimkit::hand_out(shimkit::run_max_pool(as_tensor(self), 3, kernel_size, kernel_size_len_,
                                            stride, stride_len_, padding, padding_len_, dilation,
                                            dilation_len_, ceil_mode != 0),
                      ret0, ret1);
  });
}

AOTITorchError aoti_torch_cpu_adaptive_max_pool2d(AtenTensorHandle self, const int64_t* output_size,
                                                  int64_t output_size_len_, AtenTensorHandle* ret0,
                                                  AtenTensorHandle* ret1) {
  return SHIMKIT_GUARD({
    check_out(ret0);
    check_out(ret1);
    shimkit::hand_out(
        shimkit::run_adaptive_max_pool(as_tensor(self), 2, output_size, output_size_len_), ret0,
        ret1);
  });
}

AOTITorchError aoti_torch_cpu_adaptive_max_pool3d(AtenTensorHandle self, const int64_t* output_size,
                                                  int64_t output_size_len_, AtenTensorHandle* ret0,
                                                  AtenTensorHandle* ret1) {
  return SHIMKIT_GUARD({
    check_out(ret0);
    check_out(ret1);
    shimkit::hand_out(
        shimkit::run_adaptive_max_pool(as_tensor(self), 3, output_size, output_size_len_), ret0,
        ret1);
  });
}

AOTITorchError aoti_torch_cpu__adaptive_avg_pool2d(AtenTensorHandle self,
                                                   const int64_t* output_size,
                                                   int64_t output_size_len_,
                                                   AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    check_out(ret0);
    *ret0 = to_handle(
        shimkit::run_adaptive_avg_pool(as_tensor(self), 2, output_size, output_size_len_));
  });
}

AOTITorchError aoti_torch_cpu__adaptive_avg_pool3d(AtenTensorHandle self,
                                                   const int64_t* output_size,
                                                   int64_t output_size_len_,
                                                   AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    check_out(ret0);
    *ret0 = to_handle(
        shimkit::run_adaptive_avg_pool(as_tensor(self), 3, output_size, output_size_len_));
  });
}

}  // extern "C"
