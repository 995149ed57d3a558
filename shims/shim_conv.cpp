// Slim CPU convolution: im2col + OpenBLAS GEMM. The output memory format
// follows ATen's CPU rule: channels_last when the input or the weight is
// channels_last (4-D), contiguous otherwise. Blobs read the output with the
// strides they expect, so getting this wrong gives silently wrong numbers.
#include <cblas.h>

#include <algorithm>
#include <string>
#include <vector>

#include "shims/shim_internal.h"

namespace shimkit {
namespace {

struct ConvParams {
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
};

void read_pair(const int64_t* values, int64_t len, int64_t spatial, int64_t fill,
               int64_t out[2], const char* what) {
  if (len != 1 && len != spatial) {
    throw ShimError(std::string(what) + " has " + std::to_string(len) + " values for " +
                    std::to_string(spatial) + " spatial dims");
  }
  if (len > 0 && values == nullptr) throw ShimError(std::string("null ") + what);
  out[0] = out[1] = fill;
  for (int64_t i = 0; i < spatial; ++i) out[2 - spatial + i] = values[len == 1 ? 0 : i];
}

SlimTensor contiguous_copy(const SlimTensor& t) {
  SlimTensor out = SlimTensor::empty(t.sizes().data(), nullptr, t.dim(), t.dtype(),
                                     t.device_type(), t.device_index());
  copy_elements(out, t);
  return out;
}

SlimTensor convolution(const SlimTensor& input_in, const SlimTensor& weight_in,
                       const SlimTensor* bias, const ConvParams& p, int64_t groups) {
  if (input_in.dtype() != dtype::kFloat32 || weight_in.dtype() != dtype::kFloat32) {
    throw ShimError("convolution supports float32 only");
  }
  const bool is_1d = input_in.dim() == 3;
  if (!(input_in.dim() == 4 || is_1d) || weight_in.dim() != input_in.dim()) {
    throw ShimError("convolution needs 3-D or 4-D input and weight");
  }
  // Lift 1-D convolution to 2-D with H = 1.
  auto lift = [&](const SlimTensor& t) {
    if (!is_1d) return t;
    const int64_t sz[4] = {t.sizes()[0], t.sizes()[1], 1, t.sizes()[2]};
    const int64_t st[4] = {t.strides()[0], t.strides()[1], t.sizes()[2] * t.strides()[2],
                           t.strides()[2]};
    return t.view(sz, st, 4, t.storage_offset());
  };
  const SlimTensor input = lift(input_in);
  const SlimTensor weight = lift(weight_in);
  const int64_t n = input.sizes()[0], c = input.sizes()[1], h = input.sizes()[2],
                w = input.sizes()[3];
  const int64_t oc = weight.sizes()[0], cg = weight.sizes()[1], kh = weight.sizes()[2],
                kw = weight.sizes()[3];
  if (groups <= 0 || c != cg * groups || oc % groups != 0) {
    throw ShimError("convolution channels do not match groups");
  }
  for (int i = 0; i < 2; ++i) {
    if (p.stride[i] <= 0 || p.dilation[i] <= 0 || p.padding[i] < 0) {
      throw ShimError("convolution stride/dilation must be positive, padding non-negative");
    }
  }
  const int64_t oh = (h + 2 * p.padding[0] - p.dilation[0] * (kh - 1) - 1) / p.stride[0] + 1;
  const int64_t ow = (w + 2 * p.padding[1] - p.dilation[1] * (kw - 1) - 1) / p.stride[1] + 1;
  if (oh <= 0 || ow <= 0) throw ShimError("convolution output would be empty");
  const bool channels_last = !is_1d && (input.is_channels_last() || weight.is_channels_last());
  const std::vector<int64_t> out_sizes = {n, oc, oh, ow};
  const std::vector<int64_t> out_strides = channels_last
                                               ? channels_last_strides(out_sizes)
                                               : contiguous_strides(out_sizes);
  SlimTensor out = SlimTensor::empty(out_sizes.data(), out_strides.data(), 4, dtype::kFloat32,
                                     device::kCPU, -1);
  const SlimTensor wc = weight.is_contiguous() ? weight : contiguous_copy(weight);
  const float* wdata = static_cast<const float*>(wc.data_ptr());
  const float* idata = static_cast<const float*>(input.data_ptr());
  float* odata = static_cast<float*>(out.data_ptr());
  const int64_t ocg = oc / groups;
  const int64_t k = cg * kh * kw;
  const int64_t l = oh * ow;
  const auto& is = input.strides();
  std::vector<float> col(static_cast<size_t>(k * l));
  blas_threads_for(2.0 * static_cast<double>(ocg) * static_cast<double>(k) *
                   static_cast<double>(l));
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < groups; ++g) {
      // col[(ci, ki, kj), (y, x)] = input[b, g*cg + ci, y*s - p + ki*d, x*s - p + kj*d]
      for (int64_t ci = 0; ci < cg; ++ci) {
        const float* plane = idata + b * is[0] + (g * cg + ci) * is[1];
        for (int64_t ki = 0; ki < kh; ++ki) {
          for (int64_t kj = 0; kj < kw; ++kj) {
            float* row = col.data() + ((ci * kh + ki) * kw + kj) * l;
            for (int64_t y = 0; y < oh; ++y) {
              const int64_t iy = y * p.stride[0] - p.padding[0] + ki * p.dilation[0];
              for (int64_t x = 0; x < ow; ++x) {
                const int64_t ix = x * p.stride[1] - p.padding[1] + kj * p.dilation[1];
                row[y * ow + x] = (iy >= 0 && iy < h && ix >= 0 && ix < w)
                                      ? plane[iy * is[2] + ix * is[3]]
                                      : 0.0f;
              }
            }
          }
        }
      }
      const float* wg = wdata + g * ocg * k;
      if (channels_last) {
        // out[b] is [L, OC] (ld OC): out_g^T = col^T @ W_g^T
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, static_cast<int>(l),
                    static_cast<int>(ocg), static_cast<int>(k), 1.0f, col.data(),
                    static_cast<int>(l), wg, static_cast<int>(k), 0.0f,
                    odata + b * out_strides[0] + g * ocg, static_cast<int>(oc));
      } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(ocg),
                    static_cast<int>(l), static_cast<int>(k), 1.0f, wg, static_cast<int>(k),
                    col.data(), static_cast<int>(l), 0.0f,
                    odata + b * out_strides[0] + g * ocg * l, static_cast<int>(l));
      }
    }
  }
  if (bias != nullptr && bias->defined()) {
    if (bias->dim() != 1 || bias->sizes()[0] != oc || bias->dtype() != dtype::kFloat32) {
      throw ShimError("convolution bias must be float32 [out_channels]");
    }
    const float* bd = static_cast<const float*>(bias->data_ptr());
    const int64_t bs = bias->strides()[0];
    for (int64_t b = 0; b < n; ++b) {
      for (int64_t o = 0; o < oc; ++o) {
        float* base = odata + b * out_strides[0] + o * out_strides[1];
        for (int64_t i = 0; i < l; ++i) {
          base[(i / ow) * out_strides[2] + (i % ow) * out_strides[3]] += bd[o * bs];
        }
      }
    }
  }
  if (is_1d) {
    const int64_t sz[3] = {n, oc, ow};
    const int64_t st[3] = {out_strides[0], out_strides[1], out_strides[3]};
    return out.view(sz, st, 3, 0);
  }
  return out;
}

}  // namespace
}  // namespace shimkit

extern "C" AOTITorchError aoti_torch_cpu_convolution(
    AtenTensorHandle input, AtenTensorHandle weight, AtenTensorHandle* bias, const int64_t* stride,
    int64_t stride_len_, const int64_t* padding, int64_t padding_len_, const int64_t* dilation,
    int64_t dilation_len_, int32_t transposed, const int64_t* output_padding,
    int64_t output_padding_len_, int64_t groups, AtenTensorHandle* ret0) {
  (void)output_padding;
  (void)output_padding_len_;
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    if (transposed != 0) throw shimkit::ShimError("transposed convolution is not supported");
    const shimkit::SlimTensor& in = shimkit::as_tensor(input);
    const int64_t spatial = in.dim() - 2;
    shimkit::ConvParams p;
    shimkit::read_pair(stride, stride_len_, spatial, 1, p.stride, "stride");
    shimkit::read_pair(padding, padding_len_, spatial, 0, p.padding, "padding");
    shimkit::read_pair(dilation, dilation_len_, spatial, 1, p.dilation, "dilation");
    const shimkit::SlimTensor* b =
        (bias != nullptr && *bias != nullptr) ? &shimkit::as_tensor(*bias) : nullptr;
    *ret0 = shimkit::to_handle(
        shimkit::convolution(in, shimkit::as_tensor(weight), b, p, groups));
  });
}
