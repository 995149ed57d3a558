// Slim CPU convolution, plain and transposed: oneDNN (conv_onednn.cpp) where
// it has an implementation, else im2col + OpenBLAS GEMM (a direct scatter for
// transposed ones); 1-D, 2-D and 3-D. The output memory format follows ATen's
// CPU rule: channels_last (channels_last_3d) when the input or the weight is,
// contiguous otherwise. Blobs read the output with the
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

// Spatial strides of a lifted tensor, depth first (0 for the depth of 4-D
// ones, whose depth is 1).
void spatial_strides(const SlimTensor& t, int64_t out[kConvDims]) {
  out[0] = t.dim() == 5 ? t.strides()[2] : 0;
  out[1] = t.strides()[t.dim() - 2];
  out[2] = t.strides()[t.dim() - 1];
}

SlimTensor convolution(const SlimTensor& input_in, const SlimTensor& weight_in,
                       const SlimTensor* bias, const ConvParams& p, int64_t groups) {
  const ConvShape s = conv_shape(input_in, weight_in, p, groups);
  const SlimTensor input = lift_conv_1d(input_in);
  const SlimTensor weight = lift_conv_1d(weight_in);
  const int64_t rank = s.spatial + 2;
  SlimTensor out = SlimTensor::empty(s.out_sizes.data(), s.out_strides.data(), rank,
                                     dtype::kFloat32, device::kCPU, -1);
  const SlimTensor* live_bias = (bias != nullptr && bias->defined()) ? bias : nullptr;
  if (onednn_convolution(input, weight, live_bias, p, s, out)) return conv_output_view(out, s);
  // im2col + GEMM, with depth 1 for 2-D convolutions.
  const SlimTensor wc = weight.is_contiguous() ? weight : contiguous_copy(weight);
  const float* wdata = static_cast<const float*>(wc.data_ptr());
  const float* idata = static_cast<const float*>(input.data_ptr());
  float* odata = static_cast<float*>(out.data_ptr());
  const int64_t oc = s.oc, cg = s.cg, ocg = oc / groups;
  const int64_t *in = s.in, *kernel = s.kernel, *os = s.out;
  const int64_t window = kernel[0] * kernel[1] * kernel[2];
  const int64_t k = cg * window;
  const int64_t l = os[0] * os[1] * os[2];
  int64_t is[kConvDims];
  spatial_strides(input, is);
  std::vector<float> col(static_cast<size_t>(k * l));
  blas_threads_for(2.0 * static_cast<double>(ocg) * static_cast<double>(k) *
                   static_cast<double>(l));
  // The input coordinate of output position `o` at kernel offset `ki` along spatial dim `d`.
  auto source = [&](int d, int64_t o, int64_t ki) {
    return o * p.stride[d] - p.padding[d] + ki * p.dilation[d];
  };
  for (int64_t b = 0; b < s.n; ++b) {
    for (int64_t g = 0; g < groups; ++g) {
      // col[(ci, kz, ky, kx), (z, y, x)] = input[b, g*cg + ci, source(z, kz), source(y, ky), ...]
      for (int64_t ci = 0; ci < cg; ++ci) {
        const float* plane = idata + b * input.strides()[0] + (g * cg + ci) * input.strides()[1];
        for (int64_t kz = 0; kz < kernel[0]; ++kz) {
          for (int64_t ky = 0; ky < kernel[1]; ++ky) {
            for (int64_t kx = 0; kx < kernel[2]; ++kx) {
              float* row = col.data() + (ci * window + (kz * kernel[1] + ky) * kernel[2] + kx) * l;
              for (int64_t z = 0; z < os[0]; ++z) {
                const int64_t iz = source(0, z, kz);
                for (int64_t y = 0; y < os[1]; ++y) {
                  const int64_t iy = source(1, y, ky);
                  const bool inside = iz >= 0 && iz < in[0] && iy >= 0 && iy < in[1];
                  float* dst = row + (z * os[1] + y) * os[2];
                  for (int64_t x = 0; x < os[2]; ++x) {
                    const int64_t ix = source(2, x, kx);
                    dst[x] = (inside && ix >= 0 && ix < in[2])
                                 ? plane[iz * is[0] + iy * is[1] + ix * is[2]]
                                 : 0.0f;
                  }
                }
              }
            }
          }
        }
      }
      const float* wg = wdata + g * ocg * k;
      if (s.channels_last) {
        // out[b] is [L, OC] (ld OC): out_g^T = col^T @ W_g^T
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, static_cast<int>(l),
                    static_cast<int>(ocg), static_cast<int>(k), 1.0f, col.data(),
                    static_cast<int>(l), wg, static_cast<int>(k), 0.0f,
                    odata + b * s.out_strides[0] + g * ocg, static_cast<int>(oc));
      } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(ocg),
                    static_cast<int>(l), static_cast<int>(k), 1.0f, wg, static_cast<int>(k),
                    col.data(), static_cast<int>(l), 0.0f,
                    odata + b * s.out_strides[0] + g * ocg * l, static_cast<int>(l));
      }
    }
  }
  if (live_bias != nullptr) {
    check_conv_bias(*live_bias, oc);
    const float* bd = static_cast<const float*>(live_bias->data_ptr());
    const int64_t bs = live_bias->strides()[0];
    int64_t ost[kConvDims];
    spatial_strides(out, ost);
    for (int64_t b = 0; b < s.n; ++b) {
      for (int64_t o = 0; o < oc; ++o) {
        float* base = odata + b * s.out_strides[0] + o * s.out_strides[1];
        for (int64_t i = 0; i < l; ++i) {
          const int64_t z = i / (os[1] * os[2]), y = i / os[2] % os[1], x = i % os[2];
          base[z * ost[0] + y * ost[1] + x * ost[2]] += bd[o * bs];
        }
      }
    }
  }
  return conv_output_view(out, s);
}

// A transposed convolution: oneDNN's deconvolution, else a direct scatter
// (every input element adds its weighted kernel window to the output; slow,
// for machines without oneDNN), with depth 1 for 2-D convolutions.
SlimTensor transposed_convolution(const SlimTensor& input_in, const SlimTensor& weight_in,
                                  const SlimTensor* bias, const ConvParams& p,
                                  const ConvTranspose& t, int64_t groups) {
  const ConvShape s = conv_transpose_shape(input_in, weight_in, p, t, groups);
  const SlimTensor input = lift_conv_1d(input_in);
  const SlimTensor weight = lift_conv_1d(weight_in);
  SlimTensor out = SlimTensor::empty(s.out_sizes.data(), s.out_strides.data(), s.spatial + 2,
                                     dtype::kFloat32, device::kCPU, -1);
  const SlimTensor* live_bias = (bias != nullptr && bias->defined()) ? bias : nullptr;
  if (live_bias != nullptr) check_conv_bias(*live_bias, s.oc);
  if (onednn_convolution(input, weight, live_bias, p, s, out, &t)) {
    return conv_output_view(out, s);
  }
  int64_t is[kConvDims], ws[kConvDims], os[kConvDims];
  spatial_strides(input, is);
  spatial_strides(weight, ws);
  spatial_strides(out, os);
  const float* in = static_cast<const float*>(input.data_ptr());
  const float* w = static_cast<const float*>(weight.data_ptr());
  float* o = static_cast<float*>(out.data_ptr());
  const int64_t ocg = s.oc / groups;
  const int64_t *isz = s.in, *ksz = s.kernel, *osz = s.out;
  const int64_t ob = out.strides()[0], oc_stride = out.strides()[1];
  for (int64_t b = 0; b < s.n; ++b) {
    for (int64_t c = 0; c < s.oc; ++c) {
      const float init =
          live_bias != nullptr
              ? static_cast<const float*>(live_bias->data_ptr())[c * live_bias->strides()[0]]
              : 0.0f;
      for (int64_t z = 0; z < osz[0]; ++z) {
        for (int64_t y = 0; y < osz[1]; ++y) {
          for (int64_t x = 0; x < osz[2]; ++x) {
            o[b * ob + c * oc_stride + z * os[0] + y * os[1] + x * os[2]] = init;
          }
        }
      }
    }
    // The output coordinate input position `i` reaches at kernel offset `k` along dim `d`.
    auto target = [&](int d, int64_t i, int64_t k) {
      return i * p.stride[d] - p.padding[d] + k * p.dilation[d];
    };
    for (int64_t ci = 0; ci < s.c; ++ci) {
      const int64_t g = ci / s.cg;
      for (int64_t iz = 0; iz < isz[0]; ++iz) {
        for (int64_t iy = 0; iy < isz[1]; ++iy) {
          for (int64_t ix = 0; ix < isz[2]; ++ix) {
            const float v = in[b * input.strides()[0] + ci * input.strides()[1] + iz * is[0] +
                               iy * is[1] + ix * is[2]];
            for (int64_t oc = 0; oc < ocg; ++oc) {
              float* plane = o + b * ob + (g * ocg + oc) * oc_stride;
              const float* kern = w + ci * weight.strides()[0] + oc * weight.strides()[1];
              for (int64_t kz = 0; kz < ksz[0]; ++kz) {
                const int64_t z = target(0, iz, kz);
                if (z < 0 || z >= osz[0]) continue;
                for (int64_t ky = 0; ky < ksz[1]; ++ky) {
                  const int64_t y = target(1, iy, ky);
                  if (y < 0 || y >= osz[1]) continue;
                  for (int64_t kx = 0; kx < ksz[2]; ++kx) {
                    const int64_t x = target(2, ix, kx);
                    if (x < 0 || x >= osz[2]) continue;
                    plane[z * os[0] + y * os[1] + x * os[2]] +=
                        v * kern[kz * ws[0] + ky * ws[1] + kx * ws[2]];
                  }
                }
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
    const shimkit::ConvArguments args = shimkit::read_conv_arguments(
        in.dim() - 2, stride, stride_len_, padding, padding_len_, dilation, dilation_len_,
        transposed, output_padding, output_padding_len_);
    const shimkit::ConvParams& p = args.params;
    const shimkit::ConvTranspose* t = args.transposed_by();
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
