// Slim CPU histogram: histc (torch.histc), which Inductor leaves to a
// fallback. As ATen's CPU kernel: `bins` equal-width bins over [min, max]
// (when min == max, over the data's own extremes; when those are equal too,
// over [min - 1, max + 1]); elements outside the range and NaNs are not
// counted, and max itself falls into the last bin. An element's bin is
// computed as ATen's histc computes it, (v - min) * bins / (max - min) in the
// input's dtype, truncated (no search among the edges: that is histogramdd's
// path), so elements on or near an edge land where ATen puts them. The
// counts have the input's dtype (float32 or float64), in a contiguous [bins]
// tensor.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "shims/shim_internal.h"
#include "shims/strided_loop.h"

namespace shimkit {
namespace {

template <typename T>
void histogram(const SlimTensor& x, int64_t bins, double min, double max, SlimTensor& out) {
  T* counts = static_cast<T*>(out.data_ptr());
  std::fill(counts, counts + bins, T(0));
  const int64_t n = x.numel();
  T low = static_cast<T>(min), high = static_cast<T>(max);
  if (low == high && n > 0) {
    low = std::numeric_limits<T>::infinity();
    high = -std::numeric_limits<T>::infinity();
    bool saw_nan = false;
    for_each_offset(x, [&](int64_t offset) {
      const T v = static_cast<const T*>(x.data_ptr())[offset];
      saw_nan = saw_nan || std::isnan(v);
      low = std::min(low, v);
      high = std::max(high, v);
    });
    // ATen's aminmax propagates NaN: the check below then refuses the range.
    if (saw_nan) low = high = std::numeric_limits<T>::quiet_NaN();
  }
  if (low == high) {
    low -= 1;
    high += 1;
  }
  if (!std::isfinite(low) || !std::isfinite(high)) {
    throw ShimError("histc: range of [" + std::to_string(low) + ", " + std::to_string(high) +
                    "] is not finite");
  }
  if (!(low < high)) throw ShimError("histc: max must be larger than min");
  for_each_offset(x, [&](int64_t offset) {
    const T v = static_cast<const T*>(x.data_ptr())[offset];
    if (!(v >= low && v <= high)) return;  // outside, or NaN
    int64_t pos = static_cast<int64_t>((v - low) * static_cast<T>(bins) / (high - low));
    if (pos == bins) pos -= 1;  // max itself: the last bin
    counts[pos] += 1;
  });
}

SlimTensor run_histc(const SlimTensor& x, int64_t bins, double min, double max) {
  if (x.dtype() != dtype::kFloat32 && x.dtype() != dtype::kFloat64) {
    throw ShimError(std::string("histc: only float32 and float64, got ") + dtype_name(x.dtype()));
  }
  if (bins <= 0) throw ShimError("histc: bins must be > 0, got " + std::to_string(bins));
  SlimTensor out =
      SlimTensor::empty(&bins, nullptr, 1, x.dtype(), x.device_type(), x.device_index());
  if (x.dtype() == dtype::kFloat32) {
    histogram<float>(x, bins, min, max, out);
  } else {
    histogram<double>(x, bins, min, max, out);
  }
  return out;
}

}  // namespace
}  // namespace shimkit

extern "C" {

AOTITorchError aoti_torch_cpu_histc(AtenTensorHandle self, int64_t bins, double min, double max,
                                    AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    *ret0 = shimkit::to_handle(shimkit::run_histc(shimkit::as_tensor(self), bins, min, max));
  });
}

}  // extern "C"
