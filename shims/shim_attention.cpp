// Slim CPU scaled dot-product attention: the fallback Inductor emits for
// F.scaled_dot_product_attention on the CPU
// (aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu). Causal
// (top-left aligned, like ATen), additive float or boolean masks (broadcast),
// grouped-query heads, float32/float64 and float16/bfloat16 (computed in
// float). Per (batch, head) and block of query rows: scores = Q K^T through
// OpenBLAS (reading float32/float64 tensors in place), masked softmax with its
// log-sum-exp (softmax_rows.h), then P V through OpenBLAS into the output.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "shims/attention_geometry.h"
#include "shims/scalar_types.h"
#include "shims/shim_internal.h"
#include "shims/softmax_rows.h"

namespace shimkit {
namespace {

// Query rows per block: bounds the scores buffer to kRowBlock x kv_len.
constexpr int64_t kRowBlock = 256;
// Causal attention takes smaller blocks: block rows i0.. see only keys < i0 +
// rows, so the scores above the diagonal that no row sees are mostly never
// computed (with L = S = 128, 5/8 of the full Q K^T and P V work).
constexpr int64_t kCausalRowBlock = 32;

inline void gemm(CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha, const float* a, int lda,
                 const float* b, int ldb, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, alpha, a, lda, b, ldb, 0.0f, c, ldc);
}
inline void gemm(CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha, const double* a, int lda,
                 const double* b, int ldb, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, alpha, a, lda, b, ldb, 0.0, c, ldc);
}

// A [rows, cols] operand for BLAS: the tensor's own rows when its element type
// is the compute type and its last dim is dense (sdpa_constraint makes it so),
// else a dense Acc copy in `buffer`.
template <typename T, typename Acc>
const Acc* rows_of(const T* base, int64_t rs, int64_t cs, int64_t rows, int64_t cols,
                   std::vector<Acc>* buffer, int64_t* ld) {
  if constexpr (std::is_same_v<T, Acc>) {
    if (cs == 1 || cols == 1) {
      *ld = std::max<int64_t>(rs, cols);
      return base;
    }
  }
  buffer->resize(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c)
      (*buffer)[r * cols + c] = Scalar<T>::load(base + r * rs + c * cs);
  }
  *ld = cols;
  return buffer->data();
}

// row[j] += mask[j] for the mask row at `m` (element stride `ms`); a boolean
// mask adds 0 where true and -inf where false.
template <typename T, typename Acc>
void add_mask_row(Acc* row, int64_t n, const SlimTensor& mask, const char* m, int64_t ms) {
  if (mask.dtype() == dtype::kBool) {
    const uint8_t* keep = reinterpret_cast<const uint8_t*>(m);
    for (int64_t j = 0; j < n; ++j) {
      if (keep[j * ms] == 0) row[j] = -std::numeric_limits<Acc>::infinity();
    }
    return;
  }
  const T* add = reinterpret_cast<const T*>(m);
  for (int64_t j = 0; j < n; ++j) row[j] += static_cast<Acc>(Scalar<T>::load(add + j * ms));
}

template <typename T>
void attention(const SlimTensor& q, const SlimTensor& k, const SlimTensor& v,
               const SlimTensor* mask, bool causal, const AttentionShape& s, const SlimTensor& out,
               const SlimTensor& lse) {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int64_t L = s.q_len, S = s.kv_len, E = s.head_dim, Ev = s.value_dim;
  const int64_t group = s.heads / s.kv_heads;
  const bool has_mask = !s.mask_strides.empty();
  const int64_t block = causal ? kCausalRowBlock : kRowBlock;
  std::vector<Acc> qbuf, kbuf, vbuf, obuf(static_cast<size_t>(block * Ev));
  std::vector<Acc> scores(static_cast<size_t>(block * S));
  const T* qd = static_cast<const T*>(q.data_ptr());
  const T* kd = static_cast<const T*>(k.data_ptr());
  const T* vd = static_cast<const T*>(v.data_ptr());
  T* od = static_cast<T*>(out.data_ptr());
  Acc* ld = static_cast<Acc*>(lse.data_ptr());
  const auto &qs = q.strides(), &ks = k.strides(), &vs = v.strides(), &os = out.strides();
  const auto& ls = lse.strides();
  const std::vector<int64_t>& ms = s.mask_strides;
  const char* mask_base = has_mask ? static_cast<const char*>(mask->data_ptr()) : nullptr;
  const int64_t mask_item = has_mask ? static_cast<int64_t>(mask->itemsize()) : 0;
  // The output's rows take P V directly when they are dense Acc rows.
  const bool direct_out = std::is_same_v<T, Acc> && (os[3] == 1 || Ev == 1);
  blas_threads_for(2.0 * static_cast<double>(block) * static_cast<double>(S) *
                   static_cast<double>(E));
  const Acc scale = static_cast<Acc>(s.scale);
  const Acc* kp = nullptr;
  const Acc* vp = nullptr;
  int64_t ldk = 0, ldv = 0;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      if (h % group == 0) {  // a new key/value head, shared by `group` query heads
        const int64_t kvh = h / group;
        kp = rows_of<T, Acc>(kd + b * ks[0] + kvh * ks[1], ks[2], ks[3], S, E, &kbuf, &ldk);
        vp = rows_of<T, Acc>(vd + b * vs[0] + kvh * vs[1], vs[2], vs[3], S, Ev, &vbuf, &ldv);
      }
      for (int64_t i0 = 0; i0 < L; i0 += block) {
        const int64_t rows = std::min(block, L - i0);
        // Causal rows i see keys j <= i: this block needs at most i0 + rows keys.
        const int64_t cols = causal ? std::min(S, i0 + rows) : S;
        int64_t ldq = 0;
        const Acc* qp = rows_of<T, Acc>(qd + b * qs[0] + h * qs[1] + i0 * qs[2], qs[2], qs[3], rows,
                                        E, &qbuf, &ldq);
        if (cols > 0 && E > 0) {
          gemm(CblasTrans, static_cast<int>(rows), static_cast<int>(cols), static_cast<int>(E),
               scale, qp, static_cast<int>(ldq), kp, static_cast<int>(ldk), scores.data(),
               static_cast<int>(cols));
        } else {
          std::fill(scores.begin(), scores.begin() + rows * cols, Acc(0));
        }
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = i0 + r;
          Acc* row = scores.data() + r * cols;
          const int64_t visible = causal ? std::min(cols, i + 1) : cols;
          if (has_mask) {
            const char* m = mask_base + (b * ms[0] + h * ms[1] + i * ms[2]) * mask_item;
            add_mask_row<T, Acc>(row, visible, *mask, m, ms[3]);
          }
          ld[b * ls[0] + h * ls[1] + i * ls[2]] = softmax_row(row, visible);
          std::fill(row + visible, row + cols, Acc(0));
        }
        T* obase = od + b * os[0] + h * os[1] + i0 * os[2];
        Acc* target = direct_out ? reinterpret_cast<Acc*>(obase) : obuf.data();
        const int64_t ldo = direct_out ? std::max<int64_t>(os[2], Ev) : Ev;
        if (cols > 0) {
          gemm(CblasNoTrans, static_cast<int>(rows), static_cast<int>(Ev), static_cast<int>(cols),
               Acc(1), scores.data(), static_cast<int>(cols), vp, static_cast<int>(ldv), target,
               static_cast<int>(ldo));
        } else {
          for (int64_t r = 0; r < rows; ++r)
            std::fill(target + r * ldo, target + r * ldo + Ev, Acc(0));
        }
        if (!direct_out) {
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t e = 0; e < Ev; ++e) {
              Scalar<T>::store(obase + r * os[2] + e * os[3], obuf[r * Ev + e]);
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace shimkit

extern "C" AOTITorchError aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu(
    AtenTensorHandle query, AtenTensorHandle key, AtenTensorHandle value, double dropout_p,
    int32_t is_causal, AtenTensorHandle* attn_mask, double* scale, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1) {
  return SHIMKIT_GUARD({
    using shimkit::SlimTensor;
    shimkit::check_out(ret0);
    shimkit::check_out(ret1);
    if (dropout_p != 0.0) throw shimkit::ShimError("dropout is not supported at inference");
    const SlimTensor& q = shimkit::as_tensor(query);
    const SlimTensor& k = shimkit::as_tensor(key);
    const SlimTensor& v = shimkit::as_tensor(value);
    const SlimTensor* mask =
        (attn_mask != nullptr && *attn_mask != nullptr) ? &shimkit::as_tensor(*attn_mask) : nullptr;
    if (mask != nullptr && !mask->defined()) mask = nullptr;
    const shimkit::AttentionShape s = shimkit::attention_shape(q, k, v, mask, scale);
    SlimTensor out = SlimTensor::empty(s.out_sizes.data(), s.out_strides.data(), 4, q.dtype(),
                                       q.device_type(), q.device_index());
    SlimTensor lse = SlimTensor::empty(s.lse_sizes.data(), s.lse_strides.data(), 3, s.lse_dtype,
                                       q.device_type(), q.device_index());
    if (out.numel() > 0) {
      shimkit::dispatch_floating(q.dtype(), "scaled_dot_product_attention", [&](auto tag) {
        shimkit::attention<decltype(tag)>(q, k, v, mask, is_causal != 0, s, out, lse);
      });
    }
    *ret0 = shimkit::to_handle(std::move(out));
    *ret1 = shimkit::to_handle(std::move(lse));
  });
}
