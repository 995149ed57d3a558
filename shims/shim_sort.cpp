// Slim CPU topk and stable sort along one dimension (NaN counts as the
// largest value, like ATen).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "shims/shim_internal.h"

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

int64_t wrap_dim(int64_t dim, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);
  const int64_t w = dim < 0 ? dim + n : dim;
  if (w < 0 || w >= n) throw ShimError("dimension " + std::to_string(dim) + " out of range");
  return w;
}

// Calls fn(in_offset, out_offsets...) for every slice along `dim`.
template <typename F>
void for_each_slice(const std::vector<int64_t>& sizes, int64_t dim,
                    const std::vector<std::vector<int64_t>>& strides, F&& fn) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  int64_t count = 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (d != dim) count *= sizes[d];
  }
  std::vector<int64_t> offsets(strides.size());
  for (int64_t i = 0; i < count; ++i) {
    for (size_t s = 0; s < strides.size(); ++s) {
      int64_t off = 0;
      for (int64_t d = 0; d < nd; ++d) off += idx[d] * strides[s][d];
      offsets[s] = off;
    }
    fn(offsets);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (d == dim) continue;
      if (++idx[d] < sizes[d]) break;
      idx[d] = 0;
    }
  }
}

template <typename T>
void select_sorted(const SlimTensor& self, int64_t dim, int64_t k, bool largest, bool stable,
                   const SlimTensor& values, const SlimTensor& indices) {
  const int64_t len = self.dim() == 0 ? 1 : self.sizes()[dim];
  const int64_t in_stride = self.dim() == 0 ? 1 : self.strides()[dim];
  const int64_t v_stride = values.dim() == 0 ? 1 : values.strides()[dim];
  const int64_t i_stride = indices.dim() == 0 ? 1 : indices.strides()[dim];
  const T* in = static_cast<const T*>(self.data_ptr());
  T* vout = static_cast<T*>(values.data_ptr());
  int64_t* iout = static_cast<int64_t*>(indices.data_ptr());
  std::vector<int64_t> order(static_cast<size_t>(len));
  std::vector<T> slice(static_cast<size_t>(len));
  const std::vector<int64_t> sz = self.sizes().vec();
  for_each_slice(sz, dim, {self.strides().vec(), values.strides().vec(), indices.strides().vec()},
                 [&](const std::vector<int64_t>& off) {
                   for (int64_t j = 0; j < len; ++j) slice[j] = in[off[0] + j * in_stride];
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
                     vout[off[1] + j * v_stride] = slice[order[j]];
                     iout[off[2] + j * i_stride] = order[j];
                   }
                 });
}

void dispatch(const SlimTensor& self, int64_t dim, int64_t k, bool largest, bool stable,
              const SlimTensor& values, const SlimTensor& indices) {
  switch (self.dtype()) {
    case dtype::kFloat32:
      return select_sorted<float>(self, dim, k, largest, stable, values, indices);
    case dtype::kFloat64:
      return select_sorted<double>(self, dim, k, largest, stable, values, indices);
    case dtype::kInt32:
      return select_sorted<int32_t>(self, dim, k, largest, stable, values, indices);
    case dtype::kInt64:
      return select_sorted<int64_t>(self, dim, k, largest, stable, values, indices);
    default:
      throw ShimError(std::string("unsupported dtype ") + dtype_name(self.dtype()));
  }
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
    const int64_t len = t.dim() == 0 ? 1 : t.sizes()[d];
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
    const int64_t len = t.dim() == 0 ? 1 : t.sizes()[d];
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

}  // extern "C"
