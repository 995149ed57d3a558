// Slim CPU EmbeddingBag: aoti_torch_cpu__embedding_bag and its forward-only
// twin (what Inductor emits for nn.EmbeddingBag / F.embedding_bag). Sum, mean
// and max bags, per-sample weights (sum), padding_idx, include_last_offset;
// float32/float64/float16/bfloat16 weights (accumulated in float or double),
// int64/int32 indices and offsets. Out-of-range indices and malformed offsets
// are errors, as in ATen.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "shims/embedding_bag_geometry.h"
#include "shims/scalar_types.h"
#include "shims/shim_internal.h"

namespace shimkit {
namespace {

template <typename I>
std::vector<int64_t> read_index_vector(const SlimTensor& t) {
  const I* p = static_cast<const I*>(t.data_ptr());
  const int64_t n = t.sizes()[0], st = t.strides()[0];
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(p[i * st]);
  return out;
}

std::vector<int64_t> read_indices(const SlimTensor& t, const char* what) {
  return dispatch_index(t.dtype(), what,
                        [&](auto tag) { return read_index_vector<decltype(tag)>(t); });
}

template <typename I>
void write_index_vector(const SlimTensor& t, const std::vector<int64_t>& values) {
  I* p = static_cast<I*>(t.data_ptr());
  for (size_t i = 0; i < values.size(); ++i) p[i] = static_cast<I>(values[i]);
}

void write_indices(const SlimTensor& t, const std::vector<int64_t>& values) {
  dispatch_index(t.dtype(), "offsets",
                 [&](auto tag) { write_index_vector<decltype(tag)>(t, values); });
}

struct BagResults {
  std::vector<int64_t> offset2bag, bag_size, max_indices;
};

template <typename T>
void embedding_bag(const SlimTensor& weight, const std::vector<int64_t>& idx,
                   const std::vector<int64_t>& begin, const std::vector<int64_t>& end,
                   const SlimTensor* psw, const EmbeddingBagShape& s, int64_t padding_idx,
                   const SlimTensor& out, BagResults* r) {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const T* w = static_cast<const T*>(weight.data_ptr());
  const int64_t ws0 = weight.strides()[0], ws1 = weight.strides()[1];
  const T* pw = psw != nullptr ? static_cast<const T*>(psw->data_ptr()) : nullptr;
  const int64_t pws = psw != nullptr ? psw->strides()[0] : 0;
  T* o = static_cast<T*>(out.data_ptr());
  std::vector<Acc> acc(static_cast<size_t>(s.dim));
  std::vector<int64_t> arg(static_cast<size_t>(s.dim));
  for (int64_t b = 0; b < s.bags; ++b) {
    int64_t count = 0;
    std::fill(acc.begin(), acc.end(),
              s.mode == kBagMax ? -std::numeric_limits<Acc>::infinity() : Acc(0));
    std::fill(arg.begin(), arg.end(), -1);
    for (int64_t i = begin[b]; i < end[b]; ++i) {
      const int64_t row = idx[i];
      r->offset2bag[i] = b;
      if (row == padding_idx) continue;
      ++count;
      const T* src = w + row * ws0;
      const Acc scale = pw != nullptr ? static_cast<Acc>(Scalar<T>::load(pw + i * pws)) : Acc(1);
      for (int64_t d = 0; d < s.dim; ++d) {
        const Acc x = static_cast<Acc>(Scalar<T>::load(src + d * ws1));
        if (s.mode == kBagMax) {
          if (arg[d] < 0 || x > acc[d]) {
            acc[d] = x;
            arg[d] = row;
          }
        } else {
          acc[d] += scale * x;
        }
      }
    }
    r->bag_size[b] = count;
    const Acc div = (s.mode == kBagMean && count > 0) ? static_cast<Acc>(count) : Acc(1);
    for (int64_t d = 0; d < s.dim; ++d) {
      const Acc v = (s.mode == kBagMax && count == 0) ? Acc(0) : acc[d] / div;
      Scalar<T>::store(o + b * s.dim + d, v);
      // An empty bag's max index is 0, as in ATen.
      if (s.mode == kBagMax) r->max_indices[b * s.dim + d] = count == 0 ? 0 : arg[d];
    }
  }
}

void run_embedding_bag(AtenTensorHandle weight_h, AtenTensorHandle indices_h,
                       AtenTensorHandle offsets_h, int64_t mode, AtenTensorHandle* psw_h,
                       int32_t include_last_offset, int64_t padding_idx, bool forward_only,
                       AtenTensorHandle* ret0, AtenTensorHandle* ret1, AtenTensorHandle* ret2,
                       AtenTensorHandle* ret3) {
  check_out(ret0);
  check_out(ret1);
  check_out(ret2);
  check_out(ret3);
  const SlimTensor& weight = as_tensor(weight_h);
  const SlimTensor& indices = as_tensor(indices_h);
  const SlimTensor& offsets = as_tensor(offsets_h);
  const SlimTensor* psw = (psw_h != nullptr && *psw_h != nullptr) ? &as_tensor(*psw_h) : nullptr;
  if (psw != nullptr && !psw->defined()) psw = nullptr;
  const EmbeddingBagShape s = embedding_bag_shape(
      weight, indices, offsets, psw, mode, include_last_offset != 0, padding_idx, forward_only);
  const std::vector<int64_t> idx = read_indices(indices, "embedding_bag indices");
  const std::vector<int64_t> offs = read_indices(offsets, "embedding_bag offsets");
  for (int64_t i = 0; i < s.num_indices; ++i) {
    if (idx[i] < 0 || idx[i] >= s.num_weights) {
      throw ShimError("embedding_bag index " + std::to_string(idx[i]) + " out of range [0, " +
                      std::to_string(s.num_weights) + ")");
    }
  }
  std::vector<int64_t> begin(static_cast<size_t>(s.bags)), end(static_cast<size_t>(s.bags));
  for (int64_t b = 0; b < s.bags; ++b) {
    begin[b] = offs[b];
    end[b] = b + 1 < s.num_offsets ? offs[b + 1] : s.num_indices;
    if (b == 0 && begin[b] != 0) throw ShimError("embedding_bag offsets[0] must be 0");
    if (begin[b] > end[b] || end[b] > s.num_indices) {
      throw ShimError(
          "embedding_bag offsets must be non-decreasing and at most the number of "
          "indices, got " +
          std::to_string(begin[b]) + " then " + std::to_string(end[b]));
    }
  }
  const int64_t out_sizes[2] = {s.bags, s.dim};
  SlimTensor out = SlimTensor::empty(out_sizes, nullptr, 2, weight.dtype(), weight.device_type(),
                                     weight.device_index());
  BagResults r;
  r.offset2bag.assign(static_cast<size_t>(s.num_indices), 0);
  r.bag_size.assign(static_cast<size_t>(s.bags), 0);
  if (s.mode == kBagMax) r.max_indices.assign(static_cast<size_t>(s.bags * s.dim), 0);
  dispatch_floating(weight.dtype(), "embedding_bag weight", [&](auto tag) {
    embedding_bag<decltype(tag)>(weight, idx, begin, end, psw, s, padding_idx, out, &r);
  });
  // The index results, in the offsets' dtype and the meta function's sizes.
  const int32_t it = offsets.dtype();
  const int64_t o2b_size = s.offset2bag_size;
  SlimTensor offset2bag =
      SlimTensor::empty(&o2b_size, nullptr, 1, it, weight.device_type(), weight.device_index());
  if (o2b_size > 0) write_indices(offset2bag, r.offset2bag);
  const int64_t bs_size = s.bag_size_size;
  SlimTensor bag_size =
      SlimTensor::empty(&bs_size, nullptr, 1, it, weight.device_type(), weight.device_index());
  std::vector<int64_t> sizes = r.bag_size;
  sizes.resize(static_cast<size_t>(bs_size), 0);
  write_indices(bag_size, sizes);
  const int64_t mi_sizes[2] = {s.bags, s.dim};
  SlimTensor max_indices = SlimTensor::empty(mi_sizes, nullptr, s.max_indices_2d ? 2 : 1, it,
                                             weight.device_type(), weight.device_index());
  // Outside max mode ATen leaves a copy of the bag sizes there.
  write_indices(max_indices, s.max_indices_2d ? r.max_indices : r.bag_size);
  *ret0 = to_handle(std::move(out));
  *ret1 = to_handle(std::move(offset2bag));
  *ret2 = to_handle(std::move(bag_size));
  *ret3 = to_handle(std::move(max_indices));
}

}  // namespace
}  // namespace shimkit

extern "C" {

AOTITorchError aoti_torch_cpu__embedding_bag(AtenTensorHandle weight, AtenTensorHandle indices,
                                             AtenTensorHandle offsets, int32_t scale_grad_by_freq,
                                             int64_t mode, int32_t sparse,
                                             AtenTensorHandle* per_sample_weights,
                                             int32_t include_last_offset, int64_t padding_idx,
                                             AtenTensorHandle* ret0, AtenTensorHandle* ret1,
                                             AtenTensorHandle* ret2, AtenTensorHandle* ret3) {
  (void)scale_grad_by_freq;  // gradients only
  (void)sparse;
  return SHIMKIT_GUARD({
    shimkit::run_embedding_bag(weight, indices, offsets, mode, per_sample_weights,
                               include_last_offset, padding_idx, false, ret0, ret1, ret2, ret3);
  });
}

AOTITorchError aoti_torch_cpu__embedding_bag_forward_only(
    AtenTensorHandle weight, AtenTensorHandle indices, AtenTensorHandle offsets,
    int32_t scale_grad_by_freq, int64_t mode, int32_t sparse, AtenTensorHandle* per_sample_weights,
    int32_t include_last_offset, int64_t padding_idx, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1, AtenTensorHandle* ret2, AtenTensorHandle* ret3) {
  (void)scale_grad_by_freq;
  (void)sparse;
  return SHIMKIT_GUARD({
    shimkit::run_embedding_bag(weight, indices, offsets, mode, per_sample_weights,
                               include_last_offset, padding_idx, true, ret0, ret1, ret2, ret3);
  });
}

}  // extern "C"
