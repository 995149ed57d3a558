// Convolution geometry shared by the CPU convolution (shim_conv.cpp) and the
// cuDNN one (cuda/cudnn_conv.cpp): argument checks, the output shape, and
// the output memory format. Both must agree with ATen, and with each other,
// because a blob reads the result with the strides it expects.
#ifndef SHIMKIT_SHIMS_CONV_GEOMETRY_H_
#define SHIMKIT_SHIMS_CONV_GEOMETRY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "shims/shim_internal.h"
#include "shims/slim_tensor.h"

namespace shimkit {

// Spatial parameters of a 2-D convolution (1-D ones are lifted to H = 1).
struct ConvParams {
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
};

// One parameter list as the shim ABI passes it: one value for every spatial
// dim, or one value for all of them.
inline void read_conv_pair(const int64_t* values, int64_t len, int64_t spatial, int64_t fill,
                           int64_t out[2], const char* what) {
  if (len != 1 && len != spatial) {
    throw ShimError(std::string(what) + " has " + std::to_string(len) + " values for " +
                    std::to_string(spatial) + " spatial dims");
  }
  if (len > 0 && values == nullptr) throw ShimError(std::string("null ") + what);
  out[0] = out[1] = fill;
  for (int64_t i = 0; i < spatial; ++i) out[2 - spatial + i] = values[len == 1 ? 0 : i];
}

inline ConvParams read_conv_params(int64_t spatial, const int64_t* stride, int64_t stride_len,
                                   const int64_t* padding, int64_t padding_len,
                                   const int64_t* dilation, int64_t dilation_len) {
  ConvParams p;
  read_conv_pair(stride, stride_len, spatial, 1, p.stride, "stride");
  read_conv_pair(padding, padding_len, spatial, 0, p.padding, "padding");
  read_conv_pair(dilation, dilation_len, spatial, 1, p.dilation, "dilation");
  return p;
}

// A 3-D [N, C, W] tensor as the 4-D view [N, C, 1, W]; 4-D tensors unchanged.
inline SlimTensor lift_conv_1d(const SlimTensor& t) {
  if (t.dim() != 3) return t;
  const int64_t sz[4] = {t.sizes()[0], t.sizes()[1], 1, t.sizes()[2]};
  const int64_t st[4] = {t.strides()[0], t.strides()[1], t.sizes()[2] * t.strides()[2],
                         t.strides()[2]};
  return t.view(sz, st, 4, t.storage_offset());
}

// Sizes of a checked convolution, on the lifted (4-D) tensors.
struct ConvShape {
  bool is_1d = false;
  int64_t n = 0, c = 0, h = 0, w = 0;      // input
  int64_t oc = 0, cg = 0, kh = 0, kw = 0;  // weight: [OC, C / groups, KH, KW]
  int64_t oh = 0, ow = 0;                  // output spatial size
  int64_t groups = 1;
  // ATen's rule (CPU and cuDNN alike): a 4-D output is channels_last when the
  // input or the weight is channels_last.
  bool channels_last = false;
  std::vector<int64_t> out_sizes;    // 4-D
  std::vector<int64_t> out_strides;  // 4-D, dense in the chosen format
};

// `half_floats`: float16 and bfloat16 are accepted too (cuDNN computes them
// in float32); input and weight must then share the dtype.
inline ConvShape conv_shape(const SlimTensor& input_in, const SlimTensor& weight_in,
                            const ConvParams& p, int64_t groups, bool half_floats = false) {
  const int32_t dt = input_in.dtype();
  const bool supported =
      dt == dtype::kFloat32 || (half_floats && (dt == dtype::kFloat16 || dt == dtype::kBFloat16));
  if (!supported || weight_in.dtype() != dt) {
    throw ShimError(half_floats ? "convolution supports float32, float16 and bfloat16 (input and "
                                  "weight of one dtype)"
                                : "convolution supports float32 only");
  }
  ConvShape s;
  s.is_1d = input_in.dim() == 3;
  if (!(input_in.dim() == 4 || s.is_1d) || weight_in.dim() != input_in.dim()) {
    throw ShimError("convolution needs 3-D or 4-D input and weight");
  }
  const SlimTensor input = lift_conv_1d(input_in);
  const SlimTensor weight = lift_conv_1d(weight_in);
  s.n = input.sizes()[0], s.c = input.sizes()[1], s.h = input.sizes()[2], s.w = input.sizes()[3];
  s.oc = weight.sizes()[0], s.cg = weight.sizes()[1], s.kh = weight.sizes()[2];
  s.kw = weight.sizes()[3];
  s.groups = groups;
  if (groups <= 0 || s.c != s.cg * groups || s.oc % groups != 0) {
    throw ShimError("convolution channels do not match groups");
  }
  for (int i = 0; i < 2; ++i) {
    if (p.stride[i] <= 0 || p.dilation[i] <= 0 || p.padding[i] < 0) {
      throw ShimError("convolution stride/dilation must be positive, padding non-negative");
    }
  }
  s.oh = (s.h + 2 * p.padding[0] - p.dilation[0] * (s.kh - 1) - 1) / p.stride[0] + 1;
  s.ow = (s.w + 2 * p.padding[1] - p.dilation[1] * (s.kw - 1) - 1) / p.stride[1] + 1;
  if (s.oh <= 0 || s.ow <= 0) throw ShimError("convolution output would be empty");
  s.channels_last = !s.is_1d && (input.is_channels_last() || weight.is_channels_last());
  s.out_sizes = {s.n, s.oc, s.oh, s.ow};
  s.out_strides =
      s.channels_last ? channels_last_strides(s.out_sizes) : contiguous_strides(s.out_sizes);
  return s;
}

inline void check_conv_bias(const SlimTensor& bias, int64_t oc, int32_t dtype = dtype::kFloat32) {
  if (bias.dim() != 1 || bias.sizes()[0] != oc || bias.dtype() != dtype) {
    throw ShimError(std::string("convolution bias must be ") + dtype_name(dtype) +
                    " [out_channels]");
  }
}

// The 4-D output `out` in the caller's rank (3-D for a lifted 1-D conv).
inline SlimTensor conv_output_view(const SlimTensor& out, const ConvShape& s) {
  if (!s.is_1d) return out;
  const int64_t sz[3] = {s.n, s.oc, s.ow};
  const int64_t st[3] = {out.strides()[0], out.strides()[1], out.strides()[3]};
  return out.view(sz, st, 3, out.storage_offset());
}

}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CONV_GEOMETRY_H_
