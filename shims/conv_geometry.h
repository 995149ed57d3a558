// Convolution geometry shared by the CPU convolution (shim_conv.cpp) and the
// cuDNN one (cuda/cudnn_conv.cpp): argument checks, the output shape, and
// the output memory format, for 1-D, 2-D and 3-D convolutions. Both must
// agree with ATen, and with each other, because a blob reads the result with
// the strides it expects.
#ifndef SHIMKIT_SHIMS_CONV_GEOMETRY_H_
#define SHIMKIT_SHIMS_CONV_GEOMETRY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "shims/shim_internal.h"
#include "shims/slim_tensor.h"

namespace shimkit {

// Convolutions run over 2 or 3 spatial dims (1-D ones are lifted to H = 1).
// Spatial arrays below are indexed depth, height, width; a 2-D convolution
// has depth 1 there (size, kernel, stride and dilation 1, padding 0), so one
// loop nest serves both, and a library call takes the last `spatial` entries.
constexpr int kConvDims = 3;

// The first entry of a spatial array a convolution of `spatial` dims uses:
// library calls take the last `spatial` entries (height and width of a 2-D
// one).
constexpr int first_used_dim(int spatial) { return kConvDims - spatial; }

// Spatial parameters, indexed depth, height, width.
struct ConvParams {
  int64_t stride[kConvDims] = {1, 1, 1};
  int64_t padding[kConvDims] = {0, 0, 0};
  int64_t dilation[kConvDims] = {1, 1, 1};
};

// One parameter list as the shim ABI passes it: one value for every spatial
// dim, or one value for all of them; stored right-aligned in `out`.
inline void read_conv_list(const int64_t* values, int64_t len, int64_t spatial, int64_t fill,
                           int64_t out[kConvDims], const char* what) {
  if (spatial < 1 || spatial > kConvDims) {
    throw ShimError("convolution needs 1 to 3 spatial dims, got " + std::to_string(spatial));
  }
  if (len != 1 && len != spatial) {
    throw ShimError(std::string(what) + " has " + std::to_string(len) + " values for " +
                    std::to_string(spatial) + " spatial dims");
  }
  if (len > 0 && values == nullptr) throw ShimError(std::string("null ") + what);
  for (int i = 0; i < kConvDims; ++i) out[i] = fill;
  const int first = first_used_dim(static_cast<int>(spatial));
  for (int64_t i = 0; i < spatial; ++i) out[first + i] = values[len == 1 ? 0 : i];
}

inline ConvParams read_conv_params(int64_t spatial, const int64_t* stride, int64_t stride_len,
                                   const int64_t* padding, int64_t padding_len,
                                   const int64_t* dilation, int64_t dilation_len) {
  ConvParams p;
  read_conv_list(stride, stride_len, spatial, 1, p.stride, "stride");
  read_conv_list(padding, padding_len, spatial, 0, p.padding, "padding");
  read_conv_list(dilation, dilation_len, spatial, 1, p.dilation, "dilation");
  return p;
}

// A 3-D [N, C, W] tensor as the 4-D view [N, C, 1, W]; other ranks unchanged.
inline SlimTensor lift_conv_1d(const SlimTensor& t) {
  if (t.dim() != 3) return t;
  const int64_t sz[4] = {t.sizes()[0], t.sizes()[1], 1, t.sizes()[2]};
  const int64_t st[4] = {t.strides()[0], t.strides()[1], t.sizes()[2] * t.strides()[2],
                         t.strides()[2]};
  return t.view(sz, st, 4, t.storage_offset());
}

// The spatial sizes of a lifted (4-D or 5-D) tensor, depth first (1 for 4-D).
inline void spatial_sizes(const SlimTensor& t, int64_t out[kConvDims]) {
  out[0] = t.dim() == 5 ? t.sizes()[2] : 1;
  out[1] = t.sizes()[t.dim() - 2];
  out[2] = t.sizes()[t.dim() - 1];
}

// Sizes of a checked convolution, on the lifted tensors.
struct ConvShape {
  bool is_1d = false;
  int spatial = 2;                 // spatial dims of the lifted tensors: 2 or 3
  int64_t n = 0, c = 0;            // input batch and channels
  int64_t in[kConvDims] = {};      // input spatial size (depth, height, width)
  int64_t oc = 0, cg = 0;          // weight: [OC, C / groups, *kernel]
  int64_t kernel[kConvDims] = {};  // kernel spatial size
  int64_t out[kConvDims] = {};     // output spatial size
  int64_t groups = 1;
  // The output is channels_last (4-D) or channels_last_3d (5-D): ATen's
  // rule, in conv_common.
  bool channels_last = false;
  std::vector<int64_t> out_sizes;    // lifted rank
  std::vector<int64_t> out_strides;  // lifted rank, dense in the chosen format

  // [N, C, *spatial] of the lifted input and [N, OC, *spatial] of the output.
  std::vector<int64_t> input_sizes() const { return with_spatial({n, c}, in); }
  std::vector<int64_t> output_sizes() const { return with_spatial({n, oc}, out); }
  // [N, OC, *spatial] with spatial sizes `within` (depth, height, width).
  std::vector<int64_t> output_sizes_within(const int64_t* within) const {
    return with_spatial({n, oc}, within);
  }
  // Dense strides for `sizes` in this convolution's memory format.
  std::vector<int64_t> dense_strides(const std::vector<int64_t>& sizes) const {
    return channels_last ? channels_last_strides(sizes) : contiguous_strides(sizes);
  }
  // The last `spatial` entries of a spatial array, as a library call takes them.
  std::vector<int64_t> used(const int64_t* values) const {
    return std::vector<int64_t>(values + first_used_dim(spatial), values + kConvDims);
  }

 private:
  std::vector<int64_t> with_spatial(std::vector<int64_t> head, const int64_t* values) const {
    for (int64_t v : used(values)) head.push_back(v);
    return head;
  }
};

// Which library runs a convolution, as far as the output memory format goes.
enum class ConvBackend { kCpu, kCudnn };

// True where ATen runs a CPU convolution of float32 tensors on oneDNN (its
// use_mkldnn heuristic); elsewhere it runs its own slow kernels. Assumes the
// blob was compiled in a process of more than one thread (torch's default on
// a multi-core machine): with one thread ATen also leaves unstrided,
// undilated 1x1 convolutions of batches under 16 to its slow kernels.
// `output_padding` is null for a plain convolution.
inline bool aten_cpu_conv_on_onednn(const ConvShape& s, const ConvParams& p,
                                    const int64_t* output_padding) {
  if (output_padding != nullptr) {
    for (int i = 0; i < kConvDims; ++i) {
      if (output_padding[i] >= p.stride[i]) return false;  // "output padding too big"
    }
  }
  return s.groups > 1 || (s.kernel[1] > 3 && s.kernel[2] > 3) || s.n > 1 ||
         s.n * s.c * (s.spatial == 3 ? s.in[0] * s.in[1] : s.in[1] * s.in[2]) > 20480;
}

// Checks shared by plain and transposed convolutions (`output_padding` null
// for plain ones): ranks and the spatial parameters. Fills is_1d, spatial, n,
// c, in, kernel, groups and channels_last.
inline ConvShape conv_common(const SlimTensor& input_in, const SlimTensor& weight_in,
                             const ConvParams& p, int64_t groups, const int64_t* output_padding,
                             ConvBackend backend, const char* what) {
  ConvShape s;
  const int64_t dims = input_in.dim();
  if (dims < 3 || dims > 5 || weight_in.dim() != dims) {
    throw ShimError(std::string(what) + " needs 3-D, 4-D or 5-D input and a weight of its rank");
  }
  s.is_1d = dims == 3;
  s.spatial = dims == 5 ? 3 : 2;
  const SlimTensor input = lift_conv_1d(input_in);
  const SlimTensor weight = lift_conv_1d(weight_in);
  s.n = input.sizes()[0], s.c = input.sizes()[1];
  spatial_sizes(input, s.in);
  spatial_sizes(weight, s.kernel);
  s.groups = groups;
  for (int i = 0; i < kConvDims; ++i) {
    if (p.stride[i] <= 0 || p.dilation[i] <= 0 || p.padding[i] < 0) {
      throw ShimError("convolution stride/dilation must be positive, padding non-negative");
    }
  }
  // ATen's rule: a 4-D output is channels_last when the input or the weight
  // is, on every backend; a 5-D one is channels_last_3d then on cuDNN, and
  // on the CPU only where oneDNN runs it (ATen's slow 3-D kernels write
  // contiguous output). A blob was compiled against exactly this choice.
  const bool channels_last_operand = input.is_channels_last() || weight.is_channels_last();
  s.channels_last = !s.is_1d && channels_last_operand &&
                    (s.spatial == 2 || backend == ConvBackend::kCudnn ||
                     aten_cpu_conv_on_onednn(s, p, output_padding));
  return s;
}

// Sets the output sizes and strides from `out` (checked non-empty).
inline void set_conv_output(ConvShape& s, const char* what) {
  for (int i = 0; i < kConvDims; ++i) {
    if (s.out[i] <= 0) throw ShimError(std::string(what) + " output would be empty");
  }
  s.out_sizes = s.output_sizes();
  s.out_strides = s.dense_strides(s.out_sizes);
}

// The dtypes a backend computes: float32 on the CPU; on cuDNN float16 and
// bfloat16 too (computed in float32). Input and weight share the dtype.
inline void check_conv_dtypes(const SlimTensor& input, const SlimTensor& weight,
                              ConvBackend backend, const char* what) {
  const bool half_floats = backend == ConvBackend::kCudnn;
  const int32_t dt = input.dtype();
  const bool supported =
      dt == dtype::kFloat32 || (half_floats && (dt == dtype::kFloat16 || dt == dtype::kBFloat16));
  if (!supported || weight.dtype() != dt) {
    throw ShimError(std::string(what) +
                    (half_floats ? " supports float32, float16 and bfloat16 (input and weight of "
                                   "one dtype)"
                                 : " supports float32 only"));
  }
}

inline ConvShape conv_shape(const SlimTensor& input_in, const SlimTensor& weight_in,
                            const ConvParams& p, int64_t groups,
                            ConvBackend backend = ConvBackend::kCpu) {
  check_conv_dtypes(input_in, weight_in, backend, "convolution");
  ConvShape s = conv_common(input_in, weight_in, p, groups, nullptr, backend, "convolution");
  s.oc = weight_in.sizes()[0], s.cg = weight_in.sizes()[1];
  if (groups <= 0 || s.c != s.cg * groups || s.oc % groups != 0) {
    throw ShimError("convolution channels do not match groups");
  }
  for (int i = 0; i < kConvDims; ++i) {
    s.out[i] =
        (s.in[i] + 2 * p.padding[i] - p.dilation[i] * (s.kernel[i] - 1) - 1) / p.stride[i] + 1;
  }
  set_conv_output(s, "convolution");
  return s;
}

inline void check_conv_bias(const SlimTensor& bias, int64_t oc, int32_t dtype = dtype::kFloat32) {
  if (bias.dim() != 1 || bias.sizes()[0] != oc || bias.dtype() != dtype) {
    throw ShimError(std::string("convolution bias must be ") + dtype_name(dtype) +
                    " [out_channels]");
  }
}

// The lifted output `out` in the caller's rank (3-D for a lifted 1-D conv).
inline SlimTensor conv_output_view(const SlimTensor& out, const ConvShape& s) {
  if (!s.is_1d) return out;
  const int64_t sz[3] = {s.n, s.oc, s.out[2]};
  const int64_t st[3] = {out.strides()[0], out.strides()[1], out.strides()[3]};
  return out.view(sz, st, 3, out.storage_offset());
}

}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CONV_GEOMETRY_H_
