/* The DLPack ABI (https://dmlc.github.io/dlpack, version 0.8, the unversioned
 * DLManagedTensor every consumer takes: torch.from_dlpack, CuPy, JAX, numpy),
 * declared here from its specification: the types a producer fills, nothing
 * else. Strides are in elements; a capsule that carries one is named
 * "dltensor" and renamed "used_dltensor" by the consumer that takes it. */
#ifndef SHIMKIT_RUNTIME_CUDA_DLPACK_H_
#define SHIMKIT_RUNTIME_CUDA_DLPACK_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { kDLCPU = 1, kDLCUDA = 2 };                                           /* DLDeviceType */
enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 }; /* DLDataTypeCode */

typedef struct {
  int32_t device_type; /* a DLDeviceType (a C enum: 32 bits) */
  int32_t device_id;
} DLDevice;

typedef struct {
  uint8_t code; /* a DLDataTypeCode */
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides; /* elements; NULL: C-contiguous */
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

#ifdef __cplusplus
}
#endif

#endif /* SHIMKIT_RUNTIME_CUDA_DLPACK_H_ */
