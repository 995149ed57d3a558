// Slim CPU sorting and order statistics (NaN counts as the largest value,
// like ATen; float16 and bfloat16 compared as float): topk and stable sort
// along one dimension for every numeric dtype and bool; kthvalue and mode
// along one dimension; median and nanmedian of the whole tensor.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "shims/scalar_types.h"
#include "shims/shim_internal.h"
#include "shims/strided_loop.h"

namespace shimkit {
namespace {

template <typename T>
bool greater(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return a > b;
}

template <typename T>
void select_sorted(const SlimTensor& self, int64_t dim, int64_t k, bool largest, bool stable,
                   const SlimTensor& values, const SlimTensor& indices) {
  using S = Scalar<T>;
  const int64_t len = self.dim() == 0 ? 1 : self.sizes()[dim];
  const int64_t in_stride = self.dim() == 0 ? 1 : self.strides()[dim];
  const int64_t v_stride = values.dim() == 0 ? 1 : values.strides()[dim];
  const int64_t i_stride = indices.dim() == 0 ? 1 : indices.strides()[dim];
  const T* in = static_cast<const T*>(self.data_ptr());
  T* vout = static_cast<T*>(values.data_ptr());
  int64_t* iout = static_cast<int64_t*>(indices.data_ptr());
  std::vector<int64_t> order(static_cast<size_t>(len));
  std::vector<typename S::Compute> slice(static_cast<size_t>(len));
  for_each_position<3>(
      self.sizes().vec(),
      {self.strides().data(), values.strides().data(), indices.strides().data()},
      [&](const std::vector<int64_t>&, const std::array<int64_t, 3>& off) {
        for (int64_t j = 0; j < len; ++j) slice[j] = S::load(in + off[0] + j * in_stride);
        std::iota(order.begin(), order.end(), 0);
        auto cmp = [&](int64_t a, int64_t b) {
          return largest ? greater(slice[a], slice[b]) : greater(slice[b], slice[a]);
        };
        if (stable) {
          std::stable_sort(order.begin(), order.end(), cmp);
        } else {
          std::partial_sort(order.begin(), order.begin() + k, order.end(), cmp);
        }
        for (int64_t j = 0; j < k; ++j) {
          S::store(vout + off[1] + j * v_stride, slice[order[j]]);
          iout[off[2] + j * i_stride] = order[j];
        }
      },
      self.dim() == 0 ? -1 : dim);
}

// The number of elements along dim `d` (wrapped); a 0-D tensor has one.
int64_t length_along(const SlimTensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.sizes()[d]; }

void dispatch(const SlimTensor& self, int64_t dim, int64_t k, bool largest, bool stable,
              const SlimTensor& values, const SlimTensor& indices) {
  dispatch_numeric_or_bool(self.dtype(), "sort", [&](auto tag) {
    select_sorted<decltype(tag)>(self, dim, k, largest, stable, values, indices);
  });
}

// Ascending order with NaN last and ties in position order: the order a stable
// ascending sort gives (ATen's order statistics pick by it).
template <typename C>
bool before(const std::vector<C>& slice, int64_t a, int64_t b) {
  if (greater(slice[b], slice[a])) return true;
  return !greater(slice[a], slice[b]) && a < b;
}

// Values and int64 indices of a reduction along `dim` of `self`, with `dim`
// kept (size 1; dropped later unless keepdim), contiguous as ATen's.
struct Reduced {
  SlimTensor values, indices;
};

Reduced reduced_outputs(const SlimTensor& self, int64_t dim) {
  std::vector<int64_t> sizes = self.sizes().vec();
  if (self.dim() > 0) sizes[dim] = 1;
  return {SlimTensor::empty(sizes.data(), nullptr, self.dim(), self.dtype(), self.device_type(),
                            self.device_index()),
          SlimTensor::empty(sizes.data(), nullptr, self.dim(), dtype::kInt64, self.device_type(),
                            self.device_index())};
}

// `t` without its size-1 dim `dim` (keepdim=false); 0-d tensors unchanged.
SlimTensor drop_dim(const SlimTensor& t, int64_t dim) {
  if (t.dim() == 0) return t;
  std::vector<int64_t> sizes = t.sizes().vec(), strides = t.strides().vec();
  sizes.erase(sizes.begin() + dim);
  strides.erase(strides.begin() + dim);
  return t.view(sizes.data(), strides.data(), static_cast<int64_t>(sizes.size()),
                t.storage_offset());
}

// The ABI's two results of a reduction along `dim`, dim dropped unless keepdim.
void hand_out(Reduced out, int64_t dim, bool keepdim, AtenTensorHandle* ret0,
              AtenTensorHandle* ret1) {
  *ret0 = to_handle(keepdim ? std::move(out.values) : drop_dim(out.values, dim));
  *ret1 = to_handle(keepdim ? std::move(out.indices) : drop_dim(out.indices, dim));
}

// Calls `pick(slice, order) -> position` for every slice of `self` along
// `dim`, `order` holding 0..len-1; stores slice[position] and position.
template <typename T, typename Pick>
void pick_along(const SlimTensor& self, int64_t dim, const Reduced& out, Pick&& pick) {
  using S = Scalar<T>;
  const int64_t len = self.dim() == 0 ? 1 : self.sizes()[dim];
  const int64_t in_stride = self.dim() == 0 ? 1 : self.strides()[dim];
  const T* in = static_cast<const T*>(self.data_ptr());
  T* vout = static_cast<T*>(out.values.data_ptr());
  int64_t* iout = static_cast<int64_t*>(out.indices.data_ptr());
  std::vector<int64_t> order(static_cast<size_t>(len));
  std::vector<typename S::Compute> slice(static_cast<size_t>(len));
  for_each_position<3>(
      self.sizes().vec(),
      {self.strides().data(), out.values.strides().data(), out.indices.strides().data()},
      [&](const std::vector<int64_t>&, const std::array<int64_t, 3>& off) {
        for (int64_t j = 0; j < len; ++j) slice[j] = S::load(in + off[0] + j * in_stride);
        std::iota(order.begin(), order.end(), 0);
        const int64_t at = pick(slice, order);
        S::store(vout + off[1], slice[at]);
        iout[off[2]] = at;
      },
      self.dim() == 0 ? -1 : dim);
}

// Moves the k-th smallest (0-based) of `slice[order[...]]` to order[k]:
// the classic median-of-three quickselect, which ATen's kthvalue runs too,
// so among equal values the same position comes out.
template <typename C>
void quick_select(const std::vector<C>& slice, std::vector<int64_t>& order, int64_t k) {
  auto gt = [&](int64_t a, int64_t b) { return greater(slice[order[a]], slice[order[b]]); };
  auto swap = [&](int64_t a, int64_t b) { std::swap(order[a], order[b]); };
  int64_t lo = 0, hi = static_cast<int64_t>(order.size()) - 1;
  while (hi > lo) {
    if (hi == lo + 1) {
      if (gt(lo, hi)) swap(lo, hi);
      return;
    }
    // The median of lo, the middle and hi to lo; the smaller to lo + 1, the larger to hi.
    swap(lo + (hi - lo) / 2, lo + 1);
    if (gt(lo + 1, hi)) swap(lo + 1, hi);
    if (gt(lo, hi)) swap(lo, hi);
    if (gt(lo + 1, lo)) swap(lo + 1, lo);
    int64_t i = lo + 1, j = hi;
    const int64_t pivot = order[lo];
    auto pivot_gt = [&](int64_t b) { return greater(slice[pivot], slice[order[b]]); };
    auto gt_pivot = [&](int64_t a) { return greater(slice[order[a]], slice[pivot]); };
    while (true) {
      do ++i;
      while (pivot_gt(i));
      do --j;
      while (gt_pivot(j));
      if (j < i) break;
      swap(i, j);
    }
    swap(lo, j);
    if (j <= k) lo = i;
    if (j >= k) hi = j - 1;
  }
}

// The k-th smallest (1-based) of each slice and its position.
template <typename T>
void kth_smallest(const SlimTensor& self, int64_t dim, int64_t k, const Reduced& out) {
  pick_along<T>(self, dim, out, [k](const auto& slice, std::vector<int64_t>& order) {
    quick_select(slice, order, k - 1);
    return order[k - 1];
  });
}

// The most frequent value of each slice (the smallest of equally frequent
// ones, NaNs counted as one value) and its last position.
template <typename T>
void most_frequent(const SlimTensor& self, int64_t dim, const Reduced& out) {
  pick_along<T>(self, dim, out, [](const auto& slice, std::vector<int64_t>& order) {
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return before(slice, a, b); });
    int64_t best = order[0], best_count = 0;
    for (size_t start = 0; start < order.size();) {
      size_t end = start + 1;
      while (end < order.size() && !greater(slice[order[end]], slice[order[start]])) ++end;
      const int64_t count = static_cast<int64_t>(end - start);
      if (count > best_count) {
        best_count = count;
        best = order[end - 1];
      }
      start = end;
    }
    return best;
  });
}

// The lower median of every element (median: NaN if any is; nanmedian: of
// the others, NaN if none is left).
template <typename T>
SlimTensor whole_median(const SlimTensor& self, bool ignore_nan) {
  using S = Scalar<T>;
  using C = typename S::Compute;
  std::vector<C> all;
  all.reserve(static_cast<size_t>(self.numel()));
  bool saw_nan = false;
  const T* in = static_cast<const T*>(self.data_ptr());
  for_each_offset(self, [&](int64_t off) {
    const C v = S::load(in + off);
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(v)) {
        saw_nan = true;
        return;
      }
    }
    all.push_back(v);
  });
  SlimTensor out =
      SlimTensor::empty(nullptr, nullptr, 0, self.dtype(), self.device_type(), self.device_index());
  T* dst = static_cast<T*>(out.data_ptr());
  if (all.empty() || (saw_nan && !ignore_nan)) {
    if constexpr (!std::is_floating_point_v<C>) {
      throw ShimError("median of an empty integer tensor");
    } else {
      S::store(dst, std::numeric_limits<C>::quiet_NaN());
      return out;
    }
  }
  auto middle = all.begin() + (all.size() - 1) / 2;
  std::nth_element(all.begin(), middle, all.end());
  S::store(dst, *middle);
  return out;
}

}  // namespace
}  // namespace shimkit

using shimkit::as_tensor;
using shimkit::check_out;
using shimkit::ShimError;
using shimkit::SlimTensor;
using shimkit::to_handle;

extern "C" {

AOTITorchError aoti_torch_cpu_topk(AtenTensorHandle self, int64_t k, int64_t dim, int32_t largest,
                                   int32_t sorted, AtenTensorHandle* ret0, AtenTensorHandle* ret1) {
  (void)sorted;  // results are always sorted, which "unsorted" allows
  return SHIMKIT_GUARD({
    check_out(ret0);
    check_out(ret1);
    const SlimTensor& t = as_tensor(self);
    const int64_t d = shimkit::wrap_dim(dim, t.dim());
    const int64_t len = shimkit::length_along(t, d);
    if (k < 0 || k > len) throw ShimError("k " + std::to_string(k) + " out of range");
    std::vector<int64_t> sizes = t.sizes().vec();
    if (t.dim() > 0) sizes[d] = k;
    SlimTensor values = SlimTensor::empty(sizes.data(), nullptr, t.dim(), t.dtype(),
                                          t.device_type(), t.device_index());
    SlimTensor indices = SlimTensor::empty(sizes.data(), nullptr, t.dim(), shimkit::dtype::kInt64,
                                           t.device_type(), t.device_index());
    if (k > 0) shimkit::dispatch(t, d, k, largest != 0, false, values, indices);
    *ret0 = to_handle(std::move(values));
    *ret1 = to_handle(std::move(indices));
  });
}

AOTITorchError aoti_torch_cpu_sort_stable(AtenTensorHandle self, int32_t* stable, int64_t dim,
                                          int32_t descending, AtenTensorHandle* ret0,
                                          AtenTensorHandle* ret1) {
  (void)stable;  // always stable: a valid answer for stable=false too
  return SHIMKIT_GUARD({
    check_out(ret0);
    check_out(ret1);
    const SlimTensor& t = as_tensor(self);
    const int64_t d = shimkit::wrap_dim(dim, t.dim());
    const int64_t len = shimkit::length_along(t, d);
    const std::vector<int64_t> strides =
        shimkit::dense_strides_like(t.sizes().vec(), t.strides().vec());
    SlimTensor values = SlimTensor::empty(t.sizes().data(), strides.data(), t.dim(), t.dtype(),
                                          t.device_type(), t.device_index());
    SlimTensor indices =
        SlimTensor::empty(t.sizes().data(), strides.data(), t.dim(), shimkit::dtype::kInt64,
                          t.device_type(), t.device_index());
    if (t.numel() > 0) shimkit::dispatch(t, d, len, descending != 0, true, values, indices);
    *ret0 = to_handle(std::move(values));
    *ret1 = to_handle(std::move(indices));
  });
}

AOTITorchError aoti_torch_cpu_kthvalue(AtenTensorHandle self, int64_t k, int64_t dim,
                                       int32_t keepdim, AtenTensorHandle* ret0,
                                       AtenTensorHandle* ret1) {
  return SHIMKIT_GUARD({
    check_out(ret0);
    check_out(ret1);
    const SlimTensor& t = as_tensor(self);
    const int64_t d = shimkit::wrap_dim(dim, t.dim());
    const int64_t len = shimkit::length_along(t, d);
    if (k < 1 || k > len) {
      throw ShimError("kthvalue: k " + std::to_string(k) + " out of range for a dimension of " +
                      std::to_string(len));
    }
    shimkit::Reduced out = shimkit::reduced_outputs(t, d);
    shimkit::dispatch_numeric(t.dtype(), "kthvalue", [&](auto tag) {
      shimkit::kth_smallest<decltype(tag)>(t, d, k, out);
    });
    shimkit::hand_out(std::move(out), d, keepdim != 0, ret0, ret1);
  });
}

AOTITorchError aoti_torch_cpu_mode(AtenTensorHandle self, int64_t dim, int32_t keepdim,
                                   AtenTensorHandle* ret0, AtenTensorHandle* ret1) {
  return SHIMKIT_GUARD({
    check_out(ret0);
    check_out(ret1);
    const SlimTensor& t = as_tensor(self);
    const int64_t d = shimkit::wrap_dim(dim, t.dim());
    if (t.dim() > 0 && t.sizes()[d] == 0) throw ShimError("mode: the dimension is empty");
    shimkit::Reduced out = shimkit::reduced_outputs(t, d);
    shimkit::dispatch_numeric_or_bool(
        t.dtype(), "mode", [&](auto tag) { shimkit::most_frequent<decltype(tag)>(t, d, out); });
    shimkit::hand_out(std::move(out), d, keepdim != 0, ret0, ret1);
  });
}

AOTITorchError aoti_torch_cpu_median(AtenTensorHandle self, AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    check_out(ret0);
    const SlimTensor& t = as_tensor(self);
    *ret0 = to_handle(shimkit::dispatch_numeric(t.dtype(), "median", [&](auto tag) {
      return shimkit::whole_median<decltype(tag)>(t, /*ignore_nan=*/false);
    }));
  });
}

AOTITorchError aoti_torch_cpu_nanmedian(AtenTensorHandle self, AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    check_out(ret0);
    const SlimTensor& t = as_tensor(self);
    *ret0 = to_handle(shimkit::dispatch_numeric(t.dtype(), "nanmedian", [&](auto tag) {
      return shimkit::whole_median<decltype(tag)>(t, /*ignore_nan=*/true);
    }));
  });
}

}  // extern "C"
