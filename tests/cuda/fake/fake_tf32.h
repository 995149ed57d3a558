/* TF32 as the tensor cores read float32 operands: 10 explicit mantissa bits
 * (of float32's 23), rounded to nearest, ties to even; infinities and NaNs
 * pass unchanged. The fake cuBLAS and cuBLASLt apply it to every operand when
 * asked for TF32 math, so a test sees whether the shims asked. */
#ifndef SHIMKIT_TESTS_CUDA_FAKE_FAKE_TF32_H_
#define SHIMKIT_TESTS_CUDA_FAKE_FAKE_TF32_H_

#include <stdint.h>
#include <string.h>

static inline float fake_tf32_round(float v) {
  uint32_t bits;
  memcpy(&bits, &v, 4);
  if ((bits & 0x7f800000u) != 0x7f800000u) {
    bits += 0xfffu + ((bits >> 13) & 1u);
    bits &= ~0x1fffu;
  }
  memcpy(&v, &bits, 4);
  return v;
}

#endif /* SHIMKIT_TESTS_CUDA_FAKE_FAKE_TF32_H_ */
