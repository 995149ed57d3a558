// Transposed-convolution geometry (nn.ConvTranspose1d/2d/3d: what Inductor passes
// to aoti_torch_cpu_convolution with transposed=1), shared by the CPU
// implementations and any device port: the ABI's arguments read, argument checks, the output size
// and the output memory format (ATen's rule for convolutions, conv_geometry.h). The weight is
// [C_in, C_out / groups, *kernel].
#ifndef SHIMKIT_SHIMS_CONV_TRANSPOSE_GEOMETRY_H_
#define SHIMKIT_SHIMS_CONV_TRANSPOSE_GEOMETRY_H_

#include <cstdint>
#include <string>

#include "shims/conv_geometry.h"

namespace shimkit {

// The extra output elements at the high end of each spatial dim
// (output_padding), indexed depth, height, width.
struct ConvTranspose {
  int64_t output_padding[kConvDims] = {0, 0, 0};
};

// A convolution's arguments as the shim ABI passes them (aoti_torch_*_convolution):
// the spatial parameters and, for a transposed one, the output padding.
struct ConvArguments {
  ConvParams params;
  ConvTranspose transpose;
  bool transposed = false;
  // The output padding for a transposed convolution, null for a plain one.
  const ConvTranspose* transposed_by() const { return transposed ? &transpose : nullptr; }
};

inline ConvArguments read_conv_arguments(int64_t spatial, const int64_t* stride, int64_t stride_len,
                                         const int64_t* padding, int64_t padding_len,
                                         const int64_t* dilation, int64_t dilation_len,
                                         int32_t transposed, const int64_t* output_padding,
                                         int64_t output_padding_len) {
  ConvArguments a;
  a.params =
      read_conv_params(spatial, stride, stride_len, padding, padding_len, dilation, dilation_len);
  a.transposed = transposed != 0;
  if (a.transposed) {
    read_conv_list(output_padding, output_padding_len, spatial, 0, a.transpose.output_padding,
                   "output_padding");
  }
  return a;
}

// The ConvShape of a transposed convolution: `cg` is input channels per group,
// `oc` the output channels, each output size (I - 1) * stride - 2 * padding +
// dilation * (K - 1) + output_padding + 1.
inline ConvShape conv_transpose_shape(const SlimTensor& input_in, const SlimTensor& weight_in,
                                      const ConvParams& p, const ConvTranspose& t, int64_t groups,
                                      ConvBackend backend = ConvBackend::kCpu) {
  check_conv_dtypes(input_in, weight_in, backend, "transposed convolution");
  ConvShape s = conv_common(input_in, weight_in, p, groups, t.output_padding, backend,
                            "transposed convolution");
  if (groups <= 0 || s.c % groups != 0 || weight_in.sizes()[0] != s.c) {
    throw ShimError("transposed convolution channels do not match the weight and groups");
  }
  s.cg = s.c / groups;
  s.oc = weight_in.sizes()[1] * groups;
  for (int i = 0; i < kConvDims; ++i) {
    const int64_t op = t.output_padding[i];
    if (op < 0 || (op >= p.stride[i] && op >= p.dilation[i])) {
      throw ShimError("output_padding must be smaller than either stride or dilation");
    }
    s.out[i] =
        (s.in[i] - 1) * p.stride[i] - 2 * p.padding[i] + p.dilation[i] * (s.kernel[i] - 1) + op + 1;
  }
  set_conv_output(s, "transposed convolution");
  return s;
}

}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CONV_TRANSPOSE_GEOMETRY_H_
