// Slim CPU scatter family: what Inductor emits for scatter / scatter_add /
// scatter_reduce / index_reduce when it does not generate the loop itself
// (aoti_torch_cpu_scatter_src_out, _scatter_value_out,
// _scatter_reduce_two_out, _index_reduce). out = self, then every position i
// of `index` sends src[i] (or `value`) to out at index[i] along `dim`,
// combined by the reduction. index_reduce is the scatter of whole slices: its
// 1-D index, expanded to the source's shape. Indices are checked ([0, size)),
// as in ATen.
#include <cstring>
#include <string>
#include <vector>

#include "shims/scalar_types.h"
#include "shims/shim_internal.h"
#include "shims/strided_loop.h"

namespace shimkit {
namespace {

enum class Reduce { kAssign, kSum, kProd, kMean, kAmax, kAmin };

Reduce parse_reduce(const char* name) {
  const std::string r = name != nullptr ? name : "";
  if (r == "sum") return Reduce::kSum;
  if (r == "prod") return Reduce::kProd;
  if (r == "mean") return Reduce::kMean;
  if (r == "amax") return Reduce::kAmax;
  if (r == "amin") return Reduce::kAmin;
  throw ShimError("scatter_reduce: unknown reduction '" + r + "'");
}

void check_scatter_shapes(const SlimTensor& self, int64_t dim, const SlimTensor& index,
                          const SlimTensor* src) {
  if (index.dtype() != dtype::kInt64) throw ShimError("scatter index must be int64");
  if (index.dim() != self.dim() || (src != nullptr && src->dim() != self.dim())) {
    throw ShimError("scatter: self, index and src must have the same number of dimensions");
  }
  for (int64_t d = 0; d < index.dim(); ++d) {
    if (src != nullptr && index.sizes()[d] > src->sizes()[d]) {
      throw ShimError("scatter: index is larger than src at dim " + std::to_string(d));
    }
    if (d != dim && index.sizes()[d] > self.sizes()[d]) {
      throw ShimError("scatter: index is larger than self at dim " + std::to_string(d));
    }
  }
  if (src != nullptr && src->dtype() != self.dtype()) throw ShimError("scatter: dtypes differ");
}

// out (already holding self) reduce= src (or value) at index along dim.
template <typename T>
void scatter(const SlimTensor& out, int64_t dim, const SlimTensor& index, const SlimTensor* src,
             double value, Reduce reduce, bool include_self) {
  using S = Scalar<T>;
  using Acc = typename S::Compute;
  T* o = static_cast<T*>(out.data_ptr());
  const int64_t* idx = static_cast<const int64_t*>(index.data_ptr());
  const T* s = src != nullptr ? static_cast<const T*>(src->data_ptr()) : nullptr;
  const int64_t limit = out.dim() == 0 ? 1 : out.sizes()[dim];
  const int64_t out_dim_stride = out.dim() == 0 ? 0 : out.strides()[dim];
  const int64_t* src_strides = src != nullptr ? src->strides().data() : index.strides().data();
  // Out's strides with dim's stride zeroed: the target's offset minus dim's term.
  std::vector<int64_t> out_strides = out.strides().vec();
  if (out.dim() > 0) out_strides[dim] = 0;
  // Counts for mean, and which targets were touched (include_self = false).
  std::vector<int64_t> count;
  std::vector<uint8_t> touched;
  const bool needs_count = reduce == Reduce::kMean;
  const bool fresh = !include_self && reduce != Reduce::kAssign;
  const int64_t out_span = checked_span_elements(out.sizes().data(), out.strides().data(),
                                                 static_cast<size_t>(out.dim()));
  if (needs_count) count.assign(static_cast<size_t>(out_span), include_self ? 1 : 0);
  if (fresh) touched.assign(static_cast<size_t>(out_span), 0);
  for_each_position<3>(index.sizes().vec(),
                       {index.strides().data(), src_strides, out_strides.data()},
                       [&](const std::vector<int64_t>&, const std::array<int64_t, 3>& off) {
                         const int64_t target = idx[off[0]];
                         if (target < 0 || target >= limit) {
                           throw ShimError("scatter index " + std::to_string(target) +
                                           " out of bounds for size " + std::to_string(limit));
                         }
                         T* dst = o + off[2] + target * out_dim_stride;
                         const Acc x = s != nullptr ? S::load(s + off[1]) : static_cast<Acc>(value);
                         const int64_t slot = off[2] + target * out_dim_stride;
                         if (fresh && !touched[slot]) {
                           touched[slot] = 1;
                           S::store(dst, x);
                           if (needs_count) count[slot] = 1;
                           return;
                         }
                         const Acc cur = S::load(dst);
                         switch (reduce) {
                           case Reduce::kAssign:
                             S::store(dst, x);
                             break;
                           case Reduce::kSum:
                           case Reduce::kMean:
                             S::store(dst, static_cast<Acc>(cur + x));
                             break;
                           case Reduce::kProd:
                             S::store(dst, static_cast<Acc>(cur * x));
                             break;
                           case Reduce::kAmax:
                             S::store(dst, (x > cur || x != x) ? x : cur);
                             break;
                           case Reduce::kAmin:
                             S::store(dst, (x < cur || x != x) ? x : cur);
                             break;
                         }
                         if (needs_count) ++count[slot];
                       });
  if (needs_count) {
    for_each_offset(out, [&](int64_t off) {
      if (count[off] > 1) {
        const Acc n = static_cast<Acc>(count[off]);
        Acc v = S::load(o + off);
        if constexpr (std::is_integral_v<Acc>) {
          // ATen's integral mean rounds toward negative infinity.
          Acc q = v / n;
          if ((v % n != 0) && ((v < 0) != (n < 0))) --q;
          v = q;
        } else {
          v = v / n;
        }
        S::store(o + off, v);
      }
    });
  }
}

void run_scatter(const SlimTensor& out, const SlimTensor& self, int64_t dim,
                 const SlimTensor& index, const SlimTensor* src, double value, Reduce reduce,
                 bool include_self) {
  if (out.sizes() != self.sizes() || out.dtype() != self.dtype()) {
    throw ShimError("scatter: out must match self in sizes and dtype");
  }
  const int64_t d = wrap_dim(dim, self.dim());
  check_scatter_shapes(self, d, index, src);
  if (out.data_ptr() != self.data_ptr() || out.strides() != self.strides()) {
    copy_elements(out, self);
  }
  if (out.dtype() == dtype::kBool) {
    if (reduce != Reduce::kAssign) throw ShimError("scatter_reduce: bool tensors unsupported");
    scatter<uint8_t>(out, d, index, src, value != 0.0 ? 1.0 : 0.0, reduce, include_self);
    return;
  }
  dispatch_numeric(out.dtype(), "scatter", [&](auto tag) {
    scatter<decltype(tag)>(out, d, index, src, value, reduce, include_self);
  });
}

// index_reduce's 1-D `index` expanded along `dim` to `source`'s shape.
SlimTensor expand_index(const SlimTensor& index, const SlimTensor& source, int64_t dim) {
  if (index.dim() > 1) throw ShimError("index_reduce index must be 1-D");
  const int64_t n = index.dim() == 0 ? 1 : index.sizes()[0];
  if ((source.dim() == 0 ? 1 : source.sizes()[dim]) != n) {
    throw ShimError("index_reduce: source's size along dim must equal the index length");
  }
  SlimTensor out = SlimTensor::empty(source.sizes().data(), nullptr, source.dim(), dtype::kInt64,
                                     source.device_type(), source.device_index());
  const int64_t istride = index.dim() == 0 ? 0 : index.strides()[0];
  const int64_t* out_strides = out.strides().data();
  int64_t* dst = static_cast<int64_t*>(out.data_ptr());
  dispatch_index(index.dtype(), "index_reduce index", [&](auto tag) {
    const auto* src = static_cast<const decltype(tag)*>(index.data_ptr());
    for_each_position<1>(source.sizes().vec(), {out_strides},
                         [&](const std::vector<int64_t>& pos, const std::array<int64_t, 1>& off) {
                           const int64_t i = source.dim() == 0 ? 0 : pos[dim];
                           dst[off[0]] = static_cast<int64_t>(src[i * istride]);
                         });
  });
  return out;
}

}  // namespace
}  // namespace shimkit

extern "C" {

AOTITorchError aoti_torch_cpu_index_reduce(AtenTensorHandle self, int64_t dim,
                                           AtenTensorHandle index, AtenTensorHandle source,
                                           const char* reduce, int32_t include_self,
                                           AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    using shimkit::SlimTensor;
    shimkit::check_out(ret0);
    const SlimTensor& t = shimkit::as_tensor(self);
    const SlimTensor& src = shimkit::as_tensor(source);
    const int64_t d = shimkit::wrap_dim(dim, t.dim());
    const shimkit::Reduce r = shimkit::parse_reduce(reduce);
    if (r == shimkit::Reduce::kSum) throw shimkit::ShimError("index_reduce has no 'sum'");
    SlimTensor expanded = shimkit::expand_index(shimkit::as_tensor(index), src, d);
    SlimTensor out = SlimTensor::empty(t.sizes().data(), nullptr, t.dim(), t.dtype(),
                                       t.device_type(), t.device_index());
    shimkit::run_scatter(out, t, d, expanded, &src, 0.0, r, include_self != 0);
    *ret0 = shimkit::to_handle(std::move(out));
  });
}

AOTITorchError aoti_torch_cpu_scatter_src_out(AtenTensorHandle out, AtenTensorHandle self,
                                              int64_t dim, AtenTensorHandle index,
                                              AtenTensorHandle src) {
  return SHIMKIT_GUARD({
    const shimkit::SlimTensor& s = shimkit::as_tensor(src);
    shimkit::run_scatter(shimkit::as_tensor(out), shimkit::as_tensor(self), dim,
                         shimkit::as_tensor(index), &s, 0.0, shimkit::Reduce::kAssign, true);
  });
}

AOTITorchError aoti_torch_cpu_scatter_value_out(AtenTensorHandle out, AtenTensorHandle self,
                                                int64_t dim, AtenTensorHandle index, double value) {
  return SHIMKIT_GUARD({
    shimkit::run_scatter(shimkit::as_tensor(out), shimkit::as_tensor(self), dim,
                         shimkit::as_tensor(index), nullptr, value, shimkit::Reduce::kAssign, true);
  });
}

AOTITorchError aoti_torch_cpu_scatter_reduce_two_out(AtenTensorHandle out, AtenTensorHandle self,
                                                     int64_t dim, AtenTensorHandle index,
                                                     AtenTensorHandle src, const char* reduce,
                                                     int32_t include_self) {
  return SHIMKIT_GUARD({
    const shimkit::SlimTensor& s = shimkit::as_tensor(src);
    shimkit::run_scatter(shimkit::as_tensor(out), shimkit::as_tensor(self), dim,
                         shimkit::as_tensor(index), &s, 0.0, shimkit::parse_reduce(reduce),
                         include_self != 0);
  });
}

}  // extern "C"
