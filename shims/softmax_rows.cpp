#include "shims/softmax_rows.h"

#include <cmath>
#include <initializer_list>
#include <limits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SHIMKIT_X86_KERNELS 1
// 512-bit vectors only pass between functions built for AVX-512 here; GCC's
// note that their calling convention differs from other targets' is moot.
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps() and trip its
// own uninitialized-value warnings.
#pragma GCC diagnostic ignored "-Wpsabi"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

namespace shimkit {
namespace {

constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;  // ln 2 = kLn2Hi - kLn2Lo, exactly representable hi
constexpr float kLn2Lo = 2.12194440e-4f;
constexpr float kUnder = -87.3f;  // e^x below this is 0 here (a float denormal)
constexpr float kP[7] = {1.9875691500e-4f,
                         1.3981999507e-3f,
                         8.3334519073e-3f,
                         4.1665795894e-2f,
                         1.6666665459e-1f,
                         5.0000001201e-1f,
                         1.0f};

float softmax_portable(float* row, int64_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) max = row[j] > max ? row[j] : max;
  if (max == -std::numeric_limits<float>::infinity()) {
    for (int64_t j = 0; j < n; ++j) row[j] = 0.0f;
    return max;
  }
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) {
    row[j] = exp_poly(row[j] - max);
    sum += row[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
  return max + std::log(sum);
}

#if SHIMKIT_X86_KERNELS

// Horizontal max and sum of 16 lanes.
__attribute__((target("avx512f"))) inline float lanes_max(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float m = lanes[0];
  for (float x : lanes) m = x > m ? x : m;
  return m;
}
__attribute__((target("avx512f"))) inline float lanes_sum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float total = 0.0f;
  for (float x : lanes) total += x;
  return total;
}

// e^x on 16 lanes: 0 where x < kUnder (-inf included).
__attribute__((target("avx512f"))) inline __m512 exp16(__m512 x) {
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kUnder), _CMP_GE_OQ);
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fmadd_ps(k, _mm512_set1_ps(kLn2Lo), r);
  __m512 p = _mm512_set1_ps(kP[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kP[i]));
  p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(kP[6])));
  return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(p, k));  // p * 2^k
}

__attribute__((target("avx512f"))) float softmax_avx512(float* row, int64_t n) {
  const int64_t whole = n - n % 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (n - whole)) - 1u);
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 vmax = neg_inf;
  for (int64_t j = 0; j < whole; j += 16) vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(row + j));
  if (tail != 0) vmax = _mm512_max_ps(vmax, _mm512_mask_loadu_ps(neg_inf, tail, row + whole));
  const float max = lanes_max(vmax);
  if (max == -std::numeric_limits<float>::infinity()) {
    for (int64_t j = 0; j < n; ++j) row[j] = 0.0f;
    return max;
  }
  const __m512 shift = _mm512_set1_ps(max);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < whole; j += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(row + j), shift));
    _mm512_storeu_ps(row + j, e);
    sum = _mm512_add_ps(sum, e);
  }
  if (tail != 0) {
    const __m512 e = _mm512_maskz_mov_ps(
        tail, exp16(_mm512_sub_ps(_mm512_mask_loadu_ps(neg_inf, tail, row + whole), shift)));
    _mm512_mask_storeu_ps(row + whole, tail, e);
    sum = _mm512_add_ps(sum, e);
  }
  const float total = lanes_sum(sum);
  const __m512 inv = _mm512_set1_ps(1.0f / total);
  for (int64_t j = 0; j < whole; j += 16)
    _mm512_storeu_ps(row + j, _mm512_mul_ps(_mm512_loadu_ps(row + j), inv));
  if (tail != 0) {
    _mm512_mask_storeu_ps(row + whole, tail,
                          _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, row + whole), inv));
  }
  return max + std::log(total);
}

__attribute__((target("avx2,fma"))) float softmax_avx2(float* row, int64_t n) {
  const int64_t whole = n - n % 8;
  __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < whole; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(row + j));
  float lanes[8];
  _mm256_storeu_ps(lanes, vmax);
  float max = -std::numeric_limits<float>::infinity();
  for (float v : lanes) max = v > max ? v : max;
  for (int64_t j = whole; j < n; ++j) max = row[j] > max ? row[j] : max;
  if (max == -std::numeric_limits<float>::infinity()) {
    for (int64_t j = 0; j < n; ++j) row[j] = 0.0f;
    return max;
  }
  const __m256 shift = _mm256_set1_ps(max);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t j = 0; j < whole; j += 8) {
    const __m256 x = _mm256_sub_ps(_mm256_loadu_ps(row + j), shift);
    const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(kUnder), _CMP_GE_OQ);
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(kLn2Hi), x);
    r = _mm256_fmadd_ps(k, _mm256_set1_ps(kLn2Lo), r);
    __m256 p = _mm256_set1_ps(kP[0]);
    for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP[i]));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(kP[6])));
    // 2^k from k's exponent bits; lanes below kUnder (k >= -126 there) are masked to 0.
    const __m256i bits =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    const __m256 e = _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(bits)), keep);
    _mm256_storeu_ps(row + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  _mm256_storeu_ps(lanes, sum);
  float total = 0.0f;
  for (float v : lanes) total += v;
  for (int64_t j = whole; j < n; ++j) {
    row[j] = exp_poly(row[j] - max);
    total += row[j];
  }
  const __m256 inv = _mm256_set1_ps(1.0f / total);
  for (int64_t j = 0; j < whole; j += 8)
    _mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), inv));
  for (int64_t j = whole; j < n; ++j) row[j] *= 1.0f / total;
  return max + std::log(total);
}

#endif  // SHIMKIT_X86_KERNELS

using SoftmaxFn = float (*)(float*, int64_t);

SoftmaxFn kernel_fn(SoftmaxKernel kernel) {
#if SHIMKIT_X86_KERNELS
  if (kernel == SoftmaxKernel::kAvx512) return softmax_avx512;
  if (kernel == SoftmaxKernel::kAvx2) return softmax_avx2;
#endif
  return softmax_portable;
}

}  // namespace

float exp_poly(float x) {
  if (!(x >= kUnder)) return 0.0f;  // -inf and NaN-free inputs below the range
  if (x > 88.3f) return std::numeric_limits<float>::infinity();
  const float k = std::nearbyint(x * kLog2e);
  const float r = (x - k * kLn2Hi) + k * kLn2Lo;
  float p = kP[0];
  for (int i = 1; i < 6; ++i) p = p * r + kP[i];
  p = p * r * r + (r + kP[6]);
  return std::ldexp(p, static_cast<int>(k));
}

bool softmax_kernel_available(SoftmaxKernel kernel) {
  if (kernel == SoftmaxKernel::kPortable) return true;
#if SHIMKIT_X86_KERNELS
  __builtin_cpu_init();
  if (kernel == SoftmaxKernel::kAvx512) return __builtin_cpu_supports("avx512f");
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

float softmax_row_with(SoftmaxKernel kernel, float* row, int64_t n) {
  return kernel_fn(kernel)(row, n);
}

float softmax_row(float* row, int64_t n) {
  static const SoftmaxFn fn = []() {
    for (SoftmaxKernel k : {SoftmaxKernel::kAvx512, SoftmaxKernel::kAvx2}) {
      if (softmax_kernel_available(k)) return kernel_fn(k);
    }
    return kernel_fn(SoftmaxKernel::kPortable);
  }();
  return fn(row, n);
}

double softmax_row(double* row, int64_t n) {
  double max = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < n; ++j) max = row[j] > max ? row[j] : max;
  if (max == -std::numeric_limits<double>::infinity()) {
    for (int64_t j = 0; j < n; ++j) row[j] = 0.0;
    return max;
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    row[j] = std::exp(row[j] - max);
    sum += row[j];
  }
  for (int64_t j = 0; j < n; ++j) row[j] /= sum;
  return max + std::log(sum);
}

}  // namespace shimkit
