// Slim CPU pairwise distances: _cdist_forward (torch.cdist) and
// _pdist_forward (F.pdist), which Inductor leaves to fallbacks. x1 [*, R1, M] and x2 [*, R2, M]
// give [*, R1, R2], the batch dimensions broadcast. As ATen's CPU kernel: p = 0 counts differing
// coordinates, 1 sums absolute differences, inf takes the largest, other p
// take the p-norm; for p = 2 with more than 25 rows on a side (or
// compute_mode 1, never with 2) the distance comes from dot products,
// sqrt(max(|x|^2 + |y|^2 - 2 x.y, 1e-30)), which is what ATen's matmul path
// computes (so distances agree in their rounding too, not only in value).
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "shims/scalar_types.h"
#include "shims/shim_internal.h"
#include "shims/strided_loop.h"

namespace shimkit {
namespace {

// ATen's compute_mode: 0 (default) uses dot products for p = 2 past 25 rows.
constexpr int64_t kMmIfNecessary = 0;
constexpr int64_t kAlwaysMm = 1;
constexpr int64_t kNeverMm = 2;
constexpr int64_t kMmRowThreshold = 25;

template <typename T>
T distance(const T* a, int64_t as, const T* b, int64_t bs, int64_t m, double p, bool by_dot) {
  if (by_dot) {
    T dot = 0, aa = 0, bb = 0;
    for (int64_t k = 0; k < m; ++k) {
      const T x = a[k * as], y = b[k * bs];
      dot += x * y;
      aa += x * x;
      bb += y * y;
    }
    return std::sqrt(std::max<T>(aa + bb - 2 * dot, static_cast<T>(1e-30)));
  }
  T acc = 0;
  for (int64_t k = 0; k < m; ++k) {
    const T d = std::abs(a[k * as] - b[k * bs]);
    if (p == 0) {
      acc += d != 0 ? 1 : 0;
    } else if (p == 1) {
      acc += d;
    } else if (p == 2) {
      acc += d * d;
    } else if (std::isinf(p)) {
      acc = std::max(acc, d);
    } else {
      acc += static_cast<T>(std::pow(d, p));
    }
  }
  if (p == 2) return std::sqrt(acc);
  if (p == 0 || p == 1 || std::isinf(p)) return acc;
  return static_cast<T>(std::pow(acc, 1.0 / p));
}

template <typename T>
void cdist(const SlimTensor& x1, const SlimTensor& x2, const SlimTensor& out,
           const std::vector<int64_t>& batch, const std::vector<int64_t>& s1,
           const std::vector<int64_t>& s2, double p, bool by_dot) {
  const int64_t nd1 = x1.dim(), nd2 = x2.dim();
  const int64_t r1 = x1.sizes()[nd1 - 2], r2 = x2.sizes()[nd2 - 2], m = x1.sizes()[nd1 - 1];
  const int64_t a_row = x1.strides()[nd1 - 2], a_col = x1.strides()[nd1 - 1];
  const int64_t b_row = x2.strides()[nd2 - 2], b_col = x2.strides()[nd2 - 1];
  const T* a = static_cast<const T*>(x1.data_ptr());
  const T* b = static_cast<const T*>(x2.data_ptr());
  T* dst = static_cast<T*>(out.data_ptr());
  int64_t block = 0;
  for_each_position<2>(batch, {s1.data(), s2.data()},
                       [&](const std::vector<int64_t>&, const std::array<int64_t, 2>& off) {
                         T* o = dst + block * r1 * r2;
                         for (int64_t i = 0; i < r1; ++i) {
                           for (int64_t j = 0; j < r2; ++j) {
                             o[i * r2 + j] =
                                 distance<T>(a + off[0] + i * a_row, a_col, b + off[1] + j * b_row,
                                             b_col, m, p, by_dot);
                           }
                         }
                         ++block;
                       });
}

SlimTensor run_cdist(const SlimTensor& x1, const SlimTensor& x2, double p,
                     const int64_t* compute_mode) {
  if (x1.dim() < 2 || x2.dim() < 2) throw ShimError("cdist: x1 and x2 need at least 2 dimensions");
  if (x1.dtype() != x2.dtype()) throw ShimError("cdist: x1 and x2 differ in dtype");
  if (x1.dtype() != dtype::kFloat32 && x1.dtype() != dtype::kFloat64) {
    throw ShimError(std::string("cdist: only float32 and float64, got ") + dtype_name(x1.dtype()));
  }
  const int64_t m = x1.sizes()[x1.dim() - 1];
  if (x2.sizes()[x2.dim() - 1] != m) {
    throw ShimError("cdist: x1 and x2 differ in their last dimension (" + std::to_string(m) +
                    " against " + std::to_string(x2.sizes()[x2.dim() - 1]) + ")");
  }
  if (!(p >= 0)) throw ShimError("cdist: p must be non-negative");
  const int64_t mode = compute_mode != nullptr ? *compute_mode : kMmIfNecessary;
  if (mode != kMmIfNecessary && mode != kAlwaysMm && mode != kNeverMm) {
    throw ShimError("cdist: compute_mode must be 0, 1 or 2, got " + std::to_string(mode));
  }
  const int64_t r1 = x1.sizes()[x1.dim() - 2], r2 = x2.sizes()[x2.dim() - 2];
  const bool by_dot =
      p == 2 && (mode == kAlwaysMm ||
                 (mode == kMmIfNecessary && (r1 > kMmRowThreshold || r2 > kMmRowThreshold)));
  // The batch dimensions, broadcast (right-aligned), and each input's strides over them.
  const int64_t b1 = x1.dim() - 2, b2 = x2.dim() - 2, nb = std::max(b1, b2);
  std::vector<int64_t> batch(static_cast<size_t>(nb), 1), s1(batch.size(), 0), s2(batch.size(), 0);
  for (int64_t d = 0; d < nb; ++d) {
    const int64_t i1 = d - (nb - b1), i2 = d - (nb - b2);
    const int64_t n1 = i1 >= 0 ? x1.sizes()[i1] : 1, n2 = i2 >= 0 ? x2.sizes()[i2] : 1;
    if (n1 != n2 && n1 != 1 && n2 != 1) throw ShimError("cdist: batch dimensions do not broadcast");
    batch[static_cast<size_t>(d)] = std::max(n1, n2);
    if (i1 >= 0 && n1 != 1) s1[static_cast<size_t>(d)] = x1.strides()[i1];
    if (i2 >= 0 && n2 != 1) s2[static_cast<size_t>(d)] = x2.strides()[i2];
  }
  std::vector<int64_t> sizes = batch;
  sizes.insert(sizes.end(), {r1, r2});
  SlimTensor out = SlimTensor::empty(sizes.data(), nullptr, static_cast<int64_t>(sizes.size()),
                                     x1.dtype(), x1.device_type(), x1.device_index());
  if (out.numel() == 0) return out;
  if (m == 0) {
    std::fill_n(static_cast<char*>(out.data_ptr()), out.numel() * out.itemsize(), 0);
    return out;
  }
  if (x1.dtype() == dtype::kFloat32) {
    cdist<float>(x1, x2, out, batch, s1, s2, p, by_dot);
  } else {
    cdist<double>(x1, x2, out, batch, s1, s2, p, by_dot);
  }
  return out;
}

// F.pdist: the distances between rows i < j of an [N, M] input, in row-major
// order of (i, j), N * (N - 1) / 2 of them; computed directly for every p (as
// ATen's pdist kernel does: no dot-product form).
SlimTensor run_pdist(const SlimTensor& x, double p) {
  if (x.dim() != 2)
    throw ShimError("pdist: expected a 2-D input, got " + std::to_string(x.dim()) + "-D");
  if (x.dtype() != dtype::kFloat32 && x.dtype() != dtype::kFloat64) {
    throw ShimError(std::string("pdist: only float32 and float64, got ") + dtype_name(x.dtype()));
  }
  if (!(p >= 0)) throw ShimError("pdist: p must be non-negative");
  const int64_t n = x.sizes()[0], m = x.sizes()[1];
  const int64_t count = n * (n - 1) / 2;
  SlimTensor out =
      SlimTensor::empty(&count, nullptr, 1, x.dtype(), x.device_type(), x.device_index());
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* a = static_cast<const T*>(x.data_ptr());
    T* dst = static_cast<T*>(out.data_ptr());
    const int64_t row = x.strides()[0], col = x.strides()[1];
    int64_t k = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = i + 1; j < n; ++j) {
        dst[k++] = m == 0 ? T(0) : distance<T>(a + i * row, col, a + j * row, col, m, p, false);
      }
    }
  };
  if (x.dtype() == dtype::kFloat32) {
    run(float{});
  } else {
    run(double{});
  }
  return out;
}

}  // namespace
}  // namespace shimkit

extern "C" {

AOTITorchError aoti_torch_cpu__cdist_forward(AtenTensorHandle x1, AtenTensorHandle x2, double p,
                                             int64_t* compute_mode, AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    *ret0 = shimkit::to_handle(
        shimkit::run_cdist(shimkit::as_tensor(x1), shimkit::as_tensor(x2), p, compute_mode));
  });
}

AOTITorchError aoti_torch_cpu__pdist_forward(AtenTensorHandle self, double p,
                                             AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    *ret0 = shimkit::to_handle(shimkit::run_pdist(shimkit::as_tensor(self), p));
  });
}

}  // extern "C"
