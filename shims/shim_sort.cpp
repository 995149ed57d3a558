// Slim CPU topk and stable sort along one dimension (NaN counts as the
// largest value, like ATen), for every numeric dtype and bool (float16 and
// bfloat16 compared as float).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <type_traits>
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

void dispatch(const SlimTensor& self, int64_t dim, int64_t k, bool largest, bool stable,
              const SlimTensor& values, const SlimTensor& indices) {
  dispatch_numeric_or_bool(self.dtype(), "sort", [&](auto tag) {
    select_sorted<decltype(tag)>(self, dim, k, largest, stable, values, indices);
  });
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
