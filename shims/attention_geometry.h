// Scaled dot-product attention geometry shared by the slim CPU attention
// (shim_attention.cpp) and any device port: argument checks, grouped-query
// head mapping, mask broadcasting and the outputs' sizes and strides. The
// strides are the ones Inductor's meta function promises the blob
// (torch/_meta_registrations.py, _scaled_dot_product_flash_attention_for_cpu):
// the output is empty_like(query), the logsumexp a [B, L, H] buffer seen as
// [B, H, L]. A blob reads the results with those strides.
#ifndef SHIMKIT_SHIMS_ATTENTION_GEOMETRY_H_
#define SHIMKIT_SHIMS_ATTENTION_GEOMETRY_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "shims/shim_internal.h"
#include "shims/slim_tensor.h"

namespace shimkit {

struct AttentionShape {
  int64_t batch = 0, heads = 0, kv_heads = 0;  // query heads, key/value heads (GQA: fewer)
  int64_t q_len = 0, kv_len = 0, head_dim = 0, value_dim = 0;
  double scale = 1.0;
  // Mask strides over [B, H, L, S] (0 where the mask broadcasts); no mask: empty.
  std::vector<int64_t> mask_strides;
  std::vector<int64_t> out_sizes, out_strides;  // [B, H, L, Ev]
  std::vector<int64_t> lse_sizes, lse_strides;  // [B, H, L]
  int32_t lse_dtype = dtype::kFloat32;
};

inline void check_attention_operand(const SlimTensor& t, const char* what) {
  if (t.dim() != 4) {
    throw ShimError(std::string(what) + " must be 4-D [batch, heads, seq, dim], got " +
                    std::to_string(t.dim()) + "-D");
  }
}

// Strides of `mask` broadcast to [B, H, L, S] (right-aligned, sizes 1 or equal).
inline std::vector<int64_t> broadcast_mask_strides(const SlimTensor& mask,
                                                   const int64_t (&target)[4]) {
  if (mask.dim() > 4) throw ShimError("attn_mask has more than 4 dimensions");
  std::vector<int64_t> strides(4, 0);
  const int64_t lead = 4 - mask.dim();
  for (int64_t d = 0; d < mask.dim(); ++d) {
    const int64_t size = mask.sizes()[d];
    if (size != 1 && size != target[lead + d]) {
      throw ShimError("attn_mask of size " + std::to_string(size) + " at dim " + std::to_string(d) +
                      " does not broadcast to " + std::to_string(target[lead + d]));
    }
    strides[lead + d] = size == 1 ? 0 : mask.strides()[d];
  }
  return strides;
}

inline AttentionShape attention_shape(const SlimTensor& q, const SlimTensor& k, const SlimTensor& v,
                                      const SlimTensor* mask, const double* scale) {
  check_attention_operand(q, "query");
  check_attention_operand(k, "key");
  check_attention_operand(v, "value");
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype()) {
    throw ShimError("query, key and value dtypes differ");
  }
  AttentionShape s;
  s.batch = q.sizes()[0], s.heads = q.sizes()[1], s.q_len = q.sizes()[2];
  s.head_dim = q.sizes()[3];
  s.kv_heads = k.sizes()[1], s.kv_len = k.sizes()[2], s.value_dim = v.sizes()[3];
  if (k.sizes()[0] != s.batch || v.sizes()[0] != s.batch) throw ShimError("batch sizes differ");
  if (k.sizes()[3] != s.head_dim) throw ShimError("query and key head dims differ");
  if (v.sizes()[1] != s.kv_heads || v.sizes()[2] != s.kv_len) {
    throw ShimError("key and value differ in heads or sequence length");
  }
  if (s.value_dim != s.head_dim) {
    throw ShimError("value head dim " + std::to_string(s.value_dim) + " differs from query's " +
                    std::to_string(s.head_dim) + " (the flash kernel's output is like query)");
  }
  if (s.kv_heads <= 0 || s.heads % s.kv_heads != 0) {
    throw ShimError("query heads " + std::to_string(s.heads) + " are not a multiple of key heads " +
                    std::to_string(s.kv_heads));
  }
  s.scale = scale != nullptr ? *scale : 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  if (mask != nullptr && mask->defined()) {
    if (mask->dtype() != dtype::kBool && mask->dtype() != q.dtype()) {
      throw ShimError(std::string("attn_mask must be bool or ") + dtype_name(q.dtype()) + ", got " +
                      dtype_name(mask->dtype()));
    }
    const int64_t target[4] = {s.batch, s.heads, s.q_len, s.kv_len};
    s.mask_strides = broadcast_mask_strides(*mask, target);
  }
  s.out_sizes = q.sizes().vec();
  s.out_strides = dense_strides_like(s.out_sizes, q.strides().vec());
  s.lse_sizes = {s.batch, s.heads, s.q_len};
  s.lse_strides = {s.q_len * s.heads, 1, s.heads};
  s.lse_dtype = q.dtype() == dtype::kFloat64 ? dtype::kFloat64 : dtype::kFloat32;
  return s;
}

}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_ATTENTION_GEOMETRY_H_
