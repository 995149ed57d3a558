// Slim CPU GEMM ops: addmm/mm/bmm through OpenBLAS (its GEMV for one row or one
// column), large float32 ones through oneDNN's matmul (matmul_onednn.h), with the
// bias fused; float16/bfloat16 operands computed in float32.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "shims/float_compute.h"
#include "shims/matmul_onednn.h"
#include "shims/shim_internal.h"

namespace shimkit {

void blas_threads_for(double flops) {
  // OpenBLAS's pthread build wakes all its threads even for tiny GEMMs, which
  // costs microseconds; small problems run on the calling thread only.
  static const int configured = openblas_get_num_threads();
  static std::atomic<int> current{configured};
  const int want = flops < 2.0e6 ? 1 : configured;
  if (current.load(std::memory_order_relaxed) != want) {
    openblas_set_num_threads(want);
    current.store(want, std::memory_order_relaxed);
  }
}

namespace {

// A 2-D operand as BLAS sees it: base pointer, transpose flag, leading dim.
struct BlasOperand {
  const void* data;
  CBLAS_TRANSPOSE trans;
  int ld;
};

bool as_blas_operand(const SlimTensor& t, BlasOperand* op) {
  const int64_t rows = t.sizes()[0], cols = t.sizes()[1];
  const int64_t s0 = t.strides()[0], s1 = t.strides()[1];
  if ((s1 == 1 || cols == 1) && s0 >= std::max<int64_t>(cols, 1)) {
    *op = {t.data_ptr(), CblasNoTrans, static_cast<int>(s0)};
    return true;
  }
  if ((s0 == 1 || rows == 1) && s1 >= std::max<int64_t>(rows, 1)) {
    *op = {t.data_ptr(), CblasTrans, static_cast<int>(s1)};
    return true;
  }
  return false;
}

SlimTensor contiguous(const SlimTensor& t) {
  if (t.is_contiguous()) return t;
  SlimTensor out = SlimTensor::empty(t.sizes().data(), nullptr, t.dim(), t.dtype(), t.device_type(),
                                     t.device_index());
  copy_elements(out, t);
  return out;
}

void check_float(const SlimTensor& t, const char* what) {
  if (t.dtype() != dtype::kFloat32 && t.dtype() != dtype::kFloat64) {
    throw ShimError(std::string(what) + " must be float32 or float64, got " +
                    dtype_name(t.dtype()));
  }
}

void blas_gemv(CBLAS_TRANSPOSE trans, int64_t rows, int64_t cols, float alpha, const float* a,
               int lda, const float* x, int incx, float beta, float* y, int incy) {
  cblas_sgemv(CblasRowMajor, trans, static_cast<int>(rows), static_cast<int>(cols), alpha, a, lda,
              x, incx, beta, y, incy);
}

void blas_gemv(CBLAS_TRANSPOSE trans, int64_t rows, int64_t cols, double alpha, const double* a,
               int lda, const double* x, int incx, double beta, double* y, int incy) {
  cblas_dgemv(CblasRowMajor, trans, static_cast<int>(rows), static_cast<int>(cols), alpha, a, lda,
              x, incx, beta, y, incy);
}

// c = alpha * a @ b + beta * c where a has one row or b one column, as BLAS's GEMV: for
// those OpenBLAS's GEMM takes 4-6x as long (1 thread, this VM: a row by a 64x64 matrix
// 871 ns against 182, by a 1024x1024 one 261 us against 45), and such products are common:
// a Linear layer at batch 1, a recurrent step, a decoder's last token.
template <typename T>
void gemv_product(int64_t m, int64_t n, int64_t k, T alpha, const BlasOperand& oa,
                  const BlasOperand& ob, T beta, T* c, int ldc) {
  const T* a = static_cast<const T*>(oa.data);
  const T* b = static_cast<const T*>(ob.data);
  if (m == 1) {  // c's row = alpha * B^T a + beta * c's row; B is stored k x n, or n x k
    const int inc_a = oa.trans == CblasNoTrans ? 1 : oa.ld;
    if (ob.trans == CblasNoTrans) {
      blas_gemv(CblasTrans, k, n, alpha, b, ob.ld, a, inc_a, beta, c, 1);
    } else {
      blas_gemv(CblasNoTrans, n, k, alpha, b, ob.ld, a, inc_a, beta, c, 1);
    }
    return;
  }
  // n == 1: c's column = alpha * A b + beta * c's column; A is stored m x k, or k x m.
  const int inc_b = ob.trans == CblasNoTrans ? ob.ld : 1;
  if (oa.trans == CblasNoTrans) {
    blas_gemv(CblasNoTrans, m, k, alpha, a, oa.ld, b, inc_b, beta, c, ldc);
  } else {
    blas_gemv(CblasTrans, k, m, alpha, a, oa.ld, b, inc_b, beta, c, ldc);
  }
}

// c = alpha * a @ b + beta * c for 2-D views (any strides).
void gemm(const SlimTensor& a_in, const SlimTensor& b_in, const SlimTensor& c, double alpha,
          double beta) {
  if (a_in.dim() != 2 || b_in.dim() != 2 || c.dim() != 2) throw ShimError("gemm needs 2-D");
  const int64_t m = a_in.sizes()[0], k = a_in.sizes()[1], n = b_in.sizes()[1];
  if (b_in.sizes()[0] != k || c.sizes()[0] != m || c.sizes()[1] != n) {
    throw ShimError("gemm shape mismatch: [" + std::to_string(m) + "x" + std::to_string(k) +
                    "] @ [" + std::to_string(b_in.sizes()[0]) + "x" + std::to_string(n) + "]");
  }
  check_float(a_in, "mat1");
  if (a_in.dtype() != b_in.dtype() || a_in.dtype() != c.dtype()) {
    throw ShimError("gemm dtypes differ");
  }
  if (m == 0 || n == 0) return;
  // Operands BLAS reads in place are used as they are (no copy of the tensor
  // objects either); the others through dense copies. The copies are held by
  // pointer: an empty std::optional<SlimTensor> costs GCC a 176-byte zeroing
  // (rep stos) each, ~8% of a small MLP's run for its two GEMMs (perf).
  std::unique_ptr<SlimTensor> a_dense, b_dense, c_dense;
  BlasOperand oa{}, ob{}, oc{};
  if (!as_blas_operand(a_in, &oa)) {
    a_dense = std::make_unique<SlimTensor>(contiguous(a_in));
    as_blas_operand(*a_dense, &oa);
  }
  if (!as_blas_operand(b_in, &ob)) {
    b_dense = std::make_unique<SlimTensor>(contiguous(b_in));
    as_blas_operand(*b_dense, &ob);
  }
  const bool direct = as_blas_operand(c, &oc) && oc.trans == CblasNoTrans;
  if (!direct) {
    c_dense = std::make_unique<SlimTensor>(contiguous(c));
    as_blas_operand(*c_dense, &oc);
  }
  const SlimTensor& target = direct ? c : *c_dense;
  if (k == 0) {
    // Nothing to multiply: c = beta * c.
    SlimTensor zeros = SlimTensor::empty(target.sizes().data(), nullptr, 2, target.dtype(),
                                         target.device_type(), target.device_index());
    std::memset(zeros.data_ptr(), 0, static_cast<size_t>(m * n) * zeros.itemsize());
    if (beta == 0.0) copy_elements(target, zeros);
  } else {
    blas_threads_for(2.0 * static_cast<double>(m) * static_cast<double>(n) *
                     static_cast<double>(k));
    if (m == 1 || n == 1) {
      if (c.dtype() == dtype::kFloat32) {
        gemv_product<float>(m, n, k, static_cast<float>(alpha), oa, ob, static_cast<float>(beta),
                            static_cast<float*>(target.data_ptr()), oc.ld);
      } else {
        gemv_product<double>(m, n, k, alpha, oa, ob, beta, static_cast<double*>(target.data_ptr()),
                             oc.ld);
      }
    } else if (c.dtype() == dtype::kFloat32) {
      cblas_sgemm(CblasRowMajor, oa.trans, ob.trans, static_cast<int>(m), static_cast<int>(n),
                  static_cast<int>(k), static_cast<float>(alpha),
                  static_cast<const float*>(oa.data), oa.ld, static_cast<const float*>(ob.data),
                  ob.ld, static_cast<float>(beta), static_cast<float*>(target.data_ptr()), oc.ld);
    } else {
      cblas_dgemm(CblasRowMajor, oa.trans, ob.trans, static_cast<int>(m), static_cast<int>(n),
                  static_cast<int>(k), alpha, static_cast<const double*>(oa.data), oa.ld,
                  static_cast<const double*>(ob.data), ob.ld, beta,
                  static_cast<double*>(target.data_ptr()), oc.ld);
    }
  }
  if (!direct) copy_elements(c, target);
}

// Element strides of `self` broadcast to the 2-D `out` (0 where it broadcasts);
// throws unless it broadcasts.
std::pair<int64_t, int64_t> broadcast_strides(const SlimTensor& out, const SlimTensor& self) {
  const int64_t m = out.sizes()[0], n = out.sizes()[1];
  if (self.dim() == 1) {
    if (self.sizes()[0] != n && self.sizes()[0] != 1) throw ShimError("addmm bias mismatch");
    return {0, self.sizes()[0] == 1 ? 0 : self.strides()[0]};
  }
  if (self.dim() == 2) {
    if ((self.sizes()[0] != m && self.sizes()[0] != 1) ||
        (self.sizes()[1] != n && self.sizes()[1] != 1)) {
      throw ShimError("addmm self does not broadcast to out");
    }
    return {self.sizes()[0] == 1 ? 0 : self.strides()[0],
            self.sizes()[1] == 1 ? 0 : self.strides()[1]};
  }
  if (self.dim() != 0) throw ShimError("addmm self must have 0, 1 or 2 dimensions");
  return {0, 0};
}

// out = beta * broadcast(self) elementwise, for 2-D out.
template <typename T>
void fill_scaled_broadcast(const SlimTensor& out, const SlimTensor& self, double beta) {
  const int64_t m = out.sizes()[0], n = out.sizes()[1];
  const auto [s0, s1] = broadcast_strides(out, self);
  const int64_t o0 = out.strides()[0], o1 = out.strides()[1];
  const T* src = static_cast<const T*>(self.data_ptr());
  T* dst = static_cast<T*>(out.data_ptr());
  const T b = static_cast<T>(beta);
  for (int64_t i = 0; i < m; ++i) {
    T* row = dst + i * o0;
    const T* from = src + i * s0;
    if (o1 == 1 && s1 == 1 && beta == 1.0) {  // dense rows, a plain bias: copied
      std::memcpy(row, from, static_cast<size_t>(n) * sizeof(T));
    } else {
      for (int64_t j = 0; j < n; ++j) row[j * o1] = b * from[j * s1];
    }
  }
}

// Whether the bytes `a` and `b` reach can overlap (their address ranges meet).
bool may_overlap(const SlimTensor& a, const SlimTensor& b) {
  auto range = [](const SlimTensor& t) {
    const char* begin = static_cast<const char*>(t.data_ptr());
    int64_t span = 1;
    for (int64_t d = 0; d < t.dim(); ++d) span += (t.sizes()[d] - 1) * t.strides()[d];
    return std::make_pair(begin, begin + span * static_cast<int64_t>(t.itemsize()));
  };
  if (a.numel() == 0 || b.numel() == 0) return false;
  const auto [a0, a1] = range(a);
  const auto [b0, b1] = range(b);
  return a0 < b1 && b0 < a1;
}

// GEMMs of at least this many flops go to oneDNN. Below it its per-call cost
// (memory objects, primitive dispatch: 1-2 us) outweighs what its kernels save:
// on the AVX-512 VM, 1 thread, addmm 16x64x64 (0.13 MFLOP) took 3.4 us against
// OpenBLAS's 2.5, 32x64x128 (0.5 MFLOP) 8.3 against 8.3, 32x128x128 (1 MFLOP)
// 12.8 against 16.1, and a row times [1024, 1024]^T 268 against 749.
constexpr double kOnednnMinFlops = 1.0e6;

bool big_enough_for_onednn(const SlimTensor& a, const SlimTensor& b) {
  // A product with one row or one column is BLAS's GEMV (gemv_product), faster than both.
  if (a.sizes()[0] == 1 || b.sizes()[1] == 1) return false;
  return 2.0 * static_cast<double>(a.sizes()[0]) * static_cast<double>(a.sizes()[1]) *
             static_cast<double>(b.sizes()[1]) >=
         kOnednnMinFlops;
}

// out = beta * self + alpha * mat1 @ mat2 in float32/float64.
void addmm(const SlimTensor& o, const SlimTensor& s, const SlimTensor& mat1, const SlimTensor& mat2,
           double beta, double alpha) {
  if (o.dim() != 2) throw ShimError("addmm out must be 2-D");
  check_float(o, "out");
  if (s.dtype() != o.dtype()) throw ShimError("addmm self dtype differs from out");
  broadcast_strides(o, s);  // checks that self broadcasts
  // oneDNN computes a @ b + bias: alpha 1 and beta 0 or 1, with a bias it may
  // read while it writes out only when they are apart.
  if (alpha == 1.0 && (beta == 0.0 || (beta == 1.0 && !may_overlap(s, o))) && mat1.dim() == 2 &&
      mat2.dim() == 2 && big_enough_for_onednn(mat1, mat2) &&
      onednn_matmul(mat1, mat2, beta == 1.0 ? &s : nullptr, o)) {
    return;
  }
  if (beta != 0.0) {
    if (o.dtype() == dtype::kFloat32) {
      fill_scaled_broadcast<float>(o, s, beta);
    } else {
      fill_scaled_broadcast<double>(o, s, beta);
    }
  }
  gemm(mat1, mat2, o, alpha, beta != 0.0 ? 1.0 : 0.0);
}

void bmm(const SlimTensor& o, const SlimTensor& a, const SlimTensor& b) {
  if (o.dim() != 3 || a.dim() != 3 || b.dim() != 3) throw ShimError("bmm needs 3-D tensors");
  const int64_t batch = o.sizes()[0];
  if (a.sizes()[0] != batch || b.sizes()[0] != batch) throw ShimError("bmm batch mismatch");
  for (int64_t i = 0; i < batch; ++i) {
    const SlimTensor oi = o.view(o.sizes().data() + 1, o.strides().data() + 1, 2,
                                 o.storage_offset() + i * o.strides()[0]);
    const SlimTensor ai = a.view(a.sizes().data() + 1, a.strides().data() + 1, 2,
                                 a.storage_offset() + i * a.strides()[0]);
    const SlimTensor bi = b.view(b.sizes().data() + 1, b.strides().data() + 1, 2,
                                 b.storage_offset() + i * b.strides()[0]);
    gemm(ai, bi, oi, 1, 0);
  }
}

// out[i] = beta * self[i] + alpha * a[i] @ b[i]: an addmm per batch, `self`
// broadcast over the batch when it has no batch dimension of its own (or 1).
void baddbmm(const SlimTensor& o, const SlimTensor& s, const SlimTensor& a, const SlimTensor& b,
             double beta, double alpha) {
  if (o.dim() != 3 || a.dim() != 3 || b.dim() != 3) throw ShimError("baddbmm needs 3-D tensors");
  const int64_t batch = o.sizes()[0];
  if (a.sizes()[0] != batch || b.sizes()[0] != batch) throw ShimError("baddbmm batch mismatch");
  if (s.dim() == 3 && s.sizes()[0] != batch && s.sizes()[0] != 1) {
    throw ShimError("baddbmm self does not broadcast to out");
  }
  const auto batch_view = [](const SlimTensor& t, int64_t i) {
    return t.view(t.sizes().data() + 1, t.strides().data() + 1, 2,
                  t.storage_offset() + i * t.strides()[0]);
  };
  for (int64_t i = 0; i < batch; ++i) {
    const SlimTensor si = s.dim() == 3 ? batch_view(s, s.sizes()[0] == 1 ? 0 : i) : s;
    addmm(batch_view(o, i), si, batch_view(a, i), batch_view(b, i), beta, alpha);
  }
}

// out = beta * self + alpha * sum_i a[i] @ b[i]: the first product through
// addmm (self broadcast), the others accumulated into out.
void addbmm(const SlimTensor& o, const SlimTensor& s, const SlimTensor& a, const SlimTensor& b,
            double beta, double alpha) {
  if (a.dim() != 3 || b.dim() != 3) throw ShimError("addbmm needs 3-D batch1 and batch2");
  const int64_t batch = a.sizes()[0];
  if (b.sizes()[0] != batch) throw ShimError("addbmm batch mismatch");
  if (batch == 0) throw ShimError("addbmm: empty batch");
  const auto batch_view = [](const SlimTensor& t, int64_t i) {
    return t.view(t.sizes().data() + 1, t.strides().data() + 1, 2,
                  t.storage_offset() + i * t.strides()[0]);
  };
  addmm(o, s, batch_view(a, 0), batch_view(b, 0), beta, alpha);
  for (int64_t i = 1; i < batch; ++i) gemm(batch_view(a, i), batch_view(b, i), o, alpha, 1.0);
}

// Runs `op(out, operands...)`; float16/bfloat16 ones on float32 copies, the
// result rounded back into `out` once.
template <typename Op, typename... T>
void in_float_if_reduced(const SlimTensor& out, Op&& op, const T&... operands) {
  if (!is_reduced_float(out.dtype())) {
    op(out, operands...);
    return;
  }
  for (const SlimTensor* t : {&operands...}) {
    if (t->dtype() != out.dtype()) throw ShimError("operand dtypes differ");
  }
  const SlimTensor out32 = float32_copy(out);
  op(out32, float32_copy(operands)...);
  copy_elements(out, out32);
}

// addbmm's result, a new [n, p] tensor (float16/bfloat16 computed in float32).
SlimTensor new_addbmm(const SlimTensor& self, const SlimTensor& a, const SlimTensor& b, double beta,
                      double alpha) {
  if (a.dim() != 3 || b.dim() != 3) throw ShimError("addbmm needs 3-D batch1 and batch2");
  const int64_t sizes[2] = {a.sizes()[1], b.sizes()[2]};
  SlimTensor out =
      SlimTensor::empty(sizes, nullptr, 2, a.dtype(), a.device_type(), a.device_index());
  in_float_if_reduced(
      out,
      [&](const SlimTensor& o, const SlimTensor& s, const SlimTensor& x, const SlimTensor& y) {
        addbmm(o, s, x, y, beta, alpha);
      },
      self, a, b);
  return out;
}

}  // namespace
}  // namespace shimkit

using shimkit::as_tensor;
using shimkit::SlimTensor;

extern "C" {

AOTITorchError aoti_torch_cpu_addmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                        AtenTensorHandle mat1, AtenTensorHandle mat2, double beta,
                                        double alpha) {
  return SHIMKIT_GUARD({
    shimkit::in_float_if_reduced(
        as_tensor(out),
        [&](const SlimTensor& o, const SlimTensor& s, const SlimTensor& a, const SlimTensor& b) {
          shimkit::addmm(o, s, a, b, beta, alpha);
        },
        as_tensor(self), as_tensor(mat1), as_tensor(mat2));
  });
}

AOTITorchError aoti_torch_cpu_mm_out(AtenTensorHandle out, AtenTensorHandle self,
                                     AtenTensorHandle mat2) {
  return SHIMKIT_GUARD({
    shimkit::in_float_if_reduced(
        as_tensor(out),
        [](const SlimTensor& o, const SlimTensor& a, const SlimTensor& b) {
          if (a.dim() == 2 && b.dim() == 2 && shimkit::big_enough_for_onednn(a, b) &&
              shimkit::onednn_matmul(a, b, nullptr, o)) {
            return;
          }
          shimkit::gemm(a, b, o, 1, 0);
        },
        as_tensor(self), as_tensor(mat2));
  });
}

AOTITorchError aoti_torch_cpu_bmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                      AtenTensorHandle mat2) {
  return SHIMKIT_GUARD({
    shimkit::in_float_if_reduced(as_tensor(out), shimkit::bmm, as_tensor(self), as_tensor(mat2));
  });
}

AOTITorchError aoti_torch_cpu_baddbmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                          AtenTensorHandle batch1, AtenTensorHandle batch2,
                                          double beta, double alpha) {
  return SHIMKIT_GUARD({
    shimkit::in_float_if_reduced(
        as_tensor(out),
        [&](const SlimTensor& o, const SlimTensor& s, const SlimTensor& a, const SlimTensor& b) {
          shimkit::baddbmm(o, s, a, b, beta, alpha);
        },
        as_tensor(self), as_tensor(batch1), as_tensor(batch2));
  });
}

AOTITorchError aoti_torch_cpu_addbmm(AtenTensorHandle self, AtenTensorHandle batch1,
                                     AtenTensorHandle batch2, double beta, double alpha,
                                     AtenTensorHandle* ret0) {
  return SHIMKIT_GUARD({
    shimkit::check_out(ret0);
    *ret0 = shimkit::to_handle(
        shimkit::new_addbmm(as_tensor(self), as_tensor(batch1), as_tensor(batch2), beta, alpha));
  });
}

}  // extern "C"
