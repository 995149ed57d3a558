// Slim CPU pooling fallbacks: avg_pool2d and adaptive_max_pool2d. Inductor
// generates its own loops for small windows and calls these for large ones
// (a global 7x7 average, AdaptiveMaxPool2d(1) over a 9x9 map). Semantics are
// ATen's CPU kernels': output sizes, ceil_mode, count_include_pad,
// divisor_override, NaN-propagating maxima with the index of the last NaN,
// indices flat within each plane, and the output in the input's suggested
// memory format (channels_last for a channels_last 4-D input). float16 and
// bfloat16 accumulate in float, round once.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "shims/scalar_types.h"
#include "shims/shim_internal.h"

namespace shimkit {
namespace {

// A pooling input as [planes = N*C, H, W] with each axis's stride, whatever
// its layout (3-D [C, H, W] or 4-D [N, C, H, W], contiguous or channels_last).
struct Planes {
  int64_t batch = 1, channels = 0, height = 0, width = 0;
  int64_t batch_stride = 0, channel_stride = 0, h_stride = 0, w_stride = 0;
  bool batched = false;
};

Planes planes_of(const SlimTensor& in, const char* op) {
  if (in.dim() != 3 && in.dim() != 4) {
    throw ShimError(std::string(op) + ": expected a 3-D or 4-D input, got " +
                    std::to_string(in.dim()) + "-D");
  }
  Planes p;
  p.batched = in.dim() == 4;
  const int64_t first = p.batched ? 1 : 0;
  if (p.batched) {
    p.batch = in.sizes()[0];
    p.batch_stride = in.strides()[0];
  }
  p.channels = in.sizes()[first];
  p.height = in.sizes()[first + 1];
  p.width = in.sizes()[first + 2];
  p.channel_stride = in.strides()[first];
  p.h_stride = in.strides()[first + 1];
  p.w_stride = in.strides()[first + 2];
  if (p.height <= 0 || p.width <= 0) {
    throw ShimError(std::string(op) + ": empty spatial dimensions");
  }
  return p;
}

// A new output shaped like `in` with spatial sizes (oh, ow), in the input's
// suggested memory format (ATen's meta functions).
SlimTensor pooled_like(const SlimTensor& in, const Planes& p, int64_t oh, int64_t ow,
                       int32_t dtype) {
  std::vector<int64_t> sizes;
  if (p.batched) sizes.push_back(p.batch);
  sizes.insert(sizes.end(), {p.channels, oh, ow});
  if (p.batched && in.is_channels_last()) {
    const std::vector<int64_t> strides = channels_last_strides(sizes);
    return SlimTensor::empty(sizes.data(), strides.data(), 4, dtype, in.device_type(),
                             in.device_index());
  }
  return SlimTensor::empty(sizes.data(), nullptr, static_cast<int64_t>(sizes.size()), dtype,
                           in.device_type(), in.device_index());
}

// The [batch, channel, y, x] element offset of a pooled tensor (its own strides).
struct OutStrides {
  int64_t batch = 0, channel = 0, y = 0, x = 0;
};

OutStrides out_strides(const SlimTensor& out, bool batched) {
  const int64_t first = batched ? 1 : 0;
  return {batched ? out.strides()[0] : 0, out.strides()[first], out.strides()[first + 1],
          out.strides()[first + 2]};
}

// One spatial size and its window parameter from an int list of 1 or 2 values.
int64_t pick(const int64_t* values, int64_t len, int64_t axis, const char* op, const char* what) {
  if (len != 1 && len != 2) {
    throw ShimError(std::string(op) + ": " + what + " must have 1 or 2 values");
  }
  return values[len == 1 ? 0 : axis];
}

// ATen's pooling_output_shape (dilation 1).
int64_t pooled_size(int64_t input, int64_t kernel, int64_t pad, int64_t stride, bool ceil_mode) {
  const int64_t span = input + 2 * pad - (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (span >= 0 ? span / stride : -((-span + stride - 1) / stride)) + 1;
  // The last window must start inside the input or its left padding.
  if (ceil_mode && (out - 1) * stride >= input + pad) --out;
  return out;
}

struct AvgWindow {
  int64_t kh, kw, sh, sw, ph, pw;
  bool count_include_pad;
  const int64_t* divisor_override;
};

template <typename T>
void avg_pool(const SlimTensor& in, const Planes& p, const SlimTensor& out, const AvgWindow& w) {
  using Acc = typename Scalar<T>::Compute;
  const T* src = static_cast<const T*>(in.data_ptr());
  T* dst = static_cast<T*>(out.data_ptr());
  const OutStrides os = out_strides(out, p.batched);
  const int64_t oh = out.sizes()[out.dim() - 2], ow = out.sizes()[out.dim() - 1];
  for (int64_t n = 0; n < p.batch; ++n) {
    for (int64_t c = 0; c < p.channels; ++c) {
      const T* plane = src + n * p.batch_stride + c * p.channel_stride;
      T* out_plane = dst + n * os.batch + c * os.channel;
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t x = 0; x < ow; ++x) {
          int64_t h0 = y * w.sh - w.ph, w0 = x * w.sw - w.pw;
          int64_t h1 = std::min(h0 + w.kh, p.height + w.ph);
          int64_t w1 = std::min(w0 + w.kw, p.width + w.pw);
          const int64_t padded_count = (h1 - h0) * (w1 - w0);
          h0 = std::max<int64_t>(h0, 0);
          w0 = std::max<int64_t>(w0, 0);
          h1 = std::min(h1, p.height);
          w1 = std::min(w1, p.width);
          T* o = out_plane + y * os.y + x * os.x;
          if (h0 >= h1 || w0 >= w1) {
            Scalar<T>::store(o, Acc(0));
            continue;
          }
          Acc sum = 0;
          for (int64_t i = h0; i < h1; ++i) {
            for (int64_t j = w0; j < w1; ++j) {
              sum += static_cast<Acc>(Scalar<T>::load(plane + i * p.h_stride + j * p.w_stride));
            }
          }
          const int64_t divisor = w.divisor_override != nullptr ? *w.divisor_override
                                  : w.count_include_pad         ? padded_count
                                                                : (h1 - h0) * (w1 - w0);
          Scalar<T>::store(o, sum / static_cast<Acc>(divisor));
        }
      }
    }
  }
}

SlimTensor run_avg_pool2d(const SlimTensor& in, const int64_t* kernel, int64_t kernel_len,
                          const int64_t* stride, int64_t stride_len, const int64_t* padding,
                          int64_t padding_len, bool ceil_mode, bool count_include_pad,
                          const int64_t* divisor_override) {
  const char* op = "avg_pool2d";
  const Planes p = planes_of(in, op);
  AvgWindow w{};
  w.kh = pick(kernel, kernel_len, 0, op, "kernel_size");
  w.kw = pick(kernel, kernel_len, 1, op, "kernel_size");
  // An empty stride means the kernel size (ATen's default).
  w.sh = stride_len == 0 ? w.kh : pick(stride, stride_len, 0, op, "stride");
  w.sw = stride_len == 0 ? w.kw : pick(stride, stride_len, 1, op, "stride");
  w.ph = pick(padding, padding_len, 0, op, "padding");
  w.pw = pick(padding, padding_len, 1, op, "padding");
  w.count_include_pad = count_include_pad;
  w.divisor_override = divisor_override;
  if (w.kh <= 0 || w.kw <= 0 || w.sh <= 0 || w.sw <= 0) {
    throw ShimError("avg_pool2d: kernel_size and stride must be positive");
  }
  if (w.ph < 0 || w.pw < 0 || 2 * w.ph > w.kh || 2 * w.pw > w.kw) {
    throw ShimError("avg_pool2d: padding must be at most half the kernel size");
  }
  if (divisor_override != nullptr && *divisor_override == 0) {
    throw ShimError("avg_pool2d: divisor must be non-zero");
  }
  const int64_t oh = pooled_size(p.height, w.kh, w.ph, w.sh, ceil_mode);
  const int64_t ow = pooled_size(p.width, w.kw, w.pw, w.sw, ceil_mode);
  if (oh <= 0 || ow <= 0) throw ShimError("avg_pool2d: the output would be empty");
  SlimTensor out = pooled_like(in, p, oh, ow, in.dtype());
  dispatch_floating(in.dtype(), op, [&](auto tag) { avg_pool<decltype(tag)>(in, p, out, w); });
  return out;
}

template <typename T>
void adaptive_max(const SlimTensor& in, const Planes& p, const SlimTensor& out,
                  const SlimTensor& indices) {
  using Acc = typename Scalar<T>::Compute;
  const T* src = static_cast<const T*>(in.data_ptr());
  T* dst = static_cast<T*>(out.data_ptr());
  int64_t* idx = static_cast<int64_t*>(indices.data_ptr());
  const OutStrides os = out_strides(out, p.batched);
  const OutStrides is = out_strides(indices, p.batched);
  const int64_t oh = out.sizes()[out.dim() - 2], ow = out.sizes()[out.dim() - 1];
  for (int64_t n = 0; n < p.batch; ++n) {
    for (int64_t c = 0; c < p.channels; ++c) {
      const T* plane = src + n * p.batch_stride + c * p.channel_stride;
      for (int64_t y = 0; y < oh; ++y) {
        // ATen's adaptive windows: [floor(y*H/oh), ceil((y+1)*H/oh)).
        const int64_t h0 = y * p.height / oh, h1 = ((y + 1) * p.height + oh - 1) / oh;
        for (int64_t x = 0; x < ow; ++x) {
          const int64_t w0 = x * p.width / ow, w1 = ((x + 1) * p.width + ow - 1) / ow;
          Acc best = static_cast<Acc>(Scalar<T>::load(plane + h0 * p.h_stride + w0 * p.w_stride));
          int64_t best_at = h0 * p.width + w0;
          for (int64_t i = h0; i < h1; ++i) {
            for (int64_t j = w0; j < w1; ++j) {
              const Acc v =
                  static_cast<Acc>(Scalar<T>::load(plane + i * p.h_stride + j * p.w_stride));
              if (v > best || std::isnan(v)) {
                best = v;
                best_at = i * p.width + j;
              }
            }
          }
          Scalar<T>::store(dst + n * os.batch + c * os.channel + y * os.y + x * os.x, best);
          idx[n * is.batch + c * is.channel + y * is.y + x * is.x] = best_at;
        }
      }
    }
  }
}

// (values, int64 indices flat within each plane).
std::pair<SlimTensor, SlimTensor> run_adaptive_max_pool2d(const SlimTensor& in,
                                                          const int64_t* output_size,
                                                          int64_t output_size_len) {
  const char* op = "adaptive_max_pool2d";
  const Planes p = planes_of(in, op);
  if (output_size_len != 2) throw ShimError("adaptive_max_pool2d: output_size needs 2 values");
  const int64_t oh = output_size[0];
  const int64_t ow = output_size[1];
  if (oh <= 0 || ow <= 0) throw ShimError("adaptive_max_pool2d: output_size must be positive");
  SlimTensor out = pooled_like(in, p, oh, ow, in.dtype());
  SlimTensor indices = pooled_like(in, p, oh, ow, dtype::kInt64);
  dispatch_floating(in.dtype(), op,
                    [&](auto tag) { adaptive_max<decltype(tag)>(in, p, out, indices); });
  return {std::move(out), std::move(indices)};
}

}  // namespace
}  // namespace shimkit

using shimkit::as_tensor;

extern "C" {

AOTITorchError aoti_torch_cpu_avg_pool2d(AtenTensorHandle self, const int64_t* kernel_size,
                                         int64_t kernel_size_len_, const int64_t* stride,
                                         int64_t stride_len_, const int64_t* padding,
                                         int64_t padding_len_, int32_t ceil_mode,
                                         int32_t count_include_pad, int64_t* divisor_override,
                                         AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    *ret0 = shimkit::to_handle(shimkit::run_avg_pool2d(
        as_tensor(self), kernel_size, kernel_size_len_, stride, stride_len_, padding, padding_len_,
        ceil_mode != 0, count_include_pad != 0, divisor_override));
  });
}

AOTITorchError aoti_torch_cpu_adaptive_max_pool2d(AtenTensorHandle self, const int64_t* output_size,
                                                  int64_t output_size_len_, AtenTensorHandle* ret0,
                                                  AtenTensorHandle* ret1) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    shimkit::check_out(ret1);
    auto pooled = shimkit::run_adaptive_max_pool2d(as_tensor(self), output_size, output_size_len_);
    *ret0 = shimkit::to_handle(std::move(pooled.first));
    *ret1 = shimkit::to_handle(std::move(pooled.second));
  });
}

}  // extern "C"
