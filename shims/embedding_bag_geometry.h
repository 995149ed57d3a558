// EmbeddingBag geometry shared by the slim CPU embedding_bag
// (shim_embedding.cpp) and any device port: argument checks and the sizes of
// the four results, exactly as Inductor's meta function promises them to the
// blob (torch/_meta_registrations.py, meta_embedding_bag): output
// [bags, dim]; offset2bag [indices] (empty on the CPU sum fast path); bag_size
// [bags] ([offsets] for the forward-only op); max_indices [bags, dim] in max
// mode, else [bags]. The index results take the offsets' dtype.
#ifndef SHIMKIT_SHIMS_EMBEDDING_BAG_GEOMETRY_H_
#define SHIMKIT_SHIMS_EMBEDDING_BAG_GEOMETRY_H_

#include <cstdint>
#include <string>

#include "shims/shim_internal.h"
#include "shims/slim_tensor.h"

namespace shimkit {

enum EmbeddingBagMode : int64_t { kBagSum = 0, kBagMean = 1, kBagMax = 2 };

struct EmbeddingBagShape {
  int64_t num_weights = 0, dim = 0;
  int64_t num_indices = 0, num_offsets = 0, bags = 0;
  int64_t mode = kBagSum;
  int64_t offset2bag_size = 0;
  int64_t bag_size_size = 0;
  bool max_indices_2d = false;  // [bags, dim] in max mode, else [bags]
};

inline EmbeddingBagShape embedding_bag_shape(const SlimTensor& weight, const SlimTensor& indices,
                                             const SlimTensor& offsets,
                                             const SlimTensor* per_sample_weights, int64_t mode,
                                             bool include_last_offset, int64_t padding_idx,
                                             bool forward_only) {
  if (weight.dim() != 2) throw ShimError("embedding_bag weight must be 2-D");
  if (indices.dim() != 1 || offsets.dim() != 1) {
    throw ShimError("embedding_bag indices and offsets must be 1-D");
  }
  if (mode != kBagSum && mode != kBagMean && mode != kBagMax) {
    throw ShimError("embedding_bag mode " + std::to_string(mode) + " is not sum, mean or max");
  }
  EmbeddingBagShape s;
  s.num_weights = weight.sizes()[0];
  s.dim = weight.sizes()[1];
  s.num_indices = indices.sizes()[0];
  s.num_offsets = offsets.sizes()[0];
  s.mode = mode;
  s.bags = s.num_offsets;
  if (include_last_offset) {
    if (s.num_offsets < 1) throw ShimError("include_last_offset needs at least one offset");
    s.bags -= 1;
  }
  if (per_sample_weights != nullptr) {
    if (mode != kBagSum) throw ShimError("per_sample_weights are only supported with mode 'sum'");
    if (per_sample_weights->dim() != 1 || per_sample_weights->sizes()[0] != s.num_indices) {
      throw ShimError("per_sample_weights must be 1-D with one weight per index");
    }
    if (per_sample_weights->dtype() != weight.dtype()) {
      throw ShimError("per_sample_weights dtype differs from weight's");
    }
  }
  // ATen's CPU "fast path" for sum: float/half weight and output with unit
  // column stride, no padding index, unit-stride per-sample weights.
  const bool fast_dtype = weight.dtype() == dtype::kFloat32 || weight.dtype() == dtype::kFloat16;
  bool fast_sum = fast_dtype && weight.strides()[1] == 1 && padding_idx < 0;
  if (per_sample_weights != nullptr) fast_sum = fast_sum && per_sample_weights->strides()[0] == 1;
  s.offset2bag_size = (mode == kBagMean || mode == kBagMax || !fast_sum) ? s.num_indices : 0;
  s.bag_size_size = forward_only ? s.num_offsets : s.bags;
  s.max_indices_2d = mode == kBagMax;
  return s;
}

}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_EMBEDDING_BAG_GEOMETRY_H_
