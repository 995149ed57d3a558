// Slim CUDA shims, part 3: the fallback ops with no device kernel here (sort,
// topk, the order statistics, embedding_bag, index_reduce, scatter, scatter_reduce,
// large-window pooling, baddbmm, addbmm, nonzero, masked_select, cummax,
// cummin, cdist, pdist, histc, grid_sampler_3d, the random ops' seeds), run by their CPU
// shims on host copies of the device tensors (host_fallback.h), eagerly or
// as host steps of a CUDA graph (all but nonzero and masked_select, whose
// result sizes depend on the data). Inductor turns most index, scan, search
// and pooling ops of a CUDA model into Triton kernels; these are the ones it
// leaves to ATen.
#include <string>

#include "shims/cuda/aoti_shim_cuda_abi.h"
#include "shims/cuda/host_fallback.h"
#include "shims/shim_internal.h"

// Like SHIMKIT_GUARD, for bodies with top-level commas.
#define SHIMKIT_CUDA_GUARD(...) ::shimkit::guard(__func__, [&]() __VA_ARGS__)

namespace cu = shimkit::cuda;
using cu::HostInputs;
using cu::OwnedInts;

namespace {

// The pools' host paths, one per family: the 2-D and 3-D CPU shims of a
// family take the same arguments, so each entry point below only names its
// CPU shim.
using AvgPoolCpu = decltype(&aoti_torch_cpu_avg_pool2d);
using MaxPoolCpu = decltype(&aoti_torch_cpu_max_pool2d_with_indices);
using AdaptiveMaxPoolCpu = decltype(&aoti_torch_cpu_adaptive_max_pool2d);
using AdaptiveAvgPoolCpu = decltype(&aoti_torch_cpu__adaptive_avg_pool2d);

void avg_pool_on_host(const char* what, AvgPoolCpu cpu, AtenTensorHandle self, OwnedInts kernel,
                      OwnedInts strides, OwnedInts paddings, int32_t ceil_mode,
                      int32_t count_include_pad, const int64_t* divisor_override,
                      AtenTensorHandle* ret0) {
  const cu::OwnedOptional<int64_t> divisor(divisor_override);
  cu::results_on_host(what, {ret0}, {self}, [=](const HostInputs& in, AtenTensorHandle* out) {
    return cpu(in[0], kernel.data(), kernel.size(), strides.data(), strides.size(), paddings.data(),
               paddings.size(), ceil_mode, count_include_pad, divisor.get(), &out[0]);
  });
}

void max_pool_on_host(const char* what, MaxPoolCpu cpu, AtenTensorHandle self, OwnedInts kernel,
                      OwnedInts strides, OwnedInts paddings, OwnedInts dilations, int32_t ceil_mode,
                      AtenTensorHandle* ret0, AtenTensorHandle* ret1) {
  cu::results_on_host(what, {ret0, ret1}, {self}, [=](const HostInputs& in, AtenTensorHandle* out) {
    return cpu(in[0], kernel.data(), kernel.size(), strides.data(), strides.size(), paddings.data(),
               paddings.size(), dilations.data(), dilations.size(), ceil_mode, &out[0], &out[1]);
  });
}

void adaptive_max_pool_on_host(const char* what, AdaptiveMaxPoolCpu cpu, AtenTensorHandle self,
                               OwnedInts size, AtenTensorHandle* ret0, AtenTensorHandle* ret1) {
  cu::results_on_host(what, {ret0, ret1}, {self}, [=](const HostInputs& in, AtenTensorHandle* out) {
    return cpu(in[0], size.data(), size.size(), &out[0], &out[1]);
  });
}

void adaptive_avg_pool_on_host(const char* what, AdaptiveAvgPoolCpu cpu, AtenTensorHandle self,
                               OwnedInts size, AtenTensorHandle* ret0) {
  cu::results_on_host(what, {ret0}, {self}, [=](const HostInputs& in, AtenTensorHandle* out) {
    return cpu(in[0], size.data(), size.size(), &out[0]);
  });
}

}  // namespace

extern "C" {

AOTITorchError aoti_torch_cuda_topk(AtenTensorHandle self, int64_t k, int64_t dim, int32_t largest,
                                    int32_t sorted, AtenTensorHandle* ret0,
                                    AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    cu::results_on_host(
        "topk", {ret0, ret1}, {self}, [=](const HostInputs& in, AtenTensorHandle* out) {
          return aoti_torch_cpu_topk(in[0], k, dim, largest, sorted, &out[0], &out[1]);
        });
  });
}

AOTITorchError aoti_torch_cuda_sort_stable(AtenTensorHandle self, int32_t* stable, int64_t dim,
                                           int32_t descending, AtenTensorHandle* ret0,
                                           AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    const cu::OwnedOptional<int32_t> is_stable(stable);
    cu::results_on_host("sort", {ret0, ret1}, {self},
                        [=](const HostInputs& in, AtenTensorHandle* out) {
                          return aoti_torch_cpu_sort_stable(in[0], is_stable.get(), dim, descending,
                                                            &out[0], &out[1]);
                        });
  });
}

AOTITorchError aoti_torch_cuda_kthvalue(AtenTensorHandle self, int64_t k, int64_t dim,
                                        int32_t keepdim, AtenTensorHandle* ret0,
                                        AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    cu::results_on_host("kthvalue", {ret0, ret1}, {self},
                        [=](const HostInputs& in, AtenTensorHandle* out) {
                          return aoti_torch_cpu_kthvalue(in[0], k, dim, keepdim, &out[0], &out[1]);
                        });
  });
}

AOTITorchError aoti_torch_cuda_mode(AtenTensorHandle self, int64_t dim, int32_t keepdim,
                                    AtenTensorHandle* ret0, AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    cu::results_on_host("mode", {ret0, ret1}, {self},
                        [=](const HostInputs& in, AtenTensorHandle* out) {
                          return aoti_torch_cpu_mode(in[0], dim, keepdim, &out[0], &out[1]);
                        });
  });
}

AOTITorchError aoti_torch_cuda_median(AtenTensorHandle self, AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::results_on_host("median", {ret0}, {self}, [](const HostInputs& in, AtenTensorHandle* out) {
      return aoti_torch_cpu_median(in[0], &out[0]);
    });
  });
}

AOTITorchError aoti_torch_cuda_nanmedian(AtenTensorHandle self, AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::results_on_host("nanmedian", {ret0}, {self},
                        [](const HostInputs& in, AtenTensorHandle* out) {
                          return aoti_torch_cpu_nanmedian(in[0], &out[0]);
                        });
  });
}

AOTITorchError aoti_torch_cuda__embedding_bag(AtenTensorHandle weight, AtenTensorHandle indices,
                                              AtenTensorHandle offsets, int32_t scale_grad_by_freq,
                                              int64_t mode, int32_t sparse,
                                              AtenTensorHandle* per_sample_weights,
                                              int32_t include_last_offset, int64_t padding_idx,
                                              AtenTensorHandle* ret0, AtenTensorHandle* ret1,
                                              AtenTensorHandle* ret2, AtenTensorHandle* ret3) {
  return SHIMKIT_CUDA_GUARD({
    AtenTensorHandle sample_weights = per_sample_weights != nullptr ? *per_sample_weights : nullptr;
    cu::results_on_host("embedding_bag", {ret0, ret1, ret2, ret3},
                        {weight, indices, offsets, sample_weights},
                        [=](const HostInputs& in, AtenTensorHandle* out) {
                          AtenTensorHandle host_weights = in[3];
                          return aoti_torch_cpu__embedding_bag(
                              in[0], in[1], in[2], scale_grad_by_freq, mode, sparse,
                              host_weights != nullptr ? &host_weights : nullptr,
                              include_last_offset, padding_idx, &out[0], &out[1], &out[2], &out[3]);
                        });
  });
}

AOTITorchError aoti_torch_cuda__embedding_bag_forward_only(
    AtenTensorHandle weight, AtenTensorHandle indices, AtenTensorHandle offsets,
    int32_t scale_grad_by_freq, int64_t mode, int32_t sparse, AtenTensorHandle* per_sample_weights,
    int32_t include_last_offset, int64_t padding_idx, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1, AtenTensorHandle* ret2, AtenTensorHandle* ret3) {
  return aoti_torch_cuda__embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
                                        per_sample_weights, include_last_offset, padding_idx, ret0,
                                        ret1, ret2, ret3);
}

AOTITorchError aoti_torch_cuda_index_reduce(AtenTensorHandle self, int64_t dim,
                                            AtenTensorHandle index, AtenTensorHandle source,
                                            const char* reduce, int32_t include_self,
                                            AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    const std::string how = reduce != nullptr ? reduce : "";
    cu::results_on_host("index_reduce", {ret0}, {self, index, source},
                        [=](const HostInputs& in, AtenTensorHandle* out) {
                          return aoti_torch_cpu_index_reduce(in[0], dim, in[1], in[2], how.c_str(),
                                                             include_self, &out[0]);
                        });
  });
}

AOTITorchError aoti_torch_cuda_scatter_src_out(AtenTensorHandle out, AtenTensorHandle self,
                                               int64_t dim, AtenTensorHandle index,
                                               AtenTensorHandle src) {
  return SHIMKIT_CUDA_GUARD({
    cu::on_host_into("scatter", out, {self, index, src},
                     [=](AtenTensorHandle host_out, const HostInputs& in) {
                       return aoti_torch_cpu_scatter_src_out(host_out, in[0], dim, in[1], in[2]);
                     });
  });
}

AOTITorchError aoti_torch_cuda_scatter_value_out(AtenTensorHandle out, AtenTensorHandle self,
                                                 int64_t dim, AtenTensorHandle index,
                                                 double value) {
  return SHIMKIT_CUDA_GUARD({
    cu::on_host_into("scatter", out, {self, index},
                     [=](AtenTensorHandle host_out, const HostInputs& in) {
                       return aoti_torch_cpu_scatter_value_out(host_out, in[0], dim, in[1], value);
                     });
  });
}

AOTITorchError aoti_torch_cuda_scatter_reduce_two_out(AtenTensorHandle out, AtenTensorHandle self,
                                                      int64_t dim, AtenTensorHandle index,
                                                      AtenTensorHandle src, const char* reduce,
                                                      int32_t include_self) {
  return SHIMKIT_CUDA_GUARD({
    const std::string how = reduce != nullptr ? reduce : "";
    cu::on_host_into("scatter_reduce", out, {self, index, src},
                     [=](AtenTensorHandle host_out, const HostInputs& in) {
                       return aoti_torch_cpu_scatter_reduce_two_out(
                           host_out, in[0], dim, in[1], in[2], how.c_str(), include_self);
                     });
  });
}

AOTITorchError aoti_torch_cuda_avg_pool2d(AtenTensorHandle self, const int64_t* kernel_size,
                                          int64_t kernel_size_len_, const int64_t* stride,
                                          int64_t stride_len_, const int64_t* padding,
                                          int64_t padding_len_, int32_t ceil_mode,
                                          int32_t count_include_pad, int64_t* divisor_override,
                                          AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    avg_pool_on_host("avg_pool2d", aoti_torch_cpu_avg_pool2d, self, {kernel_size, kernel_size_len_},
                     {stride, stride_len_}, {padding, padding_len_}, ceil_mode, count_include_pad,
                     divisor_override, ret0);
  });
}

AOTITorchError aoti_torch_cuda_avg_pool3d(AtenTensorHandle self, const int64_t* kernel_size,
                                          int64_t kernel_size_len_, const int64_t* stride,
                                          int64_t stride_len_, const int64_t* padding,
                                          int64_t padding_len_, int32_t ceil_mode,
                                          int32_t count_include_pad, int64_t* divisor_override,
                                          AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    avg_pool_on_host("avg_pool3d", aoti_torch_cpu_avg_pool3d, self, {kernel_size, kernel_size_len_},
                     {stride, stride_len_}, {padding, padding_len_}, ceil_mode, count_include_pad,
                     divisor_override, ret0);
  });
}

AOTITorchError aoti_torch_cuda_max_pool2d_with_indices(
    AtenTensorHandle self, const int64_t* kernel_size, int64_t kernel_size_len_,
    const int64_t* stride, int64_t stride_len_, const int64_t* padding, int64_t padding_len_,
    const int64_t* dilation, int64_t dilation_len_, int32_t ceil_mode, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    max_pool_on_host("max_pool2d_with_indices", aoti_torch_cpu_max_pool2d_with_indices, self,
                     {kernel_size, kernel_size_len_}, {stride, stride_len_},
                     {padding, padding_len_}, {dilation, dilation_len_}, ceil_mode, ret0, ret1);
  });
}

AOTITorchError aoti_torch_cuda_max_pool3d_with_indices(
    AtenTensorHandle self, const int64_t* kernel_size, int64_t kernel_size_len_,
    const int64_t* stride, int64_t stride_len_, const int64_t* padding, int64_t padding_len_,
    const int64_t* dilation, int64_t dilation_len_, int32_t ceil_mode, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    max_pool_on_host("max_pool3d_with_indices", aoti_torch_cpu_max_pool3d_with_indices, self,
                     {kernel_size, kernel_size_len_}, {stride, stride_len_},
                     {padding, padding_len_}, {dilation, dilation_len_}, ceil_mode, ret0, ret1);
  });
}

AOTITorchError aoti_torch_cuda_adaptive_max_pool2d(AtenTensorHandle self,
                                                   const int64_t* output_size,
                                                   int64_t output_size_len_, AtenTensorHandle* ret0,
                                                   AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    adaptive_max_pool_on_host("adaptive_max_pool2d", aoti_torch_cpu_adaptive_max_pool2d, self,
                              {output_size, output_size_len_}, ret0, ret1);
  });
}

AOTITorchError aoti_torch_cuda_adaptive_max_pool3d(AtenTensorHandle self,
                                                   const int64_t* output_size,
                                                   int64_t output_size_len_, AtenTensorHandle* ret0,
                                                   AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    adaptive_max_pool_on_host("adaptive_max_pool3d", aoti_torch_cpu_adaptive_max_pool3d, self,
                              {output_size, output_size_len_}, ret0, ret1);
  });
}

AOTITorchError aoti_torch_cuda__adaptive_avg_pool2d(AtenTensorHandle self,
                                                    const int64_t* output_size,
                                                    int64_t output_size_len_,
                                                    AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    adaptive_avg_pool_on_host("_adaptive_avg_pool2d", aoti_torch_cpu__adaptive_avg_pool2d, self,
                              {output_size, output_size_len_}, ret0);
  });
}

AOTITorchError aoti_torch_cuda__adaptive_avg_pool3d(AtenTensorHandle self,
                                                    const int64_t* output_size,
                                                    int64_t output_size_len_,
                                                    AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    adaptive_avg_pool_on_host("_adaptive_avg_pool3d", aoti_torch_cpu__adaptive_avg_pool3d, self,
                              {output_size, output_size_len_}, ret0);
  });
}

AOTITorchError aoti_torch_cuda_nonzero(AtenTensorHandle self, AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::results_on_host(
        "nonzero", {ret0}, {self},
        [](const HostInputs& in, AtenTensorHandle* out) {
          return aoti_torch_cpu_nonzero(in[0], &out[0]);
        },
        cu::ResultSizes::kFromData);
  });
}

AOTITorchError aoti_torch_cuda_masked_select(AtenTensorHandle self, AtenTensorHandle mask,
                                             AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::results_on_host(
        "masked_select", {ret0}, {self, mask},
        [](const HostInputs& in, AtenTensorHandle* out) {
          return aoti_torch_cpu_masked_select(in[0], in[1], &out[0]);
        },
        cu::ResultSizes::kFromData);
  });
}

AOTITorchError aoti_torch_cuda_cummax(AtenTensorHandle self, int64_t dim, AtenTensorHandle* ret0,
                                      AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    cu::results_on_host("cummax", {ret0, ret1}, {self},
                        [=](const HostInputs& in, AtenTensorHandle* out) {
                          return aoti_torch_cpu_cummax(in[0], dim, &out[0], &out[1]);
                        });
  });
}

AOTITorchError aoti_torch_cuda_cummin(AtenTensorHandle self, int64_t dim, AtenTensorHandle* ret0,
                                      AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    cu::results_on_host("cummin", {ret0, ret1}, {self},
                        [=](const HostInputs& in, AtenTensorHandle* out) {
                          return aoti_torch_cpu_cummin(in[0], dim, &out[0], &out[1]);
                        });
  });
}

AOTITorchError aoti_torch_cuda__cdist_forward(AtenTensorHandle x1, AtenTensorHandle x2, double p,
                                              int64_t* compute_mode, AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    const cu::OwnedOptional<int64_t> mode(compute_mode);
    cu::results_on_host(
        "cdist", {ret0}, {x1, x2}, [=](const HostInputs& in, AtenTensorHandle* out) {
          return aoti_torch_cpu__cdist_forward(in[0], in[1], p, mode.get(), &out[0]);
        });
  });
}

AOTITorchError aoti_torch_cuda__pdist_forward(AtenTensorHandle self, double p,
                                              AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::results_on_host("pdist", {ret0}, {self}, [=](const HostInputs& in, AtenTensorHandle* out) {
      return aoti_torch_cpu__pdist_forward(in[0], p, &out[0]);
    });
  });
}

AOTITorchError aoti_torch_cuda_histc(AtenTensorHandle self, int64_t bins, double min, double max,
                                     AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::results_on_host("histc", {ret0}, {self}, [=](const HostInputs& in, AtenTensorHandle* out) {
      return aoti_torch_cpu_histc(in[0], bins, min, max, &out[0]);
    });
  });
}

AOTITorchError aoti_torch_cuda_grid_sampler_3d(AtenTensorHandle input, AtenTensorHandle grid,
                                               int64_t interpolation_mode, int64_t padding_mode,
                                               int32_t align_corners, AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::results_on_host(
        "grid_sampler_3d", {ret0}, {input, grid}, [=](const HostInputs& in, AtenTensorHandle* out) {
          return aoti_torch_cpu_grid_sampler_3d(in[0], in[1], interpolation_mode, padding_mode,
                                                align_corners, &out[0]);
        });
  });
}

AOTITorchError aoti_torch_cuda_addbmm(AtenTensorHandle self, AtenTensorHandle batch1,
                                      AtenTensorHandle batch2, double beta, double alpha,
                                      AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    // batch1 first: its device is the result's.
    cu::results_on_host("addbmm", {ret0}, {batch1, batch2, self},
                        [=](const HostInputs& in, AtenTensorHandle* out) {
                          return aoti_torch_cpu_addbmm(in[2], in[0], in[1], beta, alpha, &out[0]);
                        });
  });
}

AOTITorchError aoti_torch_cuda_randint_low_out(AtenTensorHandle out, int64_t low, int64_t high,
                                               const int64_t* size, int64_t size_len_) {
  return SHIMKIT_CUDA_GUARD({
    const OwnedInts sizes(size, size_len_);
    cu::drawn_before_each_replay("randint", out, [=](AtenTensorHandle host_out, const HostInputs&) {
      return aoti_torch_cpu_randint_low_out(host_out, low, high, sizes.data(), sizes.size());
    });
  });
}

AOTITorchError aoti_torch_cuda_baddbmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                           AtenTensorHandle batch1, AtenTensorHandle batch2,
                                           double beta, double alpha) {
  return SHIMKIT_CUDA_GUARD({
    cu::on_host_into("baddbmm", out, {self, batch1, batch2},
                     [=](AtenTensorHandle host_out, const HostInputs& in) {
                       return aoti_torch_cpu_baddbmm_out(host_out, in[0], in[1], in[2], beta,
                                                         alpha);
                     });
  });
}

}  // extern "C"
