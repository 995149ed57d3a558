// Slim CPU binary search: searchsorted (a 1-D sorted sequence, or one row per
// leading index of the values; optional sorter; side "left"/"right") and
// bucketize (1-D boundaries). Results are contiguous int64 (int32 on request),
// like ATen's.
#include <string>
#include <vector>

#include "shims/scalar_types.h"
#include "shims/shim_internal.h"
#include "shims/strided_loop.h"

namespace shimkit {
namespace {

struct SearchArgs {
  bool right = false;
  const SlimTensor* sorter = nullptr;
};

// For every element v of `values`: the first i in its row of `seq` with
// seq[i] >= v (left) or seq[i] > v (right).
template <typename T>
void search(const SlimTensor& seq, const SlimTensor& values, const SearchArgs& a,
            const SlimTensor& out) {
  using S = Scalar<T>;
  const int64_t len = seq.dim() == 0 ? 1 : seq.sizes()[seq.dim() - 1];
  const int64_t seq_stride = seq.dim() == 0 ? 0 : seq.strides()[seq.dim() - 1];
  const bool rows = seq.dim() > 1;
  const int64_t row_len = values.dim() == 0 ? 1 : values.sizes()[values.dim() - 1];
  const T* sd = static_cast<const T*>(seq.data_ptr());
  const T* vd = static_cast<const T*>(values.data_ptr());
  const int64_t* sorter =
      a.sorter != nullptr ? static_cast<const int64_t*>(a.sorter->data_ptr()) : nullptr;
  const int64_t sorter_stride =
      a.sorter != nullptr && a.sorter->dim() > 0 ? a.sorter->strides()[a.sorter->dim() - 1] : 0;
  int64_t flat = 0;
  for_each_position<2>(values.sizes().vec(), {values.strides().data(), out.strides().data()},
                       [&](const std::vector<int64_t>&, const std::array<int64_t, 2>& off) {
                         // Row of `seq` (and of the sorter) for this value: its leading index.
                         const int64_t row = rows ? flat / row_len : 0;
                         ++flat;
                         int64_t row_off = 0, sorter_off = 0;
                         if (rows) {
                           int64_t rest = row;
                           for (int64_t d = seq.dim() - 2; d >= 0; --d) {
                             const int64_t i = rest % seq.sizes()[d];
                             rest /= seq.sizes()[d];
                             row_off += i * seq.strides()[d];
                             if (a.sorter != nullptr) sorter_off += i * a.sorter->strides()[d];
                           }
                         }
                         auto at = [&](int64_t i) {
                           const int64_t k =
                               sorter != nullptr ? sorter[sorter_off + i * sorter_stride] : i;
                           return S::load(sd + row_off + k * seq_stride);
                         };
                         const auto v = S::load(vd + off[0]);
                         int64_t lo = 0, hi = len;
                         while (lo < hi) {
                           const int64_t mid = lo + (hi - lo) / 2;
                           const auto x = at(mid);
                           if (a.right ? !(v < x) : (x < v)) {
                             lo = mid + 1;
                           } else {
                             hi = mid;
                           }
                         }
                         if (out.dtype() == dtype::kInt32) {
                           static_cast<int32_t*>(out.data_ptr())[off[1]] = static_cast<int32_t>(lo);
                         } else {
                           static_cast<int64_t*>(out.data_ptr())[off[1]] = lo;
                         }
                       });
}

SlimTensor run_search(const SlimTensor& seq, const SlimTensor& values, bool out_int32,
                      const SearchArgs& a) {
  if (seq.dtype() != values.dtype()) throw ShimError("searchsorted: dtypes differ");
  if (seq.dim() > 1) {
    bool ok = seq.dim() == values.dim();
    for (int64_t d = 0; ok && d + 1 < seq.dim(); ++d) ok = seq.sizes()[d] == values.sizes()[d];
    if (!ok) {
      throw ShimError("searchsorted: the sorted sequence's leading dims must match the values'");
    }
  }
  if (a.sorter != nullptr) {
    if (a.sorter->dtype() != dtype::kInt64 || a.sorter->sizes() != seq.sizes()) {
      throw ShimError("searchsorted: sorter must be int64 and shaped like the sequence");
    }
    const int64_t len = seq.dim() == 0 ? 1 : seq.sizes()[seq.dim() - 1];
    const int64_t* s = static_cast<const int64_t*>(a.sorter->data_ptr());
    bool bad = false;
    for_each_offset(*a.sorter, [&](int64_t off) { bad = bad || s[off] < 0 || s[off] >= len; });
    if (bad) throw ShimError("searchsorted: sorter index out of range");
  }
  SlimTensor out = SlimTensor::empty(values.sizes().data(), nullptr, values.dim(),
                                     out_int32 ? dtype::kInt32 : dtype::kInt64,
                                     values.device_type(), values.device_index());
  if (values.numel() > 0) {
    dispatch_numeric(values.dtype(), "searchsorted",
                     [&](auto tag) { search<decltype(tag)>(seq, values, a, out); });
  }
  return out;
}

}  // namespace
}  // namespace shimkit

extern "C" {

AOTITorchError aoti_torch_cpu_searchsorted_Tensor(AtenTensorHandle sorted_sequence,
                                                  AtenTensorHandle self, int32_t out_int32,
                                                  int32_t right, const char** side,
                                                  AtenTensorHandle* sorter,
                                                  AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    shimkit::SearchArgs a;
    a.right = right != 0;
    if (side != nullptr && *side != nullptr) {
      const std::string s = *side;
      if (s != "left" && s != "right") throw shimkit::ShimError("side must be left or right");
      if (a.right && s == "left") throw shimkit::ShimError("side 'left' contradicts right=True");
      a.right = s == "right";
    }
    if (sorter != nullptr && *sorter != nullptr) a.sorter = &shimkit::as_tensor(*sorter);
    *ret0 = shimkit::to_handle(shimkit::run_search(shimkit::as_tensor(sorted_sequence),
                                                   shimkit::as_tensor(self), out_int32 != 0, a));
  });
}

AOTITorchError aoti_torch_cpu_bucketize_Tensor(AtenTensorHandle self, AtenTensorHandle boundaries,
                                               int32_t out_int32, int32_t right,
                                               AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    const shimkit::SlimTensor& b = shimkit::as_tensor(boundaries);
    if (b.dim() != 1) throw shimkit::ShimError("bucketize: boundaries must be 1-D");
    shimkit::SearchArgs a;
    a.right = right != 0;
    *ret0 = shimkit::to_handle(shimkit::run_search(b, shimkit::as_tensor(self), out_int32 != 0, a));
  });
}

}  // extern "C"
