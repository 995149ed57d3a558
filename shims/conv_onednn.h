// oneDNN forward convolution for the slim CPU shims (conv_onednn.cpp).
#ifndef SHIMKIT_SHIMS_CONV_ONEDNN_H_
#define SHIMKIT_SHIMS_CONV_ONEDNN_H_

#include "shims/conv_geometry.h"
#include "shims/conv_transpose_geometry.h"
#include "shims/slim_tensor.h"

namespace shimkit {

// out = conv(input, weight) + bias on the lifted 4-D tensors, written into
// `out` (allocated by the caller with s.out_strides); a transposed convolution
// when `transpose` is given (s from conv_transpose_shape). Returns false,
// having written nothing, when oneDNN is absent or has no implementation for
// the case; the caller then computes it another way.
bool onednn_convolution(const SlimTensor& input, const SlimTensor& weight, const SlimTensor* bias,
                        const ConvParams& p, const ConvShape& s, const SlimTensor& out,
                        const ConvTranspose* transpose = nullptr);

}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CONV_ONEDNN_H_
