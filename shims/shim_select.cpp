// Slim CPU selections whose output size depends on the data: nonzero and
// masked_select. Inductor leaves them to fallbacks and reads the size of what
// they return (an unbacked size in the exported program): detection-style
// post-processing (`boxes[scores > t]`, `torch.nonzero(mask)`) compiles to
// these. Semantics are ATen's: positions in row-major order, nonzero as
// int64 [count, ndim] (strides (1, count)), masked_select as a 1-D tensor of
// self's dtype over the broadcast of self and a boolean mask.
#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <vector>

#include "shims/scalar_types.h"
#include "shims/shim_internal.h"
#include "shims/strided_loop.h"

namespace shimkit {
namespace {

SlimTensor run_nonzero(const SlimTensor& in) {
  const int64_t ndim = in.dim();
  int64_t hits = 0;
  std::vector<int64_t> coords;  // ndim per hit: from the row-major position, any strides
  const auto visit = [&](auto tag) {
    using T = decltype(tag);
    const T* data = static_cast<const T*>(in.data_ptr());
    for_each_position<1>(in.sizes().vec(), {in.strides().data()},
                         [&](const std::vector<int64_t>& at, const std::array<int64_t, 1>& off) {
                           if (Scalar<T>::load(data + off[0]) != 0) {  // NaN counts
                             ++hits;
                             coords.insert(coords.end(), at.begin(), at.end());
                           }
                         });
  };
  dispatch_numeric_or_bool(in.dtype(), "nonzero", visit);
  // [hits, ndim] with strides (1, hits), as ATen's (and its meta function's): each
  // dimension's coordinates are contiguous. A 0-D input gives [1 or 0, 0].
  const std::array<int64_t, 2> sizes{hits, ndim};
  const std::array<int64_t, 2> strides{1, hits};
  SlimTensor out = SlimTensor::empty(sizes.data(), strides.data(), 2, dtype::kInt64,
                                     in.device_type(), in.device_index());
  auto* dst = static_cast<int64_t*>(out.data_ptr());
  for (int64_t i = 0; i < hits; ++i) {
    for (int64_t d = 0; d < ndim; ++d) dst[d * hits + i] = coords[i * ndim + d];
  }
  return out;
}

// The broadcast of two shapes (right-aligned, sizes equal or 1), ATen's rule.
std::vector<int64_t> broadcast_shape(const SlimTensor& a, const SlimTensor& b, const char* op) {
  const int64_t nd = std::max(a.dim(), b.dim());
  std::vector<int64_t> shape(static_cast<size_t>(nd), 1);
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t ia = d - (nd - a.dim()), ib = d - (nd - b.dim());
    const int64_t sa = ia >= 0 ? a.sizes()[ia] : 1, sb = ib >= 0 ? b.sizes()[ib] : 1;
    if (sa != sb && sa != 1 && sb != 1) {
      throw ShimError(std::string(op) + ": shapes do not broadcast (size " + std::to_string(sa) +
                      " against " + std::to_string(sb) + " at dimension " + std::to_string(d) +
                      ")");
    }
    shape[static_cast<size_t>(d)] = sa == 1 ? sb : sa;
  }
  return shape;
}

// `t`'s strides over the broadcast shape (0 where it is broadcast).
std::vector<int64_t> strides_over(const SlimTensor& t, const std::vector<int64_t>& shape) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  std::vector<int64_t> strides(shape.size(), 0);
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t at = d + (nd - t.dim());
    strides[static_cast<size_t>(at)] = t.sizes()[d] == 1 ? 0 : t.strides()[d];
  }
  return strides;
}

SlimTensor run_masked_select(const SlimTensor& in, const SlimTensor& mask) {
  if (mask.dtype() != dtype::kBool) {
    throw ShimError(std::string("masked_select: the mask must be bool, got ") +
                    dtype_name(mask.dtype()));
  }
  const std::vector<int64_t> shape = broadcast_shape(in, mask, "masked_select");
  const std::vector<int64_t> in_strides = strides_over(in, shape);
  const std::vector<int64_t> mask_strides = strides_over(mask, shape);
  const size_t itemsize = in.itemsize();
  const auto* src = static_cast<const char*>(in.data_ptr());
  const auto* keep = static_cast<const uint8_t*>(mask.data_ptr());
  std::vector<char> picked;
  for_each_position<2>(shape, {in_strides.data(), mask_strides.data()},
                       [&](const std::vector<int64_t>&, const std::array<int64_t, 2>& off) {
                         if (keep[off[1]] != 0) {
                           const char* from = src + off[0] * static_cast<int64_t>(itemsize);
                           picked.insert(picked.end(), from, from + itemsize);
                         }
                       });
  const int64_t count = static_cast<int64_t>(picked.size() / itemsize);
  SlimTensor out =
      SlimTensor::empty(&count, nullptr, 1, in.dtype(), in.device_type(), in.device_index());
  if (!picked.empty()) std::memcpy(out.data_ptr(), picked.data(), picked.size());
  return out;
}

}  // namespace
}  // namespace shimkit

using shimkit::as_tensor;

extern "C" {

AOTITorchError aoti_torch_cpu_nonzero(AtenTensorHandle self, AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    *ret0 = shimkit::to_handle(shimkit::run_nonzero(as_tensor(self)));
  });
}

AOTITorchError aoti_torch_cpu_masked_select(AtenTensorHandle self, AtenTensorHandle mask,
                                            AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    *ret0 = shimkit::to_handle(shimkit::run_masked_select(as_tensor(self), as_tensor(mask)));
  });
}

}  // extern "C"
