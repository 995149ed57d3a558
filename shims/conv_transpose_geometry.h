// Transposed-convolution geometry (nn.ConvTranspose1d/2d: what Inductor passes
// to aoti_torch_cpu_convolution with transposed=1), shared by the CPU
// implementations and any device port: argument checks, the output size and
// the output memory format (ATen's rule for convolutions, conv_geometry.h).
// The weight is [C_in, C_out / groups, KH, KW].
#ifndef SHIMKIT_SHIMS_CONV_TRANSPOSE_GEOMETRY_H_
#define SHIMKIT_SHIMS_CONV_TRANSPOSE_GEOMETRY_H_

#include <cstdint>
#include <string>

#include "shims/conv_geometry.h"

namespace shimkit {

// The extra output rows/columns on the bottom/right (output_padding).
struct ConvTranspose {
  int64_t output_padding[2] = {0, 0};
};

// The ConvShape of a transposed convolution: `cg` is input channels per group,
// `oc` the output channels, `oh`/`ow` (H - 1) * stride - 2 * padding +
// dilation * (K - 1) + output_padding + 1.
inline ConvShape conv_transpose_shape(const SlimTensor& input_in, const SlimTensor& weight_in,
                                      const ConvParams& p, const ConvTranspose& t, int64_t groups) {
  if (input_in.dtype() != dtype::kFloat32 || weight_in.dtype() != dtype::kFloat32) {
    throw ShimError("transposed convolution supports float32 only");
  }
  ConvShape s;
  s.is_1d = input_in.dim() == 3;
  if (!(input_in.dim() == 4 || s.is_1d) || weight_in.dim() != input_in.dim()) {
    throw ShimError("transposed convolution needs 3-D or 4-D input and weight");
  }
  const SlimTensor input = lift_conv_1d(input_in);
  const SlimTensor weight = lift_conv_1d(weight_in);
  s.n = input.sizes()[0], s.c = input.sizes()[1], s.h = input.sizes()[2], s.w = input.sizes()[3];
  s.kh = weight.sizes()[2], s.kw = weight.sizes()[3];
  s.groups = groups;
  if (groups <= 0 || s.c % groups != 0 || weight.sizes()[0] != s.c) {
    throw ShimError("transposed convolution channels do not match the weight and groups");
  }
  s.cg = s.c / groups;
  s.oc = weight.sizes()[1] * groups;
  for (int i = 0; i < 2; ++i) {
    if (p.stride[i] <= 0 || p.dilation[i] <= 0 || p.padding[i] < 0) {
      throw ShimError("convolution stride/dilation must be positive, padding non-negative");
    }
    const int64_t op = t.output_padding[i];
    if (op < 0 || (op >= p.stride[i] && op >= p.dilation[i])) {
      throw ShimError("output_padding must be smaller than either stride or dilation");
    }
  }
  s.oh = (s.h - 1) * p.stride[0] - 2 * p.padding[0] + p.dilation[0] * (s.kh - 1) +
         t.output_padding[0] + 1;
  s.ow = (s.w - 1) * p.stride[1] - 2 * p.padding[1] + p.dilation[1] * (s.kw - 1) +
         t.output_padding[1] + 1;
  if (s.oh <= 0 || s.ow <= 0) throw ShimError("transposed convolution output would be empty");
  s.channels_last = !s.is_1d && (input.is_channels_last() || weight.is_channels_last());
  s.out_sizes = {s.n, s.oc, s.oh, s.ow};
  s.out_strides =
      s.channels_last ? channels_last_strides(s.out_sizes) : contiguous_strides(s.out_sizes);
  return s;
}

}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CONV_TRANSPOSE_GEOMETRY_H_
