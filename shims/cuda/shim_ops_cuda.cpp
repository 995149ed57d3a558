// Slim CUDA shims, part 2: the CUDA fallback ops. mm/addmm/bmm (float32,
// float16, bfloat16) run on the device through cuBLAS(Lt) (dlopen'd), and
// convolution, plain and transposed, through cuDNN (cudnn_conv.h) when
// present; other dtypes and layouts cuBLAS or cuDNN cannot take run on the
// host through the CPU shims (host_fallback.h), with the results in the
// geometry ATen's CUDA op gives (its memory-format rules, channels_last
// included). Ops with no device kernel at all: shim_host_ops_cuda.cpp.
#include <algorithm>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "shims/cuda/aoti_shim_cuda_abi.h"
#include "shims/cuda/cuda_context.h"
#include "shims/cuda/cudnn_api.h"
#include "shims/cuda/cudnn_conv.h"
#include "shims/cuda/gemm.h"
#include "shims/cuda/host_fallback.h"
#include "shims/cuda/math_mode.h"
#include "shims/shim_internal.h"

// Like SHIMKIT_GUARD, for bodies with top-level commas.
#define SHIMKIT_CUDA_GUARD(...) ::shimkit::guard(__func__, [&]() __VA_ARGS__)

namespace cu = shimkit::cuda;
using shimkit::as_tensor;
using shimkit::check_out;
using shimkit::ShimError;
using shimkit::SlimTensor;
using shimkit::to_handle;

namespace {

// Operands a cuBLAS(Lt) product takes: CUDA tensors of one floating dtype.
bool gemm_operands(std::initializer_list<const SlimTensor*> ts) {
  const int32_t dtype = (*ts.begin())->dtype();
  if (dtype != shimkit::dtype::kFloat32 && dtype != shimkit::dtype::kFloat16 &&
      dtype != shimkit::dtype::kBFloat16) {
    return false;
  }
  for (const SlimTensor* t : ts) {
    if (!t->defined() || !cu::is_cuda(*t) || t->dtype() != dtype) return false;
  }
  return true;
}

void require_same_device(const SlimTensor& a, const SlimTensor& b, const char* what) {
  if (!cu::is_cuda(a) || !cu::is_cuda(b) || a.device_index() != b.device_index()) {
    throw ShimError(std::string(what) + ": tensors must be on one CUDA device");
  }
}

void require_matrix(const SlimTensor& t, const char* what) {
  if (t.dim() != 2) throw ShimError(std::string(what) + " must be a matrix");
}

// The host's convolution output `*h` in the memory format ATen's CUDA
// convolution gives (cuDNN's rule), which a CUDA blob was compiled against:
// the CPU's rule differs for 5-D outputs, which ATen's slow CPU kernels write
// contiguous where cuDNN writes channels_last_3d.
void in_cudnn_memory_format(bool channels_last, AtenTensorHandle* h) {
  const SlimTensor& result = as_tensor(*h);
  if (result.dim() != 5) return;  // 1-D and 2-D: the CPU and cuDNN rules agree
  const std::vector<int64_t> sizes = result.sizes().vec();
  const std::vector<int64_t> want =
      channels_last ? shimkit::channels_last_strides(sizes) : shimkit::contiguous_strides(sizes);
  if (result.strides().vec() == want) return;
  SlimTensor laid_out =
      SlimTensor::empty(sizes.data(), want.data(), 5, result.dtype(), shimkit::device::kCPU, -1);
  shimkit::copy_elements(laid_out, result);
  aoti_torch_delete_tensor_object(*h);
  *h = to_handle(std::move(laid_out));
}

}  // namespace

extern "C" {

AOTITorchError aoti_torch_zero_(AtenTensorHandle tensor) {
  return SHIMKIT_CUDA_GUARD({ cu::zero(as_tensor(tensor)); });
}

AOTITorchError aoti_torch_cuda_mm_out(AtenTensorHandle out, AtenTensorHandle self,
                                      AtenTensorHandle mat2) {
  return SHIMKIT_CUDA_GUARD({
    const SlimTensor& o = as_tensor(out);
    const SlimTensor& a = as_tensor(self);
    const SlimTensor& b = as_tensor(mat2);
    require_matrix(a, "mm self");
    require_matrix(b, "mm mat2");
    require_matrix(o, "mm out");
    require_same_device(a, b, "mm");
    require_same_device(a, o, "mm");
    if (a.sizes()[1] != b.sizes()[0] || o.sizes()[0] != a.sizes()[0] ||
        o.sizes()[1] != b.sizes()[1]) {
      throw ShimError("mm: shapes do not match");
    }
    if (gemm_operands({&o, &a, &b}) && cu::gemm(o, a, b, 1.0f, 0.0f)) return;
    cu::on_host_into("mm", out, {self, mat2},
                     [](AtenTensorHandle host_out, const cu::HostInputs& in) {
                       return aoti_torch_cpu_mm_out(host_out, in[0], in[1]);
                     });
  });
}

AOTITorchError aoti_torch_cuda_addmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                         AtenTensorHandle mat1, AtenTensorHandle mat2, double beta,
                                         double alpha) {
  return SHIMKIT_CUDA_GUARD({
    const SlimTensor& o = as_tensor(out);
    const SlimTensor& bias = as_tensor(self);
    const SlimTensor& a = as_tensor(mat1);
    const SlimTensor& b = as_tensor(mat2);
    require_matrix(a, "addmm mat1");
    require_matrix(b, "addmm mat2");
    require_matrix(o, "addmm out");
    require_same_device(a, b, "addmm");
    require_same_device(a, o, "addmm");
    require_same_device(a, bias, "addmm");
    const int64_t m = a.sizes()[0], n = b.sizes()[1];
    if (a.sizes()[1] != b.sizes()[0] || o.sizes()[0] != m || o.sizes()[1] != n) {
      throw ShimError("addmm: shapes do not match");
    }
    const bool on_blas = gemm_operands({&o, &a, &b, &bias});
    // Bias as a row vector (contiguous): [N], [1, N], or [M, N] with a row stride
    // of 0 (the row expanded over M, as Inductor's autotuned addmm passes it);
    // else a full [M, N] matrix.
    const bool one_row =
        bias.dim() == 2 && bias.sizes()[1] == n && (bias.sizes()[0] == 1 || bias.strides()[0] == 0);
    const bool row_bias =
        (bias.dim() == 1 && bias.sizes()[0] == n && (n <= 1 || bias.strides()[0] == 1)) ||
        (one_row && (n <= 1 || bias.strides()[1] == 1));
    const bool full_bias = bias.dim() == 2 && bias.sizes()[0] == m && bias.sizes()[1] == n;
    if (on_blas && m > 0 && n > 0) {
      const auto alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
      if (row_bias && beta != 0.0) {
        // cuBLASLt folds the bias into the GEMM (when beta is 1); legacy
        // cuBLAS broadcasts it with a rank-1 product first.
        if (cu::gemm(o, a, b, alpha_f, 0.0f, bias.data_ptr(), beta_f)) {
          return;
        }
      } else if (full_bias || beta == 0.0) {
        const cu::Operand oc = cu::operand(m, n, o.strides()[0], o.strides()[1]);
        if (oc.ok && oc.op == cu::kOpN) {
          if (full_bias && beta != 0.0 && bias.data_ptr() != o.data_ptr())
            shimkit::copy_tensor(o, bias);
          if (cu::gemm(o, a, b, alpha_f, beta == 0.0 ? 0.0f : beta_f)) return;
        }
      }
    }
    cu::on_host_into("addmm", out, {self, mat1, mat2},
                     [beta, alpha](AtenTensorHandle host_out, const cu::HostInputs& in) {
                       return aoti_torch_cpu_addmm_out(host_out, in[0], in[1], in[2], beta, alpha);
                     });
  });
}

AOTITorchError aoti_torch_cuda_bmm_out(AtenTensorHandle out, AtenTensorHandle self,
                                       AtenTensorHandle mat2) {
  return SHIMKIT_CUDA_GUARD({
    const SlimTensor& o = as_tensor(out);
    const SlimTensor& a = as_tensor(self);
    const SlimTensor& b = as_tensor(mat2);
    if (a.dim() != 3 || b.dim() != 3 || o.dim() != 3) throw ShimError("bmm needs 3-D tensors");
    require_same_device(a, b, "bmm");
    require_same_device(a, o, "bmm");
    const int64_t batch = a.sizes()[0], m = a.sizes()[1], k = a.sizes()[2], n = b.sizes()[2];
    if (b.sizes()[0] != batch || b.sizes()[1] != k || o.sizes()[0] != batch || o.sizes()[1] != m ||
        o.sizes()[2] != n) {
      throw ShimError("bmm: shapes do not match");
    }
    if (gemm_operands({&o, &a, &b}) && cu::bmm(o, a, b)) return;
    cu::on_host_into("bmm", out, {self, mat2},
                     [](AtenTensorHandle host_out, const cu::HostInputs& in) {
                       return aoti_torch_cpu_bmm_out(host_out, in[0], in[1]);
                     });
  });
}

AOTITorchError aoti_torch_cuda_convolution(
    AtenTensorHandle input, AtenTensorHandle weight, AtenTensorHandle* bias, const int64_t* stride,
    int64_t stride_len_, const int64_t* padding, int64_t padding_len_, const int64_t* dilation,
    int64_t dilation_len_, int32_t transposed, const int64_t* output_padding,
    int64_t output_padding_len_, int64_t groups, AtenTensorHandle* ret0) {
  return SHIMKIT_CUDA_GUARD({
    check_out(ret0);
    const SlimTensor& x = as_tensor(input);
    const SlimTensor& w = as_tensor(weight);
    require_same_device(x, w, "convolution");
    const SlimTensor* b = nullptr;
    if (bias != nullptr && *bias != nullptr && as_tensor(*bias).defined()) {
      b = &as_tensor(*bias);
      require_same_device(x, *b, "convolution");
    }
    const shimkit::ConvArguments args = shimkit::read_conv_arguments(
        x.dim() - 2, stride, stride_len_, padding, padding_len_, dilation, dilation_len_,
        transposed, output_padding, output_padding_len_);
    std::string why;
    SlimTensor result;
    if (cu::cudnn_convolution(x, w, b, args.params, args.transposed_by(), groups, &result, &why)) {
      cu::count_conv(true, "");
      *ret0 = to_handle(std::move(result));
      return;
    }
    // The host path: correct for every layout, slow (two copies, CPU maths).
    const bool channels_last = x.is_channels_last() || w.is_channels_last();
    const cu::OwnedInts strides(stride, stride_len_), paddings(padding, padding_len_),
        dilations(dilation, dilation_len_), output_paddings(output_padding, output_padding_len_);
    cu::results_on_host("convolution", {ret0}, {input, weight, b != nullptr ? *bias : nullptr},
                        [=](const cu::HostInputs& in, AtenTensorHandle* out) {
                          AtenTensorHandle host_bias = in[2];
                          const AOTITorchError rc = aoti_torch_cpu_convolution(
                              in[0], in[1], host_bias != nullptr ? &host_bias : nullptr,
                              strides.data(), strides.size(), paddings.data(), paddings.size(),
                              dilations.data(), dilations.size(), transposed,
                              output_paddings.data(), output_paddings.size(), groups, &out[0]);
                          if (rc == AOTI_TORCH_SUCCESS)
                            in_cudnn_memory_format(channels_last, &out[0]);
                          return rc;
                        });
    cu::count_conv(false, why);
  });
}

void shimkit_cuda_conv_counts(int64_t* on_cudnn, int64_t* on_host) {
  if (on_cudnn != nullptr) *on_cudnn = cu::conv_count(true);
  if (on_host != nullptr) *on_host = cu::conv_count(false);
}

const char* shimkit_cuda_conv_last_fallback(void) { return cu::last_conv_fallback().c_str(); }

void shimkit_cuda_conv_api_counts(int64_t* on_graph_api, int64_t* plans_built) {
  if (on_graph_api != nullptr) *on_graph_api = cu::conv_graph_count();
  if (plans_built != nullptr) *plans_built = cu::conv_plan_count();
}

int32_t shimkit_cuda_cudnn_tf32(void) {
  return cu::tf32_allowed(cu::Tf32Use::kConvolutions) ? 1 : 0;
}

void shimkit_cuda_set_cudnn_tf32(int32_t allowed) {
  cu::set_tf32_allowed(cu::Tf32Use::kConvolutions, allowed != 0);
}

int32_t shimkit_cuda_matmul_tf32(void) { return cu::tf32_allowed(cu::Tf32Use::kMatmuls) ? 1 : 0; }

void shimkit_cuda_set_matmul_tf32(int32_t allowed) {
  cu::set_tf32_allowed(cu::Tf32Use::kMatmuls, allowed != 0);
}

void shimkit_cuda_gemm_counts(int64_t* on_cublaslt, int64_t* on_cublas) {
  if (on_cublaslt != nullptr) *on_cublaslt = cu::gemm_count(true);
  if (on_cublas != nullptr) *on_cublas = cu::gemm_count(false);
}

const char* shimkit_cuda_cudnn_info(void) {
  static const std::string info = [] {
    const cu::CudnnLibrary& d = cu::cudnn_library();
    return d.ok ? "cuDNN " + std::to_string(d.version) + " (" + d.library + "), " +
                      (d.graph_ok ? "graph API" : "legacy API only")
                : "unavailable: " + d.error;
  }();
  return info.c_str();
}

}  // extern "C"
