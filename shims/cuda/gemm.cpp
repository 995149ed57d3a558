#include "shims/cuda/gemm.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "shims/cuda/autotune.h"
#include "shims/cuda/cublaslt_api.h"
#include "shims/cuda/cuda_context.h"
#include "shims/cuda/math_mode.h"
#include "shims/shim_internal.h"

namespace shimkit {
namespace cuda {
namespace {

// One workspace per handle and stream, so cuBLAS and cuBLASLt never
// allocate behind the caching allocator's back; both use it in stream order.
// 32 MiB is what torch gives cuBLAS on Hopper.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
// How many algorithms cuBLASLt is asked for (autotune.h times them).
constexpr int kLtCandidates = 8;

std::atomic<int64_t> g_on_lt{0};
std::atomic<int64_t> g_on_cublas{0};

// Per thread and device: the cuBLAS handle (bound to `stream` only when the
// stream changes), the cuBLASLt handle and one workspace per stream, kept
// while the thread lives: a CUDA graph captured on a stream keeps using that
// stream's workspace on every replay, so it must never be handed to anyone
// else. Destroying handles at exit can run after the CUDA context is gone.
struct BlasContext {
  void* handle = nullptr;
  void* lt = nullptr;
  bool bound = false;
  int math_mode = -1;  // the handle's cublasMath_t (legacy cuBLAS; -1: not set yet)
  Stream stream = nullptr;
  std::shared_ptr<Storage> workspace;  // the bound stream's
  std::unordered_map<Stream, std::shared_ptr<Storage>> workspaces;
};

BlasContext& context(int32_t device_index) {
  thread_local std::unordered_map<int32_t, BlasContext> contexts;
  const BlasLibrary& blas = blas_library();
  if (!blas.ok) throw ShimError(blas.error);
  BlasContext& c = contexts[device_index];
  if (c.handle == nullptr) {
    const int32_t previous = current_device();
    set_current_device(device_index);
    const int status = blas.create(&c.handle);
    set_current_device(previous);
    if (status != 0) {
      c.handle = nullptr;
      throw ShimError("cublasCreate failed with status " + std::to_string(status));
    }
  }
  const Stream stream = current_stream(device_index);
  if (!c.bound || c.stream != stream) {
    check_blas(blas.set_stream(c.handle, stream), "cublasSetStream");
    c.bound = false;
    std::shared_ptr<Storage>& workspace = c.workspaces[stream];
    if (!workspace) workspace = device_storage(kWorkspaceBytes, device_index);
    c.workspace = workspace;
    if (blas.set_workspace != nullptr) {
      check_blas(blas.set_workspace(c.handle, c.workspace->data(), kWorkspaceBytes),
                 "cublasSetWorkspace");
    }
    c.stream = stream;
    c.bound = true;
  }
  const int math_mode = tf32_allowed(Tf32Use::kMatmuls) ? kMathTf32 : kMathDefault;
  if (c.math_mode != math_mode) {
    check_blas(blas.set_math_mode(c.handle, math_mode), "cublasSetMathMode");
    c.math_mode = math_mode;
  }
  return c;
}

// A device vector of at least `n` float ones per device, kept for the process
// (filled once per growth, so the hot path never synchronises).
const float* ones_vector(int32_t device, int64_t n) {
  struct Ones {
    SlimTensor tensor;
    int64_t size = 0;
  };
  static std::mutex mutex;
  static auto* per_device = new std::unordered_map<int32_t, Ones>();
  std::lock_guard<std::mutex> lock(mutex);
  Ones& ones = (*per_device)[device];
  if (ones.size < n) {
    const int64_t size = std::max<int64_t>(n, 1024);
    std::vector<float> host(static_cast<size_t>(size), 1.0f);
    const int64_t st = 1;
    SlimTensor h(Storage::borrow(host.data(), host.size() * sizeof(float)), &size, &st, 1, 0,
                 dtype::kFloat32, device::kCPU, -1);
    SlimTensor d = SlimTensor::empty(&size, nullptr, 1, dtype::kFloat32, device::kCUDA, device);
    copy_tensor(d, h);
    ones.tensor = d;
    ones.size = size;
  }
  return static_cast<const float*>(ones.tensor.data_ptr());
}

// The largest power of two (up to 256) dividing a pointer: cuBLASLt's
// heuristics assume 256-byte aligned operands unless told otherwise.
uint32_t alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

// cuBLASLt's data type for a slim dtype, or -1 when it has none here.
int lt_data_type(int32_t dtype) {
  switch (dtype) {
    case dtype::kFloat32:
      return kLtR32F;
    case dtype::kFloat16:
      return kLtR16F;
    case dtype::kBFloat16:
      return kLtR16BF;
    default:
      return -1;
  }
}

// cuBLASLt's compute type for a data type: float32 arithmetic, TF32 tensor
// cores for float32 data when math_mode.h allows them for matmuls.
int lt_compute_type(int data_type) {
  return data_type == kLtR32F && tf32_allowed(Tf32Use::kMatmuls) ? kLtCompute32FFastTF32
                                                                 : kLtCompute32F;
}

// A product's geometry as cuBLASLt sees it: sizes, operands, data type and
// compute type and, for a strided batch, the count and each matrix's batch
// stride.
struct LtShape {
  int64_t m = 0, n = 0, k = 0;
  Operand oa, ob, oc;
  int data_type = kLtR32F;
  int compute_type = kLtCompute32F;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_c = 0;
};

// Descriptors, layouts and the algorithm cuBLASLt chose for one geometry.
struct LtPlan {
  bool ok = false;
  bool tuned = false;
  std::vector<LtAlgo> candidates;  // cuBLASLt's ranking, best guess first
  void* desc = nullptr;
  void* a = nullptr;  // cuBLASLt's A: our b (see the transpose trick)
  void* b = nullptr;  // cuBLASLt's B: our a
  void* c = nullptr;  // C and D: out
  LtAlgo algo{};

  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    const LtLibrary& lt = lt_library();
    for (void* layout : {a, b, c}) {
      if (layout != nullptr) lt.layout_destroy(layout);
    }
    if (desc != nullptr) lt.desc_destroy(desc);
  }
};

// A layout of `rows` x `cols` (column-major, leading dimension `ld`), batched
// when the shape is; false when cuBLASLt refuses it.
bool make_layout(void** layout, const LtShape& s, uint64_t rows, uint64_t cols, int64_t ld,
                 int64_t batch_stride) {
  const LtLibrary& lt = lt_library();
  if (lt.layout_create(layout, s.data_type, rows, cols, ld) != 0) return false;
  if (s.batch == 1) return true;
  const auto count = static_cast<int32_t>(s.batch);
  return lt.layout_set(*layout, kLtLayoutBatchCount, &count, sizeof count) == 0 &&
         lt.layout_set(*layout, kLtLayoutBatchStride, &batch_stride, sizeof batch_stride) == 0;
}

// Builds the plan; `ok` stays false when cuBLASLt declines the geometry.
std::unique_ptr<LtPlan> make_lt_plan(void* handle, const LtShape& s, const uint32_t align[4],
                                     bool with_bias) {
  const LtLibrary& lt = lt_library();
  auto plan = std::make_unique<LtPlan>();
  // float32 scalars for every data type; float32 or TF32 arithmetic.
  if (lt.desc_create(&plan->desc, s.compute_type, kLtR32F) != 0) return plan;
  const Operand &oa = s.oa, &ob = s.ob, &oc = s.oc;
  const int32_t trans_a = ob.op, trans_b = oa.op;
  const uint32_t epilogue = with_bias ? kLtEpilogueBias : kLtEpilogueDefault;
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  const int64_t m = s.m, n = s.n, k = s.k;
  if (lt.desc_set(plan->desc, kLtDescTransA, &trans_a, sizeof trans_a) != 0 ||
      lt.desc_set(plan->desc, kLtDescTransB, &trans_b, sizeof trans_b) != 0 ||
      lt.desc_set(plan->desc, kLtDescEpilogue, &epilogue, sizeof epilogue) != 0 ||
      !make_layout(&plan->a, s, ob.op == kOpN ? u(n) : u(k), ob.op == kOpN ? u(k) : u(n), ob.ld,
                   s.stride_b) ||
      !make_layout(&plan->b, s, oa.op == kOpN ? u(k) : u(m), oa.op == kOpN ? u(m) : u(k), oa.ld,
                   s.stride_a) ||
      !make_layout(&plan->c, s, u(n), u(m), oc.ld, s.stride_c)) {
    return plan;
  }
  void* pref = nullptr;
  if (lt.pref_create(&pref) != 0) return plan;
  const uint64_t max_workspace = kWorkspaceBytes;
  bool prefs_ok =
      lt.pref_set(pref, kLtPrefMaxWorkspaceBytes, &max_workspace, sizeof max_workspace) == 0;
  for (int i = 0; i < 4; ++i) {  // A, B, C, D
    prefs_ok =
        prefs_ok && lt.pref_set(pref, kLtPrefMinAlignmentA + i, &align[i], sizeof align[i]) == 0;
  }
  LtHeuristicResult results[kLtCandidates] = {};
  int found = 0;
  const int status = prefs_ok ? lt.heuristic(handle, plan->desc, plan->a, plan->b, plan->c, plan->c,
                                             pref, kLtCandidates, results, &found)
                              : -1;
  lt.pref_destroy(pref);
  if (status != 0) return plan;
  for (int i = 0; i < found && i < kLtCandidates; ++i) {
    if (results[i].state == 0 && results[i].workspace_size <= kWorkspaceBytes) {
      plan->candidates.push_back(results[i].algo);
    }
  }
  if (plan->candidates.empty()) return plan;
  plan->algo = plan->candidates.front();
  plan->tuned = plan->candidates.size() == 1;
  plan->ok = true;
  return plan;
}

// The product (batched if `s` is) on cuBLASLt, bias in its epilogue (of out's
// data type). false: cuBLASLt unavailable or declining (nothing launched).
bool lt_gemm(BlasContext& ctx, const SlimTensor& out, const SlimTensor& a, const SlimTensor& b,
             const LtShape& s, float alpha, float beta, const void* bias) {
  const LtLibrary& lt = lt_library();
  if (!lt.ok || s.data_type < 0) return false;
  const int32_t device = out.device_index();
  if (ctx.lt == nullptr && lt.create(&ctx.lt) != 0) {
    ctx.lt = nullptr;
    return false;
  }
  const uint32_t align[4] = {alignment(b.data_ptr()), alignment(a.data_ptr()),
                             alignment(out.data_ptr()), alignment(out.data_ptr())};
  if (bias != nullptr && alignment(bias) < 16) return false;
  // A fixed-size key: no allocation on the per-call lookup.
  using Key = std::array<int64_t, 19>;
  const Key key = {device,   s.m,        s.n,        s.k,           s.oa.op,
                   s.ob.op,  s.oa.ld,    s.ob.ld,    s.oc.ld,       s.data_type,
                   s.batch,  s.stride_a, s.stride_b, s.stride_c,    bias != nullptr,
                   align[0], align[1],   align[2],   s.compute_type};
  thread_local std::map<Key, std::unique_ptr<LtPlan>> plans;
  auto it = plans.find(key);
  if (it == plans.end()) {
    if (plans.size() >= 256) plans.clear();  // a blob has a handful of geometries
    it = plans.emplace(key, make_lt_plan(ctx.lt, s, align, bias != nullptr)).first;
  }
  LtPlan& plan = *it->second;
  if (!plan.ok) return false;
  if (bias != nullptr && lt.desc_set(plan.desc, kLtDescBiasPointer, &bias, sizeof bias) != 0) {
    return false;
  }
  const auto run = [&](const LtAlgo& algo) {
    return lt.matmul(ctx.lt, plan.desc, &alpha, b.data_ptr(), plan.a, a.data_ptr(), plan.b, &beta,
                     out.data_ptr(), plan.c, out.data_ptr(), plan.c, &algo, ctx.workspace->data(),
                     kWorkspaceBytes, ctx.stream);
  };
  // Timing runs overwrite the output: only for products that do not read it.
  if (!plan.tuned && beta == 0.0f && autotune_enabled("SHIMKIT_CUBLASLT_AUTOTUNE")) {
    const size_t best = fastest_candidate(plan.candidates.size(), ctx.stream,
                                          [&](size_t i) { return run(plan.candidates[i]) == 0; });
    if (best < plan.candidates.size()) plan.algo = plan.candidates[best];
    plan.tuned = !capturing();  // a capture's first use is tuned at the next eager one
  }
  return run(plan.algo) == 0;
}

}  // namespace

Operand operand(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  Operand o;
  // A single column or row has no stride across it: pick the one that fits
  // (a row read with a step, as an einsum's permuted operand gives it, is a
  // column-major [1, cols] matrix whose leading dimension is that step).
  if (cols == 1) cs = 1;
  if (rows == 1) rs = cs == 1 ? cols : 1;
  if (cs == 1 && rs >= std::max<int64_t>(cols, 1)) {  // row-major
    o.ok = true;
    o.op = kOpN;
    o.ld = static_cast<int>(std::max<int64_t>(rs, 1));
  } else if (rs == 1 && cs >= std::max<int64_t>(rows, 1)) {  // column-major
    o.ok = true;
    o.op = kOpT;
    o.ld = static_cast<int>(std::max<int64_t>(cs, 1));
  }
  return o;
}

void check_blas(int status, const char* what) {
  if (status != 0) {
    throw ShimError(std::string(what) + " failed with cuBLAS status " + std::to_string(status));
  }
}

void* blas_handle(int32_t device_index) { return context(device_index).handle; }

bool gemm(const SlimTensor& out, const SlimTensor& a, const SlimTensor& b, float alpha, float beta,
          const void* bias, float bias_scale) {
  LtShape s;
  s.m = a.sizes()[0], s.k = a.sizes()[1], s.n = b.sizes()[1];
  s.oa = operand(s.m, s.k, a.strides()[0], a.strides()[1]);
  s.ob = operand(s.k, s.n, b.strides()[0], b.strides()[1]);
  s.oc = operand(s.m, s.n, out.strides()[0], out.strides()[1]);
  s.data_type = lt_data_type(out.dtype());
  s.compute_type = lt_compute_type(s.data_type);
  if (!s.oa.ok || !s.ob.ok || !s.oc.ok || s.oc.op != kOpN || s.data_type < 0) return false;
  if (s.m == 0 || s.n == 0) return true;
  const int32_t device = out.device_index();
  BlasContext& ctx = context(device);
  if ((bias == nullptr || bias_scale == 1.0f) && lt_gemm(ctx, out, a, b, s, alpha, beta, bias)) {
    g_on_lt.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  if (out.dtype() != dtype::kFloat32) return false;  // legacy cuBLAS here is float32 only
  const BlasLibrary& blas = blas_library();
  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  float main_beta = beta;
  if (bias != nullptr) {
    // out = bias_scale * bias broadcast over rows + beta * out: the rank-1
    // product bias[N,1] x ones[1,M]; the main product then accumulates.
    const float* ones = ones_vector(device, s.m);
    check_blas(
        blas.sgemm(ctx.handle, kOpN, kOpN, n, m, 1, &bias_scale, static_cast<const float*>(bias), n,
                   ones, 1, &beta, static_cast<float*>(out.data_ptr()), s.oc.ld),
        "cublasSgemm (bias)");
    main_beta = 1.0f;
  }
  // Row-major C = A B is column-major C^T = B^T A^T: cuBLAS sees each
  // row-major matrix as its transpose, so the operands swap.
  check_blas(blas.sgemm(ctx.handle, s.ob.op, s.oa.op, n, m, k, &alpha,
                        static_cast<const float*>(b.data_ptr()), s.ob.ld,
                        static_cast<const float*>(a.data_ptr()), s.oa.ld, &main_beta,
                        static_cast<float*>(out.data_ptr()), s.oc.ld),
             "cublasSgemm");
  g_on_cublas.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool bmm(const SlimTensor& out, const SlimTensor& a, const SlimTensor& b) {
  LtShape s;
  s.batch = a.sizes()[0], s.m = a.sizes()[1], s.k = a.sizes()[2], s.n = b.sizes()[2];
  s.oa = operand(s.m, s.k, a.strides()[1], a.strides()[2]);
  s.ob = operand(s.k, s.n, b.strides()[1], b.strides()[2]);
  s.oc = operand(s.m, s.n, out.strides()[1], out.strides()[2]);
  s.stride_a = a.strides()[0], s.stride_b = b.strides()[0], s.stride_c = out.strides()[0];
  s.data_type = lt_data_type(out.dtype());
  s.compute_type = lt_compute_type(s.data_type);
  if (!s.oa.ok || !s.ob.ok || !s.oc.ok || s.oc.op != kOpN || s.data_type < 0) return false;
  if (s.batch == 0 || s.m == 0 || s.n == 0) return true;
  BlasContext& ctx = context(out.device_index());
  if (lt_gemm(ctx, out, a, b, s, 1.0f, 0.0f, nullptr)) {
    g_on_lt.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  if (out.dtype() != dtype::kFloat32) return false;
  const float one = 1.0f, zero = 0.0f;
  check_blas(
      blas_library().sgemm_strided_batched(
          ctx.handle, s.ob.op, s.oa.op, static_cast<int>(s.n), static_cast<int>(s.m),
          static_cast<int>(s.k), &one, static_cast<const float*>(b.data_ptr()), s.ob.ld, s.stride_b,
          static_cast<const float*>(a.data_ptr()), s.oa.ld, s.stride_a, &zero,
          static_cast<float*>(out.data_ptr()), s.oc.ld, s.stride_c, static_cast<int>(s.batch)),
      "cublasSgemmStridedBatched");
  g_on_cublas.fetch_add(1, std::memory_order_relaxed);
  return true;
}

int64_t gemm_count(bool on_lt) {
  return (on_lt ? g_on_lt : g_on_cublas).load(std::memory_order_relaxed);
}

}  // namespace cuda
}  // namespace shimkit
