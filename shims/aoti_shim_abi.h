// The slice of the AOTInductor C shim ABI (torch 2.13 `aoti_torch/c/shim.h` and
// `generated/c_shim_cpu.h`) that shimkit's slim CPU shims implement.
//
// Types match torch's: AtenTensorHandle is an opaque pointer, AOTITorchError an
// int32_t. Every name goes through the generated rename header, so compiling
// with -D<prefix define>=<prefix> turns `aoti_torch_x` into the private
// `<prefix>aoti_torch_x` in declarations, definitions and calls alike.
#ifndef SHIMKIT_SHIMS_AOTI_SHIM_ABI_H_
#define SHIMKIT_SHIMS_AOTI_SHIM_ABI_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shims/aoti_shim_rename.h"

#if defined(__GNUC__)
#define SHIMKIT_EXPORT __attribute__((__visibility__("default")))
#else
#define SHIMKIT_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

struct AtenTensorOpaque;
typedef struct AtenTensorOpaque* AtenTensorHandle;
struct AOTIProxyExecutorOpaque;
typedef struct AOTIProxyExecutorOpaque* AOTIProxyExecutorHandle;
typedef int32_t AOTITorchError;

#define AOTI_TORCH_SUCCESS 0
#define AOTI_TORCH_FAILURE 1

// Constants.
SHIMKIT_EXPORT int32_t aoti_torch_device_type_cpu(void);
SHIMKIT_EXPORT int32_t aoti_torch_device_type_cuda(void);
SHIMKIT_EXPORT int32_t aoti_torch_device_type_meta(void);
SHIMKIT_EXPORT int32_t aoti_torch_device_type_xpu(void);
SHIMKIT_EXPORT int32_t aoti_torch_device_type_mps(void);
SHIMKIT_EXPORT int32_t aoti_torch_device_type_privateuse1(void);
SHIMKIT_EXPORT int32_t aoti_torch_dtype_bfloat16(void);
SHIMKIT_EXPORT int32_t aoti_torch_dtype_float16(void);
SHIMKIT_EXPORT int32_t aoti_torch_dtype_float32(void);
SHIMKIT_EXPORT int32_t aoti_torch_dtype_float64(void);
SHIMKIT_EXPORT int32_t aoti_torch_dtype_uint8(void);
SHIMKIT_EXPORT int32_t aoti_torch_dtype_uint16(void);
SHIMKIT_EXPORT int32_t aoti_torch_dtype_uint32(void);
SHIMKIT_EXPORT int32_t aoti_torch_dtype_uint64(void);
SHIMKIT_EXPORT int32_t aoti_torch_dtype_int8(void);
SHIMKIT_EXPORT int32_t aoti_torch_dtype_int16(void);
SHIMKIT_EXPORT int32_t aoti_torch_dtype_int32(void);
SHIMKIT_EXPORT int32_t aoti_torch_dtype_int64(void);
SHIMKIT_EXPORT int32_t aoti_torch_dtype_bool(void);
SHIMKIT_EXPORT size_t aoti_torch_dtype_element_size(int32_t dtype);
SHIMKIT_EXPORT int32_t aoti_torch_layout_strided(void);
SHIMKIT_EXPORT int32_t aoti_torch_memory_format_contiguous_format(void);
SHIMKIT_EXPORT int32_t aoti_torch_memory_format_channels_last(void);
SHIMKIT_EXPORT int32_t aoti_torch_memory_format_channels_last_3d(void);
SHIMKIT_EXPORT int32_t aoti_torch_memory_format_preserve_format(void);

// Grad mode (inference only: kept per thread, never used).
SHIMKIT_EXPORT bool aoti_torch_grad_mode_is_enabled(void);
SHIMKIT_EXPORT void aoti_torch_grad_mode_set_enabled(bool enabled);

// Lifecycle and attributes.
SHIMKIT_EXPORT AOTITorchError aoti_torch_delete_tensor_object(AtenTensorHandle tensor);
SHIMKIT_EXPORT AOTITorchError aoti_torch_get_data_ptr(AtenTensorHandle tensor, void** ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_get_storage_size(AtenTensorHandle tensor, int64_t* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_get_storage_numel(AtenTensorHandle tensor, int64_t* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_get_dim(AtenTensorHandle tensor, int64_t* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_get_numel(AtenTensorHandle tensor, int64_t* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_get_sizes(AtenTensorHandle tensor, int64_t** ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_get_size(AtenTensorHandle tensor, int64_t d, int64_t* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_get_strides(AtenTensorHandle tensor, int64_t** ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_get_stride(AtenTensorHandle tensor, int64_t d,
                                                    int64_t* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_get_dtype(AtenTensorHandle tensor, int32_t* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_get_device_type(AtenTensorHandle tensor, int32_t* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_get_device_index(AtenTensorHandle tensor, int32_t* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_get_layout(AtenTensorHandle tensor, int32_t* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_get_storage_offset(AtenTensorHandle tensor, int64_t* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_is_contiguous(AtenTensorHandle tensor, bool* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_is_defined(AtenTensorHandle tensor, bool* ret);

// Creation and views.
SHIMKIT_EXPORT AOTITorchError aoti_torch_new_tensor_handle(AtenTensorHandle orig,
                                                           AtenTensorHandle* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_new_uninitialized_tensor(AtenTensorHandle* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch__reinterpret_tensor(AtenTensorHandle self, int64_t ndim,
                                                             const int64_t* sizes_ptr,
                                                             const int64_t* strides_ptr,
                                                             int64_t storage_offset,
                                                             AtenTensorHandle* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_as_strided(AtenTensorHandle self, const int64_t* sizes_ptr,
                                                    const int64_t* strides_ptr,
                                                    AtenTensorHandle* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_empty_strided(int64_t ndim, const int64_t* sizes_ptr,
                                                       const int64_t* strides_ptr, int32_t dtype,
                                                       int32_t device_type, int32_t device_index,
                                                       AtenTensorHandle* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_empty_strided_pinned(
    int64_t ndim, const int64_t* sizes_ptr, const int64_t* strides_ptr, int32_t dtype,
    int32_t device_type, int32_t device_index, AtenTensorHandle* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_create_tensor_from_blob(
    void* data, int64_t ndim, const int64_t* sizes_ptr, const int64_t* strides_ptr,
    int64_t storage_offset, int32_t dtype, int32_t device_type, int32_t device_index,
    AtenTensorHandle* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_create_tensor_from_blob_v2(
    void* data, int64_t ndim, const int64_t* sizes_ptr, const int64_t* strides_ptr,
    int64_t storage_offset, int32_t dtype, int32_t device_type, int32_t device_index,
    AtenTensorHandle* ret, int32_t layout, const uint8_t* opaque_metadata,
    int64_t opaque_metadata_size);
SHIMKIT_EXPORT AOTITorchError aoti_torch_clone(AtenTensorHandle self, AtenTensorHandle* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_clone_preserve_strides(AtenTensorHandle self,
                                                                AtenTensorHandle* ret);
SHIMKIT_EXPORT AOTITorchError aoti_torch_copy_(AtenTensorHandle self, AtenTensorHandle src,
                                               int32_t non_blocking);
SHIMKIT_EXPORT AOTITorchError aoti_torch_tensor_copy_(AtenTensorHandle src, AtenTensorHandle dst);
SHIMKIT_EXPORT AOTITorchError aoti_torch_assign_tensors(AtenTensorHandle src, AtenTensorHandle dst);
SHIMKIT_EXPORT AOTITorchError aoti_torch_assign_tensors_out(AtenTensorHandle src,
                                                            AtenTensorHandle* ret_dst);

// The value of a one-element tensor of any device and dtype, converted to the
// function's type as torch's Tensor::item<T> does (a program reads a size from
// its data this way: torch.bincount's length, a .item() in the model). A CUDA
// tensor's value is copied to the host, which waits for the stream. float16 and
// bfloat16 are returned as their bits (c10::Half and c10::BFloat16 are those).
SHIMKIT_EXPORT AOTITorchError aoti_torch_item_float16(AtenTensorHandle tensor, uint16_t* ret_value);
SHIMKIT_EXPORT AOTITorchError aoti_torch_item_float32(AtenTensorHandle tensor, float* ret_value);
SHIMKIT_EXPORT AOTITorchError aoti_torch_item_float64(AtenTensorHandle tensor, double* ret_value);
SHIMKIT_EXPORT AOTITorchError aoti_torch_item_uint8(AtenTensorHandle tensor, uint8_t* ret_value);
SHIMKIT_EXPORT AOTITorchError aoti_torch_item_uint16(AtenTensorHandle tensor, uint16_t* ret_value);
SHIMKIT_EXPORT AOTITorchError aoti_torch_item_uint32(AtenTensorHandle tensor, uint32_t* ret_value);
SHIMKIT_EXPORT AOTITorchError aoti_torch_item_uint64(AtenTensorHandle tensor, uint64_t* ret_value);
SHIMKIT_EXPORT AOTITorchError aoti_torch_item_int8(AtenTensorHandle tensor, int8_t* ret_value);
SHIMKIT_EXPORT AOTITorchError aoti_torch_item_int16(AtenTensorHandle tensor, int16_t* ret_value);
SHIMKIT_EXPORT AOTITorchError aoti_torch_item_int32(AtenTensorHandle tensor, int32_t* ret_value);
SHIMKIT_EXPORT AOTITorchError aoti_torch_item_int64(AtenTensorHandle tensor, int64_t* ret_value);
SHIMKIT_EXPORT AOTITorchError aoti_torch_item_bool(AtenTensorHandle tensor, bool* ret_value);
SHIMKIT_EXPORT AOTITorchError aoti_torch_item_bfloat16(AtenTensorHandle tensor,
                                                       uint16_t* ret_value);

// Fallback ops the CPU test models need.
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_addmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                       AtenTensorHandle mat1, AtenTensorHandle mat2,
                                                       double beta, double alpha);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_mm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                    AtenTensorHandle mat2);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_bmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                                     AtenTensorHandle mat2);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_baddbmm_out(AtenTensorHandle out,
                                                         AtenTensorHandle self,
                                                         AtenTensorHandle batch1,
                                                         AtenTensorHandle batch2, double beta,
                                                         double alpha);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_addbmm(AtenTensorHandle self, AtenTensorHandle batch1,
                                                    AtenTensorHandle batch2, double beta,
                                                    double alpha, AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_convolution(
    AtenTensorHandle input, AtenTensorHandle weight, AtenTensorHandle* bias, const int64_t* stride,
    int64_t stride_len_, const int64_t* padding, int64_t padding_len_, const int64_t* dilation,
    int64_t dilation_len_, int32_t transposed, const int64_t* output_padding,
    int64_t output_padding_len_, int64_t groups, AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_topk(AtenTensorHandle self, int64_t k, int64_t dim,
                                                  int32_t largest, int32_t sorted,
                                                  AtenTensorHandle* ret0, AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_sort_stable(AtenTensorHandle self, int32_t* stable,
                                                         int64_t dim, int32_t descending,
                                                         AtenTensorHandle* ret0,
                                                         AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_kthvalue(AtenTensorHandle self, int64_t k, int64_t dim,
                                                      int32_t keepdim, AtenTensorHandle* ret0,
                                                      AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_mode(AtenTensorHandle self, int64_t dim,
                                                  int32_t keepdim, AtenTensorHandle* ret0,
                                                  AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_median(AtenTensorHandle self, AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_nanmedian(AtenTensorHandle self,
                                                       AtenTensorHandle* ret0);

// Pooling with windows too large for Inductor's own loops (shim_pool.cpp).
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_avg_pool2d(
    AtenTensorHandle self, const int64_t* kernel_size, int64_t kernel_size_len_,
    const int64_t* stride, int64_t stride_len_, const int64_t* padding, int64_t padding_len_,
    int32_t ceil_mode, int32_t count_include_pad, int64_t* divisor_override,
    AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_adaptive_max_pool2d(AtenTensorHandle self,
                                                                 const int64_t* output_size,
                                                                 int64_t output_size_len_,
                                                                 AtenTensorHandle* ret0,
                                                                 AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_avg_pool3d(
    AtenTensorHandle self, const int64_t* kernel_size, int64_t kernel_size_len_,
    const int64_t* stride, int64_t stride_len_, const int64_t* padding, int64_t padding_len_,
    int32_t ceil_mode, int32_t count_include_pad, int64_t* divisor_override,
    AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_max_pool2d_with_indices(
    AtenTensorHandle self, const int64_t* kernel_size, int64_t kernel_size_len_,
    const int64_t* stride, int64_t stride_len_, const int64_t* padding, int64_t padding_len_,
    const int64_t* dilation, int64_t dilation_len_, int32_t ceil_mode, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_max_pool3d_with_indices(
    AtenTensorHandle self, const int64_t* kernel_size, int64_t kernel_size_len_,
    const int64_t* stride, int64_t stride_len_, const int64_t* padding, int64_t padding_len_,
    const int64_t* dilation, int64_t dilation_len_, int32_t ceil_mode, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_adaptive_max_pool3d(AtenTensorHandle self,
                                                                 const int64_t* output_size,
                                                                 int64_t output_size_len_,
                                                                 AtenTensorHandle* ret0,
                                                                 AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu__adaptive_avg_pool2d(AtenTensorHandle self,
                                                                  const int64_t* output_size,
                                                                  int64_t output_size_len_,
                                                                  AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu__adaptive_avg_pool3d(AtenTensorHandle self,
                                                                  const int64_t* output_size,
                                                                  int64_t output_size_len_,
                                                                  AtenTensorHandle* ret0);

// Pairwise distances (shim_cdist.cpp).
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu__cdist_forward(AtenTensorHandle x1,
                                                            AtenTensorHandle x2, double p,
                                                            int64_t* compute_mode,
                                                            AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu__pdist_forward(AtenTensorHandle self, double p,
                                                            AtenTensorHandle* ret0);

// Histograms and volumetric grid sampling (shim_histogram.cpp, shim_grid_sample.cpp).
// Random draws (shim_random.cpp): uniform integers in [low, high) into out,
// from the process-wide generator that shimkit_shim_manual_seed seeds.
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_randint_low_out(AtenTensorHandle out, int64_t low,
                                                             int64_t high, const int64_t* size,
                                                             int64_t size_len_);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_histc(AtenTensorHandle self, int64_t bins, double min,
                                                   double max, AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_grid_sampler_3d(
    AtenTensorHandle input, AtenTensorHandle grid, int64_t interpolation_mode, int64_t padding_mode,
    int32_t align_corners, AtenTensorHandle* ret0);

// Selections sized by the data (shim_select.cpp).
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_nonzero(AtenTensorHandle self, AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_masked_select(AtenTensorHandle self,
                                                           AtenTensorHandle mask,
                                                           AtenTensorHandle* ret0);

// Attention, embedding bags and recurrent layers (shim_attention.cpp,
// shim_embedding.cpp, shim_rnn.cpp).
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu__scaled_dot_product_flash_attention_for_cpu(
    AtenTensorHandle query, AtenTensorHandle key, AtenTensorHandle value, double dropout_p,
    int32_t is_causal, AtenTensorHandle* attn_mask, double* scale, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu__embedding_bag(
    AtenTensorHandle weight, AtenTensorHandle indices, AtenTensorHandle offsets,
    int32_t scale_grad_by_freq, int64_t mode, int32_t sparse, AtenTensorHandle* per_sample_weights,
    int32_t include_last_offset, int64_t padding_idx, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1, AtenTensorHandle* ret2, AtenTensorHandle* ret3);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu__embedding_bag_forward_only(
    AtenTensorHandle weight, AtenTensorHandle indices, AtenTensorHandle offsets,
    int32_t scale_grad_by_freq, int64_t mode, int32_t sparse, AtenTensorHandle* per_sample_weights,
    int32_t include_last_offset, int64_t padding_idx, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1, AtenTensorHandle* ret2, AtenTensorHandle* ret3);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_mkldnn_rnn_layer(
    AtenTensorHandle input, AtenTensorHandle weight0, AtenTensorHandle weight1,
    AtenTensorHandle weight2, AtenTensorHandle weight3, AtenTensorHandle hx_, AtenTensorHandle cx_,
    int32_t reverse, const int64_t* batch_sizes, int64_t batch_sizes_len_, int64_t mode,
    int64_t hidden_size, int64_t num_layers, int32_t has_biases, int32_t bidirectional,
    int32_t batch_first, int32_t train, AtenTensorHandle* ret0, AtenTensorHandle* ret1,
    AtenTensorHandle* ret2, AtenTensorHandle* ret3);

// Scatter, scans and searches (shim_index.cpp, shim_scan.cpp, shim_search.cpp).
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_scatter_src_out(AtenTensorHandle out,
                                                             AtenTensorHandle self, int64_t dim,
                                                             AtenTensorHandle index,
                                                             AtenTensorHandle src);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_scatter_value_out(AtenTensorHandle out,
                                                               AtenTensorHandle self, int64_t dim,
                                                               AtenTensorHandle index,
                                                               double value);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_scatter_reduce_two_out(
    AtenTensorHandle out, AtenTensorHandle self, int64_t dim, AtenTensorHandle index,
    AtenTensorHandle src, const char* reduce, int32_t include_self);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_cumsum(AtenTensorHandle self, int64_t dim,
                                                    int32_t* dtype, AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_cumprod(AtenTensorHandle self, int64_t dim,
                                                     int32_t* dtype, AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_logcumsumexp(AtenTensorHandle self, int64_t dim,
                                                          AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_cummax(AtenTensorHandle self, int64_t dim,
                                                    AtenTensorHandle* ret0, AtenTensorHandle* ret1);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_cummin(AtenTensorHandle self, int64_t dim,
                                                    AtenTensorHandle* ret0, AtenTensorHandle* ret1);

SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_index_reduce(AtenTensorHandle self, int64_t dim,
                                                          AtenTensorHandle index,
                                                          AtenTensorHandle source,
                                                          const char* reduce, int32_t include_self,
                                                          AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_searchsorted_Tensor(
    AtenTensorHandle sorted_sequence, AtenTensorHandle self, int32_t out_int32, int32_t right,
    const char** side, AtenTensorHandle* sorter, AtenTensorHandle* ret0);
SHIMKIT_EXPORT AOTITorchError aoti_torch_cpu_bucketize_Tensor(AtenTensorHandle self,
                                                              AtenTensorHandle boundaries,
                                                              int32_t out_int32, int32_t right,
                                                              AtenTensorHandle* ret0);

// The check family (shim_check.cpp). aoti_torch_check throws a std::exception
// when `cond` is false, like libtorch's: blobs call it from C++ and their entry
// points turn the exception into a failed run.
SHIMKIT_EXPORT void aoti_torch_check(bool cond, const char* func, const char* file, uint32_t line,
                                     const char* msg);
SHIMKIT_EXPORT void aoti_torch_warn(const char* func, const char* file, uint32_t line,
                                    const char* msg);
SHIMKIT_EXPORT AOTITorchError aoti_torch_check_inf_and_nan(const char* tensor_name,
                                                           AtenTensorHandle tensor);

// Ops with no C shim reach libtorch through the proxy executor; the slim
// runtime has none and reports a clear error instead.
SHIMKIT_EXPORT AOTITorchError aoti_torch_proxy_executor_call_function(
    AOTIProxyExecutorHandle proxy_executor, int extern_node_index, int num_ints,
    int64_t* flatten_int_args, int num_tensors, AtenTensorHandle* flatten_tensor_args);

// Not part of torch's ABI (no shim-family name): the last error message of
// the calling thread, "" if none. Valid until the next shim call on the thread.
SHIMKIT_EXPORT const char* shimkit_shim_last_error(void);
SHIMKIT_EXPORT void shimkit_shim_clear_error(void);

// Not part of torch's ABI: the blob loader sets a watch on the thread that
// creates a model container. While it is set, host tensors made from blobs
// (create_tensor_from_blob) are the blob's constants, which AOTInductor
// copies one by one, in order, out of the blob's embedded constants section
// [source, source + size) into memory it allocates; while each one's bytes
// equal the next bytes of the section, `consumed(context, n)` reports that the
// section's first n bytes have been copied (the loader gives them back, so
// the weights are not held twice while the container is created).
SHIMKIT_EXPORT void shimkit_shim_watch_constants(const void* source, size_t size,
                                                 void (*consumed)(void* context, size_t bytes),
                                                 void* context);
SHIMKIT_EXPORT void shimkit_shim_unwatch_constants(void);

// Not part of torch's ABI: the blob's own code reads this constant's bytes
// only through shim calls (never through the address AOTInductor cached when
// it made the constant), so a copy a shim keeps in another layout may stand
// in for them: a convolution's packed weights then replace the plain ones,
// whose pages go back to the system, and any shim that asks for the plain
// bytes again gets them rebuilt first. The runtime calls it, before the first
// run, for the constants the blob's wrapper source shows so (docs/runtime.md,
// "Memory"). Returns 1 if `constant` is one the loader saw copied out of the
// blob (only those can be given back), else 0.
SHIMKIT_EXPORT int shimkit_shim_allow_stand_in(AtenTensorHandle constant);

// Not part of torch's ABI: whether the calling thread's float32 GEMMs (addmm,
// mm) may run on oneDNN's matmul (1, the default) or stay on OpenBLAS (0);
// returns the previous setting. The blob loader turns it off while a model
// that does not convolve is created or runs: for that model oneDNN would be
// opened for its GEMMs alone, ~4 MB of resident library pages next to
// OpenBLAS, which the shims always hold (docs/runtime.md, "Memory").
SHIMKIT_EXPORT int shimkit_shim_set_onednn_gemm(int enabled);

// Not part of torch's ABI: seeds the generator random ops draw from (as
// torch.manual_seed does torch's): after the same seed, a program's random
// values repeat. Unseeded, it starts from SHIMKIT_SEED, else from entropy.
SHIMKIT_EXPORT void shimkit_shim_manual_seed(uint64_t seed);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // SHIMKIT_SHIMS_AOTI_SHIM_ABI_H_
