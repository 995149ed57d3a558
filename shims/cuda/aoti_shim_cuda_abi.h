// The CUDA part of the AOTInductor C shim ABI (torch `aoti_torch/c/shim.h`
// under USE_CUDA, and `generated/c_shim_cuda.h`) that shimkit's slim CUDA
// shims implement, on top of everything in shims/aoti_shim_abi.h. Names go
// through the generated rename header like every other shim.
#ifndef SHIMKIT_SHIMS_CUDA_AOTI_SHIM_CUDA_ABI_H_
#define SHIMKIT_SHIMS_CUDA_AOTI_SHIM_CUDA_ABI_H_

#include "shims/aoti_shim_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUDAGuardOpaque;
typedef struct CUDAGuardOpaque* CUDAGuardHandle;
struct CUDAStreamGuardOpaque;
typedef struct CUDAStreamGuardOpaque* CUDAStreamGuardHandle;

// Device and stream guards: make a device (and a stream on it) current for
// the calling thread until the guard is deleted.
SHIMKIT_EXPORT AOTITorchError aoti_torch_create_cuda_guard(int32_t device_index,
                                                           CUDAGuardHandle* ret_guard);
SHIMKIT_EXPORT AOTITorchError aoti_torch_delete_cuda_guard(CUDAGuardHandle guard);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_guard_set_index(CUDAGuardHandle guard,
                                                              int32_t device_index);
SHIMKIT_EXPORT AOTITorchError aoti_torch_create_cuda_stream_guard(void* stream,
                                                                  int32_t device_index,
                                                                  CUDAStreamGuardHandle* ret_guard);
SHIMKIT_EXPORT AOTITorchError aoti_torch_delete_cuda_stream_guard(CUDAStreamGuardHandle guard);
SHIMKIT_EXPORT AOTITorchError aoti_torch_get_current_cuda_stream(int32_t device_index,
                                                                 void** ret_stream);
SHIMKIT_EXPORT AOTITorchError aoti_torch_get_current_device_index(int32_t* ret_device_index);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_caching_allocator_raw_alloc(uint64_t nbytes,
                                                                          void** ret_ptr);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_caching_allocator_raw_delete(void* ptr);
SHIMKIT_EXPORT AOTITorchError aoti_torch__alloc_from_pool(AtenTensorHandle self,
                                                          int64_t offset_bytes, int32_t dtype,
                                                          int64_t ndim, const int64_t* sizes_ptr,
                                                          const int64_t* strides_ptr,
                                                          AtenTensorHandle* ret_new_tensor);

// A warning from blob code (AOTI_TORCH_WARN): one line on stderr.
SHIMKIT_EXPORT void aoti_torch_warn(const char* func, const char* file, uint32_t line,
                                    const char* msg);

// Zero-fills a tensor (CPU or CUDA).
SHIMKIT_EXPORT AOTITorchError aoti_torch_zero_(AtenTensorHandle tensor);

// CUDA fallback ops: float32 matmuls through cuBLAS; the rest on the host
// through the CPU shims (correct, not fast; see docs/cuda.md).
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_addmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                        AtenTensorHandle mat1,
                                                        AtenTensorHandle mat2, double beta,
                                                        double alpha);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_mm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                     AtenTensorHandle mat2);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_bmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                      AtenTensorHandle mat2);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_convolution(
    AtenTensorHandle input, AtenTensorHandle weight, AtenTensorHandle* bias, const int64_t* stride,
    int64_t stride_len_, const int64_t* padding, int64_t padding_len_, const int64_t* dilation,
    int64_t dilation_len_, int32_t transposed, const int64_t* output_padding,
    int64_t output_padding_len_, int64_t groups, AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_topk(AtenTensorHandle self, int64_t k, int64_t dim,
                                                   int32_t largest, int32_t sorted,
                                                   AtenTensorHandle* ret0, AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_sort_stable(AtenTensorHandle self, int32_t* stable,
                                                          int64_t dim, int32_t descending,
                                                          AtenTensorHandle* ret0,
                                                          AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_kthvalue(AtenTensorHandle self, int64_t k,
                                                       int64_t dim, int32_t keepdim,
                                                       AtenTensorHandle* ret0,
                                                       AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_mode(AtenTensorHandle self, int64_t dim,
                                                   int32_t keepdim, AtenTensorHandle* ret0,
                                                   AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_median(AtenTensorHandle self, AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_nanmedian(AtenTensorHandle self,
                                                        AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda__embedding_bag(
    AtenTensorHandle weight, AtenTensorHandle indices, AtenTensorHandle offsets,
    int32_t scale_grad_by_freq, int64_t mode, int32_t sparse, AtenTensorHandle* per_sample_weights,
    int32_t include_last_offset, int64_t padding_idx, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1, AtenTensorHandle* ret2, AtenTensorHandle* ret3);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda__embedding_bag_forward_only(
    AtenTensorHandle weight, AtenTensorHandle indices, AtenTensorHandle offsets,
    int32_t scale_grad_by_freq, int64_t mode, int32_t sparse, AtenTensorHandle* per_sample_weights,
    int32_t include_last_offset, int64_t padding_idx, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1, AtenTensorHandle* ret2, AtenTensorHandle* ret3);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_index_reduce(AtenTensorHandle self, int64_t dim,
                                                           AtenTensorHandle index,
                                                           AtenTensorHandle source,
                                                           const char* reduce, int32_t include_self,
                                                           AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_scatter_src_out(AtenTensorHandle out,
                                                              AtenTensorHandle self, int64_t dim,
                                                              AtenTensorHandle index,
                                                              AtenTensorHandle src);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_scatter_value_out(AtenTensorHandle out,
                                                                AtenTensorHandle self, int64_t dim,
                                                                AtenTensorHandle index,
                                                                double value);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_scatter_reduce_two_out(
    AtenTensorHandle out, AtenTensorHandle self, int64_t dim, AtenTensorHandle index,
    AtenTensorHandle src, const char* reduce, int32_t include_self);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_avg_pool2d(
    AtenTensorHandle self, const int64_t* kernel_size, int64_t kernel_size_len_,
    const int64_t* stride, int64_t stride_len_, const int64_t* padding, int64_t padding_len_,
    int32_t ceil_mode, int32_t count_include_pad, int64_t* divisor_override,
    AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_adaptive_max_pool2d(AtenTensorHandle self,
                                                                  const int64_t* output_size,
                                                                  int64_t output_size_len_,
                                                                  AtenTensorHandle* ret0,
                                                                  AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_avg_pool3d(
    AtenTensorHandle self, const int64_t* kernel_size, int64_t kernel_size_len_,
    const int64_t* stride, int64_t stride_len_, const int64_t* padding, int64_t padding_len_,
    int32_t ceil_mode, int32_t count_include_pad, int64_t* divisor_override,
    AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_max_pool2d_with_indices(
    AtenTensorHandle self, const int64_t* kernel_size, int64_t kernel_size_len_,
    const int64_t* stride, int64_t stride_len_, const int64_t* padding, int64_t padding_len_,
    const int64_t* dilation, int64_t dilation_len_, int32_t ceil_mode, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_max_pool3d_with_indices(
    AtenTensorHandle self, const int64_t* kernel_size, int64_t kernel_size_len_,
    const int64_t* stride, int64_t stride_len_, const int64_t* padding, int64_t padding_len_,
    const int64_t* dilation, int64_t dilation_len_, int32_t ceil_mode, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_adaptive_max_pool3d(AtenTensorHandle self,
                                                                  const int64_t* output_size,
                                                                  int64_t output_size_len_,
                                                                  AtenTensorHandle* ret0,
                                                                  AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda__adaptive_avg_pool2d(AtenTensorHandle self,
                                                                   const int64_t* output_size,
                                                                   int64_t output_size_len_,
                                                                   AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda__adaptive_avg_pool3d(AtenTensorHandle self,
                                                                   const int64_t* output_size,
                                                                   int64_t output_size_len_,
                                                                   AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_nonzero(AtenTensorHandle self,
                                                      AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_masked_select(AtenTensorHandle self,
                                                            AtenTensorHandle mask,
                                                            AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_cummax(AtenTensorHandle self, int64_t dim,
                                                     AtenTensorHandle* ret0,
                                                     AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_cummin(AtenTensorHandle self, int64_t dim,
                                                     AtenTensorHandle* ret0,
                                                     AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda__cdist_forward(AtenTensorHandle x1,
                                                             AtenTensorHandle x2, double p,
                                                             int64_t* compute_mode,
                                                             AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_baddbmm_out(AtenTensorHandle out,
                                                          AtenTensorHandle self,
                                                          AtenTensorHandle batch1,
                                                          AtenTensorHandle batch2, double beta,
                                                          double alpha);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda__pdist_forward(AtenTensorHandle self, double p,
                                                             AtenTensorHandle* ret0);
// A CUDA program's seeds for its random ops: drawn on the host from the CPU
// shims' generator (shimkit_shim_manual_seed), copied in; in a CUDA graph,
// drawn anew by each launch and copied in ahead of the graph (no host step).
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_randint_low_out(AtenTensorHandle out, int64_t low,
                                                              int64_t high, const int64_t* size,
                                                              int64_t size_len_);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_histc(AtenTensorHandle self, int64_t bins, double min,
                                                    double max, AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_grid_sampler_3d(
    AtenTensorHandle input, AtenTensorHandle grid, int64_t interpolation_mode, int64_t padding_mode,
    int32_t align_corners, AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cuda_addbmm(AtenTensorHandle self, AtenTensorHandle batch1,
                                                     AtenTensorHandle batch2, double beta,
                                                     double alpha, AtenTensorHandle* ret0);

// Not torch's ABI (no shim-family name): CUDA availability for hosts and
// tests. Returns the number of devices, or -1 when CUDA is unusable; then
// shimkit_cuda_unavailable_reason() says why (never NULL).
SHIMKIT_EXPORT int32_t shimkit_cuda_device_count(void);
SHIMKIT_EXPORT const char* shimkit_cuda_unavailable_reason(void);
// Bytes parked in the caching allocator, and giving them back to the driver.
SHIMKIT_EXPORT size_t shimkit_cuda_cached_bytes(void);
SHIMKIT_EXPORT void shimkit_cuda_empty_cache(void);
// How many convolutions ran on cuDNN and on the host (process-wide), why
// the calling thread's last host run did not use cuDNN ("" if none did), and
// which cuDNN was loaded ("cuDNN <version> (<library>)" or "unavailable: ...").
SHIMKIT_EXPORT void shimkit_cuda_conv_counts(int64_t* on_cudnn, int64_t* on_host);
SHIMKIT_EXPORT const char* shimkit_cuda_conv_last_fallback(void);
SHIMKIT_EXPORT const char* shimkit_cuda_cudnn_info(void);
// Of the convolutions on cuDNN, how many ran through its graph API (the rest
// through the legacy API), and how many plans were built (one per thread and
// argument geometry: a count that grows with the calls means a plan per call).
SHIMKIT_EXPORT void shimkit_cuda_conv_api_counts(int64_t* on_graph_api, int64_t* plans_built);
// Whether float32 convolutions may use TF32 tensor cores (torch's default for
// cuDNN), and setting it (default: off, true float32; SHIMKIT_CUDNN_TF32=1).
SHIMKIT_EXPORT int32_t shimkit_cuda_cudnn_tf32(void);
SHIMKIT_EXPORT void shimkit_cuda_set_cudnn_tf32(int32_t allowed);
// Whether float32 GEMMs (mm, addmm, bmm) may use TF32 tensor cores (torch's
// torch.backends.cuda.matmul.allow_tf32, off by default there too), and
// setting it (default: off; SHIMKIT_MATMUL_TF32=1).
SHIMKIT_EXPORT int32_t shimkit_cuda_matmul_tf32(void);
SHIMKIT_EXPORT void shimkit_cuda_set_matmul_tf32(int32_t allowed);
// How many float32 GEMMs ran on cuBLASLt and on legacy cuBLAS (process-wide).
SHIMKIT_EXPORT void shimkit_cuda_gemm_counts(int64_t* on_cublaslt, int64_t* on_cublas);
// Streams and CUDA graphs for hosts (shims/cuda/cuda_graph.cpp): a
// non-blocking stream on a device; capturing a stream (relaxed mode) with a
// private allocation pool whose id goes to *pool; ending the capture into an
// executable graph (the pool stays reserved for it); replaying it (the pool
// names the capture whose random seeds the launch draws anew first); how many
// host steps (host fallbacks, host_fallback.h) the graph runs, and their ops
// ("topk, histc" into `buffer`, NUL-terminated and cut to `size`; the full
// length is returned, as snprintf does); checking,
// once the stream is idle, that those of its replays since the last check
// worked (an error naming the op and why, otherwise); and freeing it (after
// the stream is idle) with its pool.
SHIMKIT_EXPORT AOTITorchError shimkit_cuda_stream_create(int32_t device_index, void** stream);
SHIMKIT_EXPORT AOTITorchError shimkit_cuda_stream_destroy(void* stream);
SHIMKIT_EXPORT AOTITorchError shimkit_cuda_stream_synchronize(void* stream);
SHIMKIT_EXPORT AOTITorchError shimkit_cuda_graph_begin(void* stream, uint64_t* pool);
SHIMKIT_EXPORT AOTITorchError shimkit_cuda_graph_end(void* stream, void** exec);
SHIMKIT_EXPORT AOTITorchError shimkit_cuda_graph_launch(void* exec, uint64_t pool, void* stream);
SHIMKIT_EXPORT int64_t shimkit_cuda_graph_host_steps(uint64_t pool);
SHIMKIT_EXPORT int64_t shimkit_cuda_graph_host_step_names(uint64_t pool, char* buffer,
                                                          int64_t size);
SHIMKIT_EXPORT AOTITorchError shimkit_cuda_graph_check(uint64_t pool);
SHIMKIT_EXPORT AOTITorchError shimkit_cuda_graph_free(void* exec, uint64_t pool, void* stream);
// Waits for the calling thread's current stream on `device_index`.
SHIMKIT_EXPORT AOTITorchError shimkit_cuda_synchronize(int32_t device_index);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // SHIMKIT_SHIMS_CUDA_AOTI_SHIM_CUDA_ABI_H_
