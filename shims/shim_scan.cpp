// Slim CPU scans along one dimension: cumsum, cumprod (optional output dtype;
// integers and bools default to int64, as in ATen), logcumsumexp, and cummax
// and cummin with the index of each running extreme. Outputs are contiguous
// (the meta functions' layout). Sums and products accumulate in double or
// int64 like ATen's CPU kernels, and round once per element.
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "shims/scalar_types.h"
#include "shims/shim_internal.h"
#include "shims/strided_loop.h"

namespace shimkit {
namespace {

enum class Scan { kSum, kProd, kLogSumExp };

bool is_integral_or_bool(int32_t dt) {
  return dt == dtype::kBool || dt == dtype::kUInt8 || dt == dtype::kInt8 || dt == dtype::kInt16 ||
         dt == dtype::kInt32 || dt == dtype::kInt64;
}

double log_add_exp(double a, double b) {
  if (std::isinf(a) && a == b) return a;  // both -inf or both +inf
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(-std::abs(a - b)));
}

// out[..., i, ...] = scan(in[..., 0..i, ...]) along dim, In -> Out element types.
template <typename In, typename Out>
void scan(const SlimTensor& in, const SlimTensor& out, int64_t dim, Scan op) {
  using Acc =
      std::conditional_t<std::is_integral_v<typename Scalar<Out>::Compute>, int64_t, double>;
  const In* src = static_cast<const In*>(in.data_ptr());
  Out* dst = static_cast<Out*>(out.data_ptr());
  const int64_t len = in.dim() == 0 ? 1 : in.sizes()[dim];
  const int64_t is = in.dim() == 0 ? 0 : in.strides()[dim];
  const int64_t os = out.dim() == 0 ? 0 : out.strides()[dim];
  for_each_position<2>(
      in.sizes().vec(), {in.strides().data(), out.strides().data()},
      [&](const std::vector<int64_t>&, const std::array<int64_t, 2>& off) {
        Acc acc = op == Scan::kSum    ? Acc(0)
                  : op == Scan::kProd ? Acc(1)
                                      : static_cast<Acc>(-std::numeric_limits<double>::infinity());
        for (int64_t i = 0; i < len; ++i) {
          const Acc x = static_cast<Acc>(Scalar<In>::load(src + off[0] + i * is));
          if (op == Scan::kSum) {
            acc += x;
          } else if (op == Scan::kProd) {
            acc *= x;
          } else {
            acc = static_cast<Acc>(log_add_exp(static_cast<double>(acc), static_cast<double>(x)));
          }
          Scalar<Out>::store(dst + off[1] + i * os,
                             static_cast<typename Scalar<Out>::Compute>(acc));
        }
      },
      in.dim() == 0 ? -1 : dim);
}

template <typename In>
void scan_to(const SlimTensor& in, const SlimTensor& out, int64_t dim, Scan op) {
  if (out.dtype() == dtype::kBool) throw ShimError("cannot accumulate into bool");
  dispatch_numeric(out.dtype(), "scan output",
                   [&](auto tag) { scan<In, decltype(tag)>(in, out, dim, op); });
}

SlimTensor run_scan(AtenTensorHandle self, int64_t dim, const int32_t* dtype_opt, Scan op) {
  const SlimTensor& in = as_tensor(self);
  const int64_t d = wrap_dim(dim, in.dim());
  int32_t out_dtype = in.dtype();
  if (dtype_opt != nullptr) {
    out_dtype = *dtype_opt;
  } else if (op != Scan::kLogSumExp && is_integral_or_bool(in.dtype())) {
    out_dtype = dtype::kInt64;
  }
  if (op == Scan::kLogSumExp && is_integral_or_bool(out_dtype)) {
    throw ShimError("logcumsumexp needs a floating dtype");
  }
  SlimTensor out = SlimTensor::empty(in.sizes().data(), nullptr, in.dim(), out_dtype,
                                     in.device_type(), in.device_index());
  dispatch_numeric_or_bool(in.dtype(), "scan input",
                           [&](auto tag) { scan_to<decltype(tag)>(in, out, d, op); });
  return out;
}

// Running maximum (or minimum) along dim and where it was last reached, as
// ATen's cummax_cummin_helper: ties move the index on, and a NaN, once seen,
// is the extreme from there (each later NaN moving the index).
template <typename T, typename Better>
void running_extreme(const SlimTensor& in, const SlimTensor& values, const SlimTensor& indices,
                     int64_t dim, Better better) {
  using C = typename Scalar<T>::Compute;
  const T* src = static_cast<const T*>(in.data_ptr());
  T* dst = static_cast<T*>(values.data_ptr());
  int64_t* idx = static_cast<int64_t*>(indices.data_ptr());
  const bool scalar = in.dim() == 0;
  const int64_t len = scalar ? 1 : in.sizes()[dim];
  const int64_t is = scalar ? 0 : in.strides()[dim];
  const int64_t vs = scalar ? 0 : values.strides()[dim];
  const int64_t xs = scalar ? 0 : indices.strides()[dim];
  const auto is_nan = [](C v) { return v != v; };
  for_each_position<3>(
      in.sizes().vec(), {in.strides().data(), values.strides().data(), indices.strides().data()},
      [&](const std::vector<int64_t>&, const std::array<int64_t, 3>& off) {
        C best = Scalar<T>::load(src + off[0]);
        int64_t at = 0;
        for (int64_t i = 0; i < len; ++i) {
          const C v = Scalar<T>::load(src + off[0] + i * is);
          if (is_nan(v) || (!is_nan(best) && better(v, best))) {
            best = v;
            at = i;
          }
          Scalar<T>::store(dst + off[1] + i * vs, best);
          idx[off[2] + i * xs] = at;
        }
      },
      scalar ? -1 : dim);
}

std::pair<SlimTensor, SlimTensor> run_running_extreme(AtenTensorHandle self, int64_t dim,
                                                      bool maximum) {
  const SlimTensor& in = as_tensor(self);
  const int64_t d = wrap_dim(dim, in.dim());
  SlimTensor values = SlimTensor::empty(in.sizes().data(), nullptr, in.dim(), in.dtype(),
                                        in.device_type(), in.device_index());
  SlimTensor indices = SlimTensor::empty(in.sizes().data(), nullptr, in.dim(), dtype::kInt64,
                                         in.device_type(), in.device_index());
  const auto scan = [&](auto tag) {
    using T = decltype(tag);
    using C = typename Scalar<T>::Compute;
    if (maximum) {
      running_extreme<T>(in, values, indices, d, [](C a, C b) { return a >= b; });
    } else {
      running_extreme<T>(in, values, indices, d, [](C a, C b) { return a <= b; });
    }
  };
  dispatch_numeric_or_bool(in.dtype(), maximum ? "cummax" : "cummin", scan);
  return {std::move(values), std::move(indices)};
}

}  // namespace
}  // namespace shimkit

extern "C" {

AOTITorchError aoti_torch_cpu_cumsum(AtenTensorHandle self, int64_t dim, int32_t* dtype,
                                     AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    *ret0 = shimkit::to_handle(shimkit::run_scan(self, dim, dtype, shimkit::Scan::kSum));
  });
}

AOTITorchError aoti_torch_cpu_cumprod(AtenTensorHandle self, int64_t dim, int32_t* dtype,
                                      AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    *ret0 = shimkit::to_handle(shimkit::run_scan(self, dim, dtype, shimkit::Scan::kProd));
  });
}

AOTITorchError aoti_torch_cpu_logcumsumexp(AtenTensorHandle self, int64_t dim,
                                           AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    *ret0 = shimkit::to_handle(shimkit::run_scan(self, dim, nullptr, shimkit::Scan::kLogSumExp));
  });
}

AOTITorchError aoti_torch_cpu_cummax(AtenTensorHandle self, int64_t dim, AtenTensorHandle* ret0,
                                     AtenTensorHandle* ret1) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    shimkit::check_out(ret1);
    auto extreme = shimkit::run_running_extreme(self, dim, /*maximum=*/true);
    *ret0 = shimkit::to_handle(std::move(extreme.first));
    *ret1 = shimkit::to_handle(std::move(extreme.second));
  });
}

AOTITorchError aoti_torch_cpu_cummin(AtenTensorHandle self, int64_t dim, AtenTensorHandle* ret0,
                                     AtenTensorHandle* ret1) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    shimkit::check_out(ret1);
    auto extreme = shimkit::run_running_extreme(self, dim, /*maximum=*/false);
    *ret0 = shimkit::to_handle(std::move(extreme.first));
    *ret1 = shimkit::to_handle(std::move(extreme.second));
  });
}

}  // extern "C"
