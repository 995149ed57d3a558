// float16/bfloat16 operands of ops whose kernels compute in float32 (GEMMs,
// convolution): the op runs on float32 copies and its result is rounded back
// once, which is what ATen's CPU kernels for these dtypes do too (they
// accumulate in float32).
#ifndef SHIMKIT_SHIMS_FLOAT_COMPUTE_H_
#define SHIMKIT_SHIMS_FLOAT_COMPUTE_H_

#include <vector>

#include "shims/slim_tensor.h"

namespace shimkit {

inline bool is_reduced_float(int32_t dt) { return dt == dtype::kFloat16 || dt == dtype::kBFloat16; }

// A float32 copy of `t` with dense strides in `t`'s dimension order.
inline SlimTensor float32_copy(const SlimTensor& t) {
  const std::vector<int64_t> strides = dense_strides_like(t.sizes().vec(), t.strides().vec());
  SlimTensor out = SlimTensor::empty(t.sizes().data(), strides.data(), t.dim(), dtype::kFloat32,
                                     t.device_type(), t.device_index());
  copy_elements(out, t);
  return out;
}

// `t` converted to `dt`, keeping its strides (dense ones, as `t` is dense).
inline SlimTensor converted(const SlimTensor& t, int32_t dt) {
  SlimTensor out = SlimTensor::empty(t.sizes().data(), t.strides().data(), t.dim(), dt,
                                     t.device_type(), t.device_index());
  copy_elements(out, t);
  return out;
}

}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_FLOAT_COMPUTE_H_
