// Slim CPU scaled dot-product attention: the fallback Inductor emits for
// F.scaled_dot_product_attention on the CPU
// (aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu). Causal
// (top-left aligned, like ATen), additive float or boolean masks (broadcast),
// grouped-query heads, float32/float64 and float16/bfloat16 (computed in
// float). Per (batch, head) and block of query rows: scores = Q K^T through
// OpenBLAS, masked softmax with its log-sum-exp, then P V through OpenBLAS.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "shims/attention_geometry.h"
#include "shims/scalar_types.h"
#include "shims/shim_internal.h"

namespace shimkit {
namespace {

// Query rows per block: bounds the scores buffer to kRowBlock x kv_len.
constexpr int64_t kRowBlock = 64;

inline void gemm(CBLAS_TRANSPOSE tb, int m, int n, int k, const float* a, int lda, const float* b,
                 int ldb, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}
inline void gemm(CBLAS_TRANSPOSE tb, int m, int n, int k, const double* a, int lda, const double* b,
                 int ldb, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, tb, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc);
}

// Copies rows [row0, row0 + rows) of the [rows, cols] matrix at `base` (row
// stride rs, column stride cs) into a dense Acc buffer.
template <typename T, typename Acc>
void pack_rows(const T* base, int64_t rs, int64_t cs, int64_t row0, int64_t rows, int64_t cols,
               Acc* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* src = base + (row0 + r) * rs;
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = Scalar<T>::load(src + c * cs);
  }
}

// Mask value for (b, h, i, j) as an additive term (bool: 0 or -inf).
template <typename T, typename Acc>
Acc mask_term(const SlimTensor& mask, const std::vector<int64_t>& st, int64_t b, int64_t h,
              int64_t i, int64_t j) {
  const int64_t off = b * st[0] + h * st[1] + i * st[2] + j * st[3];
  if (mask.dtype() == dtype::kBool) {
    return static_cast<const uint8_t*>(mask.data_ptr())[off] != 0
               ? Acc(0)
               : -std::numeric_limits<Acc>::infinity();
  }
  return static_cast<Acc>(Scalar<T>::load(static_cast<const T*>(mask.data_ptr()) + off));
}

template <typename T>
void attention(const SlimTensor& q, const SlimTensor& k, const SlimTensor& v,
               const SlimTensor* mask, bool causal, const AttentionShape& s, const SlimTensor& out,
               const SlimTensor& lse) {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const int64_t L = s.q_len, S = s.kv_len, E = s.head_dim, Ev = s.value_dim;
  const int64_t group = s.heads / s.kv_heads;
  const bool has_mask = !s.mask_strides.empty();
  std::vector<Acc> qbuf(static_cast<size_t>(kRowBlock * E)), kbuf(static_cast<size_t>(S * E));
  std::vector<Acc> vbuf(static_cast<size_t>(S * Ev)), scores(static_cast<size_t>(kRowBlock * S));
  std::vector<Acc> obuf(static_cast<size_t>(kRowBlock * Ev));
  const T* qd = static_cast<const T*>(q.data_ptr());
  const T* kd = static_cast<const T*>(k.data_ptr());
  const T* vd = static_cast<const T*>(v.data_ptr());
  T* od = static_cast<T*>(out.data_ptr());
  Acc* ld = static_cast<Acc*>(lse.data_ptr());
  const auto &qs = q.strides(), &ks = k.strides(), &vs = v.strides(), &os = out.strides();
  const auto& ls = lse.strides();
  blas_threads_for(2.0 * static_cast<double>(kRowBlock) * static_cast<double>(S) *
                   static_cast<double>(E));
  const Acc neg_inf = -std::numeric_limits<Acc>::infinity();
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t kvh = h / group;
      if (h % group == 0) {  // a new key/value head: pack it once for its query heads
        pack_rows(kd + b * ks[0] + kvh * ks[1], ks[2], ks[3], 0, S, E, kbuf.data());
        pack_rows(vd + b * vs[0] + kvh * vs[1], vs[2], vs[3], 0, S, Ev, vbuf.data());
      }
      for (int64_t i0 = 0; i0 < L; i0 += kRowBlock) {
        const int64_t rows = std::min(kRowBlock, L - i0);
        // Causal rows i see keys j <= i: this block needs at most i0 + rows keys.
        const int64_t cols = causal ? std::min(S, i0 + rows) : S;
        pack_rows(qd + b * qs[0] + h * qs[1], qs[2], qs[3], i0, rows, E, qbuf.data());
        if (cols > 0) {
          gemm(CblasTrans, static_cast<int>(rows), static_cast<int>(cols), static_cast<int>(E),
               qbuf.data(), static_cast<int>(E), kbuf.data(), static_cast<int>(E), scores.data(),
               static_cast<int>(cols));
        }
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t i = i0 + r;
          Acc* row = scores.data() + r * cols;
          const int64_t visible = causal ? std::min(cols, i + 1) : cols;
          Acc max = neg_inf;
          for (int64_t j = 0; j < visible; ++j) {
            Acc x = row[j] * static_cast<Acc>(s.scale);
            if (has_mask) x += mask_term<T, Acc>(*mask, s.mask_strides, b, h, i, j);
            row[j] = x;
            max = std::max(max, x);
          }
          Acc sum = 0;
          if (max == neg_inf) {  // nothing visible: ATen gives zeros
            std::fill(row, row + cols, Acc(0));
          } else {
            for (int64_t j = 0; j < visible; ++j) {
              row[j] = std::exp(row[j] - max);
              sum += row[j];
            }
            const Acc inv = Acc(1) / sum;
            for (int64_t j = 0; j < visible; ++j) row[j] *= inv;
            std::fill(row + visible, row + cols, Acc(0));
          }
          ld[b * ls[0] + h * ls[1] + i * ls[2]] = max == neg_inf ? neg_inf : max + std::log(sum);
        }
        if (cols > 0) {
          gemm(CblasNoTrans, static_cast<int>(rows), static_cast<int>(Ev), static_cast<int>(cols),
               scores.data(), static_cast<int>(cols), vbuf.data(), static_cast<int>(Ev),
               obuf.data(), static_cast<int>(Ev));
        } else {
          std::fill(obuf.begin(), obuf.end(), Acc(0));
        }
        T* obase = od + b * os[0] + h * os[1];
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t e = 0; e < Ev; ++e) {
            Scalar<T>::store(obase + (i0 + r) * os[2] + e * os[3], obuf[r * Ev + e]);
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
