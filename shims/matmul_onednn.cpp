// Slim CPU matrix multiply through oneDNN's matmul (onednn_api.h), the library
// ATen's mkldnn_matmul uses. On AVX-512 machines its brgemm kernels beat
// OpenBLAS 0.3.21's sgemm by 10-15% at transformer sizes, and the bias is
// fused (no separate pass writing beta * self into out first).
//
// Every operand is read in place through a strided memory descriptor (the
// weights a blob keeps transposed, [K, N] with strides (1, K), included):
// nothing is copied or packed, so no second copy of the weights is held.
// Plans (primitive descriptor and primitive per geometry) are cached per thread.
// A thread's GEMMs can be kept off oneDNN (shimkit_shim_set_onednn_gemm):
// the runtime does so for models that do not convolve.
#include "shims/matmul_onednn.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "shims/aoti_shim_abi.h"
#include "shims/onednn_api.h"

namespace shimkit {
namespace {
// Whether this thread's GEMMs may open and use oneDNN (aoti_shim_abi.h).
thread_local bool t_onednn_gemm = true;
}  // namespace
}  // namespace shimkit

extern "C" int shimkit_shim_set_onednn_gemm(int enabled) {
  const bool previous = shimkit::t_onednn_gemm;
  shimkit::t_onednn_gemm = enabled != 0;
  return previous ? 1 : 0;
}

#if SHIMKIT_HAVE_ONEDNN
namespace shimkit {
namespace {

struct MatmulPlan {
  Primitive matmul;
  dnnl_memory_desc_t src{}, weights{}, bias{}, dst{}, scratch{};
};

// Strides with those of size-1 dims replaced by the dense value: they never
// move the address, and oneDNN's kernels check strides, not sizes.
std::vector<int64_t> normalized_strides(const std::vector<int64_t>& sizes,
                                        std::vector<int64_t> strides) {
  int64_t dense = 1;
  for (size_t d = sizes.size(); d-- > 0;) {
    if (sizes[d] == 1) strides[d] = dense;
    dense *= sizes[d];
  }
  return strides;
}

// The bias as oneDNN's [M or 1, N or 1] operand: 0- and 1-D ones broadcast
// along rows, and a dim of stride 0 (an expanded view) is a broadcast one.
void bias_geometry(const SlimTensor& bias, std::vector<int64_t>* sizes,
                   std::vector<int64_t>* strides) {
  if (bias.dim() == 2) {
    *sizes = bias.sizes().vec();
    *strides = bias.strides().vec();
  } else if (bias.dim() == 1) {
    *sizes = {1, bias.sizes()[0]};
    *strides = {0, bias.strides()[0]};
  } else {
    *sizes = {1, 1};
    *strides = {0, 0};
  }
  for (size_t d = 0; d < 2; ++d) {
    if ((*strides)[d] == 0) (*sizes)[d] = 1;
  }
  *strides = normalized_strides(*sizes, *strides);
}

// Every dim moves the address: oneDNN takes no zero (expanded) strides here.
bool positive(const std::vector<int64_t>& strides) {
  for (int64_t s : strides) {
    if (s <= 0) return false;
  }
  return true;
}

// A plan for one geometry; null when oneDNN offers only its reference code.
std::unique_ptr<MatmulPlan> make_plan(const std::vector<int64_t>& key) {
  // key: m, n, k, a strides (2), b strides (2), out strides (2), has bias,
  // bias sizes (2), bias strides (2).
  const int64_t m = key[0], n = key[1], k = key[2];
  auto plan = std::make_unique<MatmulPlan>();
  plan->src = strided_desc({m, k}, {key[3], key[4]});
  plan->weights = strided_desc({k, n}, {key[5], key[6]});
  plan->dst = strided_desc({m, n}, {key[7], key[8]});
  const bool has_bias = key[9] != 0;
  if (has_bias) plan->bias = strided_desc({key[10], key[11]}, {key[12], key[13]});
  dnnl_matmul_desc_t desc;
  onednn_check(onednn().dnnl_matmul_desc_init(&desc, &plan->src, &plan->weights,
                                              has_bias ? &plan->bias : nullptr, &plan->dst),
               "matmul descriptor");
  const Attr attr = user_scratchpad();
  dnnl_primitive_desc_t pd_raw = nullptr;
  const dnnl_status_t status =
      onednn().dnnl_primitive_desc_create(&pd_raw, &desc, attr.get(), cpu_engine(), nullptr);
  if (status == dnnl_unimplemented) return nullptr;
  onednn_check(status, "matmul");
  const PrimitiveDesc pd(pd_raw);
  // The reference implementation is a plain loop nest: BLAS is far faster.
  if (implementation(pd.get()).rfind("ref", 0) == 0) return nullptr;
  plan->scratch = *onednn().dnnl_primitive_desc_query_md(pd.get(), dnnl_query_scratchpad_md, 0);
  plan->matmul = make_primitive(pd.get());
  return plan;
}

MatmulPlan* thread_plan(std::vector<int64_t> key) {
  thread_local std::map<std::vector<int64_t>, std::unique_ptr<MatmulPlan>> plans;
  auto it = plans.find(key);
  if (it == plans.end()) {
    // A bounded cache: dynamic shapes can make many geometries.
    if (plans.size() >= 256) plans.clear();
    std::unique_ptr<MatmulPlan> plan = make_plan(key);
    it = plans.emplace(std::move(key), std::move(plan)).first;
  }
  return it->second.get();
}

}  // namespace

bool onednn_matmul(const SlimTensor& a, const SlimTensor& b, const SlimTensor* bias,
                   const SlimTensor& out) {
  // The setting first: asking onednn() opens the library.
  if (!t_onednn_gemm || !onednn().ok) return false;
  for (const SlimTensor* t : {&a, &b, &out}) {
    if (t->dtype() != dtype::kFloat32 || t->dim() != 2) return false;
  }
  if (bias != nullptr && (bias->dtype() != dtype::kFloat32 || bias->dim() > 2)) return false;
  const int64_t m = a.sizes()[0], k = a.sizes()[1], n = b.sizes()[1];
  // Mismatched or empty shapes: the caller's BLAS path says what is wrong, or does nothing.
  if (b.sizes()[0] != k || out.sizes()[0] != m || out.sizes()[1] != n) return false;
  if (m == 0 || n == 0 || k == 0) return false;
  const std::vector<int64_t> as = normalized_strides(a.sizes().vec(), a.strides().vec());
  const std::vector<int64_t> bs = normalized_strides(b.sizes().vec(), b.strides().vec());
  const std::vector<int64_t> os = normalized_strides(out.sizes().vec(), out.strides().vec());
  if (!positive(as) || !positive(bs) || !positive(os)) return false;
  std::vector<int64_t> key{m, n, k, as[0], as[1], bs[0], bs[1], os[0], os[1], bias != nullptr};
  std::vector<int64_t> bias_sizes{0, 0}, bias_strides{0, 0};
  if (bias != nullptr) bias_geometry(*bias, &bias_sizes, &bias_strides);
  key.insert(key.end(), bias_sizes.begin(), bias_sizes.end());
  key.insert(key.end(), bias_strides.begin(), bias_strides.end());
  MatmulPlan* plan = thread_plan(std::move(key));
  if (plan == nullptr) return false;
  Memory src = memory_at(plan->src, a.data_ptr());
  Memory weights = memory_at(plan->weights, b.data_ptr());
  Memory dst = memory_at(plan->dst, out.data_ptr());
  std::vector<dnnl_exec_arg_t> args{
      {DNNL_ARG_SRC, src.get()}, {DNNL_ARG_WEIGHTS, weights.get()}, {DNNL_ARG_DST, dst.get()}};
  Memory bias_mem;
  if (bias != nullptr) {
    bias_mem = memory_at(plan->bias, bias->data_ptr());
    args.push_back({DNNL_ARG_BIAS, bias_mem.get()});
  }
  execute(plan->matmul.get(), std::move(args), plan->scratch, "matmul");
  onednn_check(onednn().dnnl_stream_wait(thread_stream()), "stream wait");
  return true;
}

}  // namespace shimkit

#else  // built without oneDNN 2.x headers (onednn_api.h): the caller multiplies another way

namespace shimkit {

bool onednn_matmul(const SlimTensor&, const SlimTensor&, const SlimTensor*, const SlimTensor&) {
  return false;
}

}  // namespace shimkit

#endif  // SHIMKIT_HAVE_ONEDNN
