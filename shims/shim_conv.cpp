// Slim CPU convolution, plain and transposed: oneDNN (conv_onednn.cpp) where
// it has an implementation, else im2col + OpenBLAS GEMM (a direct scatter for
// transposed ones). The output memory format
// follows ATen's CPU rule: channels_last when the input or the weight is
// channels_last (4-D), contiguous otherwise. Blobs read the output with the
// strides they expect, so getting this wrong gives silently wrong numbers.
#include <cblas.h>

#include <algorithm>
#include <string>
#include <vector>

#include "shims/conv_geometry.h"
#include "shims/conv_onednn.h"
#include "shims/conv_transpose_geometry.h"
#include "shims/float_compute.h"
#include "shims/shim_internal.h"

namespace shimkit {
namespace {

SlimTensor contiguous_copy(const SlimTensor& t) {
  SlimTensor out = SlimTensor::empty(t.sizes().data(), nullptr, t.dim(), t.dtype(), t.device_type(),
                                     t.device_index());
  copy_elements(out, t);
  return out;
}

SlimTensor convolution(const SlimTensor& input_in, const SlimTensor& weight_in,
                       const SlimTensor* bias, const ConvParams& p, int64_t groups) {
  const ConvShape s = conv_shape(input_in, weight_in, p, groups);
  const SlimTensor input = lift_conv_1d(input_in);
  const SlimTensor weight = lift_conv_1d(weight_in);
  const int64_t n = s.n, h = s.h, w = s.w, oc = s.oc, cg = s.cg, kh = s.kh, kw = s.kw;
  const int64_t oh = s.oh, ow = s.ow;
  const bool channels_last = s.channels_last;
  const std::vector<int64_t>& out_strides = s.out_strides;
  SlimTensor out = SlimTensor::empty(s.out_sizes.data(), out_strides.data(), 4, dtype::kFloat32,
                                     device::kCPU, -1);
  const SlimTensor* live_bias = (bias != nullptr && bias->defined()) ? bias : nullptr;
  if (onednn_convolution(input, weight, live_bias, p, s, out)) return conv_output_view(out, s);
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
                    col.data(), static_cast<int>(l), 0.0f, odata + b * out_strides[0] + g * ocg * l,
                    static_cast<int>(l));
      }
    }
  }
  if (bias != nullptr && bias->defined()) {
    check_conv_bias(*bias, oc);
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
  return conv_output_view(out, s);
}

// A transposed convolution: oneDNN's deconvolution, else a direct scatter
// (every input element adds its weighted kernel window to the output; slow,
// for machines without oneDNN).
SlimTensor transposed_convolution(const SlimTensor& input_in, const SlimTensor& weight_in,
                                  const SlimTensor* bias, const ConvParams& p,
                                  const ConvTranspose& t, int64_t groups) {
  const ConvShape s = conv_transpose_shape(input_in, weight_in, p, t, groups);
  const SlimTensor input = lift_conv_1d(input_in);
  const SlimTensor weight = lift_conv_1d(weight_in);
  SlimTensor out = SlimTensor::empty(s.out_sizes.data(), s.out_strides.data(), 4, dtype::kFloat32,
                                     device::kCPU, -1);
  const SlimTensor* live_bias = (bias != nullptr && bias->defined()) ? bias : nullptr;
  if (live_bias != nullptr) check_conv_bias(*live_bias, s.oc);
  if (onednn_convolution(input, weight, live_bias, p, s, out, &t)) {
    return conv_output_view(out, s);
  }
  const auto &is = input.strides(), &ws = weight.strides(), &os = out.strides();
  const float* in = static_cast<const float*>(input.data_ptr());
  const float* w = static_cast<const float*>(weight.data_ptr());
  float* o = static_cast<float*>(out.data_ptr());
  const int64_t ocg = s.oc / groups;
  for (int64_t b = 0; b < s.n; ++b) {
    for (int64_t c = 0; c < s.oc; ++c) {
      const float init =
          live_bias != nullptr
              ? static_cast<const float*>(live_bias->data_ptr())[c * live_bias->strides()[0]]
              : 0.0f;
      for (int64_t y = 0; y < s.oh; ++y) {
        for (int64_t x = 0; x < s.ow; ++x) o[b * os[0] + c * os[1] + y * os[2] + x * os[3]] = init;
      }
    }
    for (int64_t ci = 0; ci < s.c; ++ci) {
      const int64_t g = ci / s.cg;
      for (int64_t iy = 0; iy < s.h; ++iy) {
        for (int64_t ix = 0; ix < s.w; ++ix) {
          const float v = in[b * is[0] + ci * is[1] + iy * is[2] + ix * is[3]];
          for (int64_t oc = 0; oc < ocg; ++oc) {
            float* plane = o + b * os[0] + (g * ocg + oc) * os[1];
            for (int64_t ky = 0; ky < s.kh; ++ky) {
              const int64_t y = iy * p.stride[0] - p.padding[0] + ky * p.dilation[0];
              if (y < 0 || y >= s.oh) continue;
              for (int64_t kx = 0; kx < s.kw; ++kx) {
                const int64_t x = ix * p.stride[1] - p.padding[1] + kx * p.dilation[1];
                if (x < 0 || x >= s.ow) continue;
                plane[y * os[2] + x * os[3]] +=
                    v * w[ci * ws[0] + oc * ws[1] + ky * ws[2] + kx * ws[3]];
              }
            }
          }
        }
      }
    }
  }
  return conv_output_view(out, s);
}

// A convolution of float32 tensors, transposed when `t` is given.
SlimTensor any_convolution(const SlimTensor& input, const SlimTensor& weight,
                           const SlimTensor* bias, const ConvParams& p, const ConvTranspose* t,
                           int64_t groups) {
  return t != nullptr ? transposed_convolution(input, weight, bias, p, *t, groups)
                      : convolution(input, weight, bias, p, groups);
}

}  // namespace
}  // namespace shimkit

extern "C" AOTITorchError aoti_torch_cpu_convolution(
    AtenTensorHandle input, AtenTensorHandle weight, AtenTensorHandle* bias, const int64_t* stride,
    int64_t stride_len_, const int64_t* padding, int64_t padding_len_, const int64_t* dilation,
    int64_t dilation_len_, int32_t transposed, const int64_t* output_padding,
    int64_t output_padding_len_, int64_t groups, AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    const shimkit::SlimTensor& in = shimkit::as_tensor(input);
    const int64_t spatial = in.dim() - 2;
    const shimkit::ConvParams p = shimkit::read_conv_params(spatial, stride, stride_len_, padding,
                                                            padding_len_, dilation, dilation_len_);
    shimkit::ConvTranspose transpose;
    if (transposed != 0) {
      shimkit::read_conv_pair(output_padding, output_padding_len_, spatial, 0,
                              transpose.output_padding, "output_padding");
    }
    const shimkit::ConvTranspose* t = transposed != 0 ? &transpose : nullptr;
    const shimkit::SlimTensor* b =
        (bias != nullptr && *bias != nullptr) ? &shimkit::as_tensor(*bias) : nullptr;
    const shimkit::SlimTensor& w = shimkit::as_tensor(weight);
    if (!shimkit::is_reduced_float(in.dtype())) {
      *ret0 = shimkit::to_handle(shimkit::any_convolution(in, w, b, p, t, groups));
      return;
    }
    // float16/bfloat16: a float32 convolution of exact copies, rounded once.
    if (w.dtype() != in.dtype() || (b != nullptr && b->defined() && b->dtype() != in.dtype())) {
      throw shimkit::ShimError("convolution operand dtypes differ");
    }
    const shimkit::SlimTensor b32 =
        (b != nullptr && b->defined()) ? shimkit::float32_copy(*b) : shimkit::SlimTensor();
    const shimkit::SlimTensor out32 =
        shimkit::any_convolution(shimkit::float32_copy(in), shimkit::float32_copy(w),
                                 b32.defined() ? &b32 : nullptr, p, t, groups);
    *ret0 = shimkit::to_handle(shimkit::converted(out32, in.dtype()));
  });
}
