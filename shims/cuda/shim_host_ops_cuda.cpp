// Slim CUDA shims, part 3: the fallback ops with no device kernel here (sort,
// topk, the order statistics, embedding_bag, index_reduce, scatter_reduce,
// large-window pooling, baddbmm, addbmm, nonzero, masked_select, cummax,
// cummin, cdist, pdist, histc, grid_sampler_3d), run by their CPU
// shims on host mirrors of the device tensors (host_fallback.h). Inductor
// turns most index, scan, search and pooling ops of a CUDA model into Triton
// kernels; these are the ones it leaves to ATen.
#include <array>

#include "shims/cuda/aoti_shim_cuda_abi.h"
#include "shims/cuda/host_fallback.h"
#include "shims/shim_internal.h"

// Like SHIMKIT_GUARD, for bodies with top-level commas.
#define SHIMKIT_CUDA_GUARD(...) ::shimkit::guard(__func__, [&]() __VA_ARGS__)

namespace cu = shimkit::cuda;
using shimkit::as_tensor;
using shimkit::SlimTensor;

extern "C" {

AOTITorchError aoti_torch_cuda_topk(AtenTensorHandle self, int64_t k, int64_t dim, int32_t largest,
                                    int32_t sorted, AtenTensorHandle* ret0,
                                    AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<2>(cu::cuda_device_of(self, "topk"), {ret0, ret1}, [&](auto& out) {
      return aoti_torch_cpu_topk(host(self), k, dim, largest, sorted, &out[0].h, &out[1].h);
    });
  });
}

AOTITorchError aoti_torch_cuda_sort_stable(AtenTensorHandle self, int32_t* stable, int64_t dim,
                                           int32_t descending, AtenTensorHandle* ret0,
                                           AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<2>(cu::cuda_device_of(self, "sort"), {ret0, ret1}, [&](auto& out) {
      return aoti_torch_cpu_sort_stable(host(self), stable, dim, descending, &out[0].h, &out[1].h);
    });
  });
}

AOTITorchError aoti_torch_cuda_kthvalue(AtenTensorHandle self, int64_t k, int64_t dim,
                                        int32_t keepdim, AtenTensorHandle* ret0,
                                        AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<2>(cu::cuda_device_of(self, "kthvalue"), {ret0, ret1}, [&](auto& out) {
      return aoti_torch_cpu_kthvalue(host(self), k, dim, keepdim, &out[0].h, &out[1].h);
    });
  });
}

AOTITorchError aoti_torch_cuda_mode(AtenTensorHandle self, int64_t dim, int32_t keepdim,
                                    AtenTensorHandle* ret0, AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<2>(cu::cuda_device_of(self, "mode"), {ret0, ret1}, [&](auto& out) {
      return aoti_torch_cpu_mode(host(self), dim, keepdim, &out[0].h, &out[1].h);
    });
  });
}

AOTITorchError aoti_torch_cuda_median(AtenTensorHandle self, AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<1>(cu::cuda_device_of(self, "median"), {ret0},
                           [&](auto& out) { return aoti_torch_cpu_median(host(self), &out[0].h); });
  });
}

AOTITorchError aoti_torch_cuda_nanmedian(AtenTensorHandle self, AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<1>(cu::cuda_device_of(self, "nanmedian"), {ret0}, [&](auto& out) {
      return aoti_torch_cpu_nanmedian(host(self), &out[0].h);
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
    cu::HostMirrors host;
    AtenTensorHandle host_weights = per_sample_weights ? host(*per_sample_weights) : nullptr;
    cu::results_on_host<4>(
        cu::cuda_device_of(weight, "embedding_bag"), {ret0, ret1, ret2, ret3}, [&](auto& out) {
          return aoti_torch_cpu__embedding_bag(
              host(weight), host(indices), host(offsets), scale_grad_by_freq, mode, sparse,
              per_sample_weights ? &host_weights : nullptr, include_last_offset, padding_idx,
              &out[0].h, &out[1].h, &out[2].h, &out[3].h);
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
    cu::HostMirrors host;
    cu::results_on_host<1>(cu::cuda_device_of(self, "index_reduce"), {ret0}, [&](auto& out) {
      return aoti_torch_cpu_index_reduce(host(self), dim, host(index), host(source), reduce,
                                         include_self, &out[0].h);
    });
  });
}

AOTITorchError aoti_torch_cuda_scatter_reduce_two_out(AtenTensorHandle out, AtenTensorHandle self,
                                                      int64_t dim, AtenTensorHandle index,
                                                      AtenTensorHandle src, const char* reduce,
                                                      int32_t include_self) {
  return SHIMKIT_CUDA_GUARD({
    const SlimTensor& o = as_tensor(out);
    cu::cuda_device_of(out, "scatter_reduce");
    cu::on_host_into(o, {&as_tensor(self), &as_tensor(index), &as_tensor(src)},
                     [&](SlimTensor& ho, std::vector<SlimTensor>& in) {
                       return aoti_torch_cpu_scatter_reduce_two_out(
                           cu::borrow_handle(ho), cu::borrow_handle(in[0]), dim,
                           cu::borrow_handle(in[1]), cu::borrow_handle(in[2]), reduce,
                           include_self);
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
    cu::HostMirrors host;
    cu::results_on_host<1>(cu::cuda_device_of(self, "avg_pool2d"), {ret0}, [&](auto& out) {
      return aoti_torch_cpu_avg_pool2d(host(self), kernel_size, kernel_size_len_, stride,
                                       stride_len_, padding, padding_len_, ceil_mode,
                                       count_include_pad, divisor_override, &out[0].h);
    });
  });
}

AOTITorchError aoti_torch_cuda_adaptive_max_pool2d(AtenTensorHandle self,
                                                   const int64_t* output_size,
                                                   int64_t output_size_len_, AtenTensorHandle* ret0,
                                                   AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<2>(cu::cuda_device_of(self, "adaptive_max_pool2d"), {ret0, ret1},
                           [&](auto& out) {
                             return aoti_torch_cpu_adaptive_max_pool2d(
                                 host(self), output_size, output_size_len_, &out[0].h, &out[1].h);
                           });
  });
}

AOTITorchError aoti_torch_cuda_avg_pool3d(AtenTensorHandle self, const int64_t* kernel_size,
                                          int64_t kernel_size_len_, const int64_t* stride,
                                          int64_t stride_len_, const int64_t* padding,
                                          int64_t padding_len_, int32_t ceil_mode,
                                          int32_t count_include_pad, int64_t* divisor_override,
                                          AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<1>(cu::cuda_device_of(self, "avg_pool3d"), {ret0}, [&](auto& out) {
      return aoti_torch_cpu_avg_pool3d(host(self), kernel_size, kernel_size_len_, stride,
                                       stride_len_, padding, padding_len_, ceil_mode,
                                       count_include_pad, divisor_override, &out[0].h);
    });
  });
}

AOTITorchError aoti_torch_cuda_max_pool2d_with_indices(
    AtenTensorHandle self, const int64_t* kernel_size, int64_t kernel_size_len_,
    const int64_t* stride, int64_t stride_len_, const int64_t* padding, int64_t padding_len_,
    const int64_t* dilation, int64_t dilation_len_, int32_t ceil_mode, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<2>(
        cu::cuda_device_of(self, "max_pool2d_with_indices"), {ret0, ret1}, [&](auto& out) {
          return aoti_torch_cpu_max_pool2d_with_indices(
              host(self), kernel_size, kernel_size_len_, stride, stride_len_, padding, padding_len_,
              dilation, dilation_len_, ceil_mode, &out[0].h, &out[1].h);
        });
  });
}

AOTITorchError aoti_torch_cuda_max_pool3d_with_indices(
    AtenTensorHandle self, const int64_t* kernel_size, int64_t kernel_size_len_,
    const int64_t* stride, int64_t stride_len_, const int64_t* padding, int64_t padding_len_,
    const int64_t* dilation, int64_t dilation_len_, int32_t ceil_mode, AtenTensorHandle* ret0,
    AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<2>(
        cu::cuda_device_of(self, "max_pool3d_with_indices"), {ret0, ret1}, [&](auto& out) {
          return aoti_torch_cpu_max_pool3d_with_indices(
              host(self), kernel_size, kernel_size_len_, stride, stride_len_, padding, padding_len_,
              dilation, dilation_len_, ceil_mode, &out[0].h, &out[1].h);
        });
  });
}

AOTITorchError aoti_torch_cuda_adaptive_max_pool3d(AtenTensorHandle self,
                                                   const int64_t* output_size,
                                                   int64_t output_size_len_, AtenTensorHandle* ret0,
                                                   AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<2>(cu::cuda_device_of(self, "adaptive_max_pool3d"), {ret0, ret1},
                           [&](auto& out) {
                             return aoti_torch_cpu_adaptive_max_pool3d(
                                 host(self), output_size, output_size_len_, &out[0].h, &out[1].h);
                           });
  });
}

AOTITorchError aoti_torch_cuda__adaptive_avg_pool2d(AtenTensorHandle self,
                                                    const int64_t* output_size,
                                                    int64_t output_size_len_,
                                                    AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<1>(cu::cuda_device_of(self, "_adaptive_avg_pool2d"), {ret0},
                           [&](auto& out) {
                             return aoti_torch_cpu__adaptive_avg_pool2d(
                                 host(self), output_size, output_size_len_, &out[0].h);
                           });
  });
}

AOTITorchError aoti_torch_cuda__adaptive_avg_pool3d(AtenTensorHandle self,
                                                    const int64_t* output_size,
                                                    int64_t output_size_len_,
                                                    AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<1>(cu::cuda_device_of(self, "_adaptive_avg_pool3d"), {ret0},
                           [&](auto& out) {
                             return aoti_torch_cpu__adaptive_avg_pool3d(
                                 host(self), output_size, output_size_len_, &out[0].h);
                           });
  });
}

AOTITorchError aoti_torch_cuda_nonzero(AtenTensorHandle self, AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<1>(cu::cuda_device_of(self, "nonzero"), {ret0}, [&](auto& out) {
      return aoti_torch_cpu_nonzero(host(self), &out[0].h);
    });
  });
}

AOTITorchError aoti_torch_cuda_masked_select(AtenTensorHandle self, AtenTensorHandle mask,
                                             AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<1>(cu::cuda_device_of(self, "masked_select"), {ret0}, [&](auto& out) {
      return aoti_torch_cpu_masked_select(host(self), host(mask), &out[0].h);
    });
  });
}

AOTITorchError aoti_torch_cuda_cummax(AtenTensorHandle self, int64_t dim, AtenTensorHandle* ret0,
                                      AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<2>(cu::cuda_device_of(self, "cummax"), {ret0, ret1}, [&](auto& out) {
      return aoti_torch_cpu_cummax(host(self), dim, &out[0].h, &out[1].h);
    });
  });
}

AOTITorchError aoti_torch_cuda_cummin(AtenTensorHandle self, int64_t dim, AtenTensorHandle* ret0,
                                      AtenTensorHandle* ret1) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<2>(cu::cuda_device_of(self, "cummin"), {ret0, ret1}, [&](auto& out) {
      return aoti_torch_cpu_cummin(host(self), dim, &out[0].h, &out[1].h);
    });
  });
}

AOTITorchError aoti_torch_cuda__cdist_forward(AtenTensorHandle x1, AtenTensorHandle x2, double p,
                                              int64_t* compute_mode, AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<1>(cu::cuda_device_of(x1, "cdist"), {ret0}, [&](auto& out) {
      return aoti_torch_cpu__cdist_forward(host(x1), host(x2), p, compute_mode, &out[0].h);
    });
  });
}

AOTITorchError aoti_torch_cuda__pdist_forward(AtenTensorHandle self, double p,
                                              AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<1>(cu::cuda_device_of(self, "pdist"), {ret0}, [&](auto& out) {
      return aoti_torch_cpu__pdist_forward(host(self), p, &out[0].h);
    });
  });
}

AOTITorchError aoti_torch_cuda_histc(AtenTensorHandle self, int64_t bins, double min, double max,
                                     AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<1>(cu::cuda_device_of(self, "histc"), {ret0}, [&](auto& out) {
      return aoti_torch_cpu_histc(host(self), bins, min, max, &out[0].h);
    });
  });
}

AOTITorchError aoti_torch_cuda_grid_sampler_3d(AtenTensorHandle input, AtenTensorHandle grid,
                                               int64_t interpolation_mode, int64_t padding_mode,
                                               int32_t align_corners, AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<1>(cu::cuda_device_of(input, "grid_sampler_3d"), {ret0}, [&](auto& out) {
      return aoti_torch_cpu_grid_sampler_3d(host(input), host(grid), interpolation_mode,
                                            padding_mode, align_corners, &out[0].h);
    });
  });
}

AOTITorchError aoti_torch_cuda_addbmm(AtenTensorHandle self, AtenTensorHandle batch1,
                                      AtenTensorHandle batch2, double beta, double alpha,
                                      AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    cu::HostMirrors host;
    cu::results_on_host<1>(cu::cuda_device_of(batch1, "addbmm"), {ret0}, [&](auto& out) {
      return aoti_torch_cpu_addbmm(host(self), host(batch1), host(batch2), beta, alpha, &out[0].h);
    });
  });
}

AOTITorchError aoti_torch_cuda_baddbmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                           AtenTensorHandle batch1, AtenTensorHandle batch2,
                                           double beta, double alpha) {
  return SHIMKIT_CUDA_GUARD({
    const SlimTensor& o = as_tensor(out);
    cu::cuda_device_of(out, "baddbmm");
    cu::on_host_into(o, {&as_tensor(self), &as_tensor(batch1), &as_tensor(batch2)},
                     [&](SlimTensor& ho, std::vector<SlimTensor>& in) {
                       return aoti_torch_cpu_baddbmm_out(
                           cu::borrow_handle(ho), cu::borrow_handle(in[0]),
                           cu::borrow_handle(in[1]), cu::borrow_handle(in[2]), beta, alpha);
                     });
  });
}

}  // extern "C"
