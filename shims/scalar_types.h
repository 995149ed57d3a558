// Element types of the slim shims' float kernels: float16/bfloat16 storage
// conversions and a dispatcher from a dtype code to a C++ type. Kernels that
// take reduced-precision tensors compute in float (ATen's accumulate type) and
// round once when they store.
#ifndef SHIMKIT_SHIMS_SCALAR_TYPES_H_
#define SHIMKIT_SHIMS_SCALAR_TYPES_H_

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "shims/slim_tensor.h"

namespace shimkit {

// IEEE binary16 and bfloat16 as raw bits (what tensors store).
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {  // inf / NaN
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {  // normal
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {  // zero
    bits = sign;
  } else {  // subnormal: normalise
    exponent = 113;
    while ((mantissa & 0x400u) == 0) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, like c10::Half.
inline uint16_t float_to_half_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf / NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal or zero in half
    if (abs < 0x33000000u) return sign;
    // value = mantissa * 2^(E - 150); in units of 2^-24: mantissa >> (126 - E).
    const uint32_t shift = 126 - (abs >> 23);
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u) - 0x38000000u;
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

inline float bf16_bits_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, NaN kept quiet, like c10::BFloat16.
inline uint16_t float_to_bf16_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// load<T>(p) -> the compute value; store<T>(p, v) rounds to the storage type.
template <typename T>
struct Scalar {
  using Compute = T;
  static Compute load(const T* p) { return *p; }
  static void store(T* p, Compute v) { *p = v; }
};
template <>
struct Scalar<Half> {
  using Compute = float;
  static float load(const Half* p) { return half_bits_to_float(p->bits); }
  static void store(Half* p, float v) { p->bits = float_to_half_bits(v); }
};
template <>
struct Scalar<BFloat16> {
  using Compute = float;
  static float load(const BFloat16* p) { return bf16_bits_to_float(p->bits); }
  static void store(BFloat16* p, float v) { p->bits = float_to_bf16_bits(v); }
};

// Calls fn(T{}) with T the storage type of a floating dtype; throws otherwise.
template <typename F>
decltype(auto) dispatch_floating(int32_t dt, const char* what, F&& fn) {
  switch (dt) {
    case dtype::kFloat32:
      return fn(float{});
    case dtype::kFloat64:
      return fn(double{});
    case dtype::kFloat16:
      return fn(Half{});
    case dtype::kBFloat16:
      return fn(BFloat16{});
    default:
      throw ShimError(std::string(what) + ": unsupported dtype " + dtype_name(dt));
  }
}

// Calls fn(T{}) for an index dtype (int64 or int32); throws otherwise.
template <typename F>
decltype(auto) dispatch_index(int32_t dt, const char* what, F&& fn) {
  switch (dt) {
    case dtype::kInt64:
      return fn(int64_t{});
    case dtype::kInt32:
      return fn(int32_t{});
    default:
      throw ShimError(std::string(what) + " must be int64 or int32, got " + dtype_name(dt));
  }
}

// Calls fn(T{}) for any numeric dtype the slim shims store; bool is not one
// (dispatch_numeric_or_bool takes it too).
template <typename F>
decltype(auto) dispatch_numeric(int32_t dt, const char* what, F&& fn) {
  switch (dt) {
    case dtype::kInt64:
      return fn(int64_t{});
    case dtype::kInt32:
      return fn(int32_t{});
    case dtype::kInt16:
      return fn(int16_t{});
    case dtype::kInt8:
      return fn(int8_t{});
    case dtype::kUInt8:
      return fn(uint8_t{});
    default:
      return dispatch_floating(dt, what, std::forward<F>(fn));
  }
}

// dispatch_numeric, with bool too: as uint8_t, its stored 0/1 bytes (for ops
// that compare or copy values, such as sorts, scans and nonzero).
template <typename F>
decltype(auto) dispatch_numeric_or_bool(int32_t dt, const char* what, F&& fn) {
  if (dt == dtype::kBool) return fn(uint8_t{});
  return dispatch_numeric(dt, what, std::forward<F>(fn));
}

// The type a reduction over T accumulates in on the CPU (ATen's
// acc_type<T, /*is_cuda=*/false>): double for floating types, int64 for integers.
template <typename T>
using CpuAcc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;

}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_SCALAR_TYPES_H_
