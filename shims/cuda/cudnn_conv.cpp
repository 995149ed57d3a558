// Convolution on cuDNN with a plan per argument geometry, built once per
// thread and reused for every later call of that geometry. A plain
// convolution is cuDNN's forward convolution; a transposed one its backward
// data (the gradient of a forward convolution with respect to its input),
// which is how ATen runs it on cuDNN.
//
// Where an eager convolution's host time goes: building a plan (descriptors,
// heuristics, an execution plan) costs tens to hundreds of microseconds, and
// cuDNN 9's legacy cudnnConvolutionForward does part of that work again on
// every call. So the backend ("graph") API runs first, as torch's own cuDNN
// convolution does: its finalized execution plan is cached, and a call costs
// one variant pack (itself reused while the data pointers stay the same) and
// one cudnnBackendExecute. The engines cuDNN ranks for a geometry are timed
// once on the real operands and the fastest is kept (autotune.h; with
// SHIMKIT_CUDNN_AUTOTUNE=0 the first-ranked one runs, as with torch's default
// cudnn.benchmark=False). The legacy API is the fallback when the graph API
// offers no engine (or SHIMKIT_CUDNN_API=legacy). Neither path synchronises,
// copies through the host or reaches cudaMalloc once warm (the output and
// workspace come from the caching allocator), so eager runs stay
// stream-ordered and CUDA graphs can capture them; tests/cuda counts the
// calls per convolution against a fake cuDNN.
#include "shims/cuda/cudnn_conv.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <vector>

#include "shims/cuda/autotune.h"
#include "shims/cuda/cuda_context.h"
#include "shims/cuda/cudnn_api.h"
#include "shims/cuda/math_mode.h"

namespace shimkit {
namespace cuda {
namespace {

std::atomic<int64_t> g_on_cudnn{0};
std::atomic<int64_t> g_on_host{0};
std::atomic<int64_t> g_on_graph{0};
std::atomic<int64_t> g_plans{0};
thread_local std::string t_last_fallback;

// Unique ids of the three tensors in a graph plan's variant pack.
constexpr int64_t kUidX = 'x';
constexpr int64_t kUidW = 'w';
constexpr int64_t kUidY = 'y';

// A failed cuDNN call, with what was being done.
struct CudnnFailure {
  std::string what;
};

void ok(int status, const char* what) {
  if (status == kCudnnSuccess) return;
  const CudnnLibrary& d = cudnn_library();
  throw CudnnFailure{std::string(what) + ": " + d.get_error_string(status) + " (cuDNN status " +
                     std::to_string(status) + ")"};
}

// One cuDNN handle per thread and device, kept for the thread's lifetime
// (destroying it at exit can run after the CUDA context is gone), bound to a
// stream only when the stream changes.
struct HandleState {
  void* handle = nullptr;
  Stream stream = nullptr;
  bool bound = false;
};

HandleState& cudnn_handle(int32_t device_index) {
  thread_local std::unordered_map<int32_t, HandleState> handles;
  HandleState& state = handles[device_index];
  if (state.handle != nullptr) return state;
  const int32_t previous = current_device();
  set_current_device(device_index);
  void* h = nullptr;
  const int status = cudnn_library().create(&h);
  set_current_device(previous);
  ok(status, "cudnnCreate");
  state.handle = h;
  return state;
}

void bind_stream(HandleState& state, Stream stream) {
  if (state.bound && state.stream == stream) return;
  ok(cudnn_library().set_stream(state.handle, stream), "cudnnSetStream");
  state.stream = stream;
  state.bound = true;
}

int cudnn_dtype(int32_t dtype) {
  switch (dtype) {
    case dtype::kFloat16:
      return kCudnnHalf;
    case dtype::kBFloat16:
      return kCudnnBfloat16;
    default:
      return kCudnnFloat;
  }
}

// --- legacy descriptors ---

void* tensor_descriptor(int data_type, const int* sizes, const int* strides, int nd) {
  const CudnnLibrary& d = cudnn_library();
  void* desc = nullptr;
  ok(d.create_tensor(&desc), "cudnnCreateTensorDescriptor");
  const int status = d.set_tensor(desc, data_type, nd, sizes, strides);
  if (status != kCudnnSuccess) d.destroy_tensor(desc);
  ok(status, "cudnnSetTensorNdDescriptor");
  return desc;
}

struct LegacyTensor {
  void* desc = nullptr;
  LegacyTensor() = default;
  LegacyTensor(const LegacyTensor&) = delete;
  LegacyTensor& operator=(const LegacyTensor&) = delete;
  ~LegacyTensor() {
    if (desc != nullptr) cudnn_library().destroy_tensor(desc);
  }
};

// --- backend descriptors ---

class Backend {
 public:
  explicit Backend(int type) {
    ok(cudnn_library().create_descriptor(type, &desc_), "cudnnBackendCreateDescriptor");
  }
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  ~Backend() {
    if (desc_ != nullptr) cudnn_library().destroy_descriptor(desc_);
  }
  void* get() const { return desc_; }
  Backend& set(int attribute, int type, int64_t count, const void* values) {
    ok(cudnn_library().set_attribute(desc_, attribute, type, count, values),
       "cudnnBackendSetAttribute");
    return *this;
  }
  Backend& set(int attribute, void* descriptor) {
    return set(attribute, kTypeBackendDescriptor, 1, &descriptor);
  }
  void finalize(const char* what) { ok(cudnn_library().finalize(desc_), what); }

 private:
  void* desc_ = nullptr;
};

// The most dims a convolution's tensors have here (3-D convolutions: 5).
constexpr int kMaxDims = 5;

// A convolution's tensors as the plan sees them: sizes and strides of x (the
// op's input), w and y (its output) (`dims` of them: 4, or 5 for a 3-D
// convolution), and each pointer's alignment (cuDNN picks engines by it). A
// transposed convolution runs as backward data: x is cuDNN's dy, y its dx.
struct ConvArgs {
  bool transposed = false;
  int dims = 4;
  int64_t x_sizes[kMaxDims], x_strides[kMaxDims];
  int64_t w_sizes[kMaxDims], w_strides[kMaxDims];
  int64_t y_sizes[kMaxDims], y_strides[kMaxDims];
  int64_t align[3];
  int data_type = kCudnnFloat;
};

std::unique_ptr<Backend> graph_tensor(int64_t uid, int data_type, int dims, const int64_t* sizes,
                                      const int64_t* strides, int64_t align) {
  auto t = std::make_unique<Backend>(kBackendTensor);
  t->set(kAttrTensorDataType, kTypeDataType, 1, &data_type)
      .set(kAttrTensorDimensions, kTypeInt64, dims, sizes)
      .set(kAttrTensorStrides, kTypeInt64, dims, strides)
      .set(kAttrTensorUniqueId, kTypeInt64, 1, &uid)
      .set(kAttrTensorByteAlignment, kTypeInt64, 1, &align);
  t->finalize("cudnnBackendFinalize(tensor)");
  return t;
}

bool true_float32(const Backend& engine) {
  int notes[16] = {};
  int64_t count = 0;
  ok(cudnn_library().get_attribute(engine.get(), kAttrEngineNumericalNote, kTypeNumericalNote, 16,
                                   &count, notes),
     "cudnnBackendGetAttribute(numerical notes)");
  for (int64_t i = 0; i < count && i < 16; ++i) {
    if (notes[i] == kNoteTensorCore || notes[i] == kNoteDownConvertInputs) return false;
  }
  return true;
}

// The operation descriptor's type and attribute names for each direction.
struct OperationAttrs {
  int type, alpha, beta, conv, w, input, output;
};
constexpr OperationAttrs kForwardOp{
    kBackendConvForward, kAttrConvForwardAlpha, kAttrConvForwardBeta, kAttrConvForwardConvDesc,
    kAttrConvForwardW,   kAttrConvForwardX,     kAttrConvForwardY};
constexpr OperationAttrs kBackwardDataOp{
    kBackendConvBackwardData, kAttrConvBwdDataAlpha, kAttrConvBwdDataBeta, kAttrConvBwdDataConvDesc,
    kAttrConvBwdDataW,        kAttrConvBwdDataDy,    kAttrConvBwdDataDx};

// One engine's finalized execution plan and the workspace it needs.
struct GraphEngine {
  std::unique_ptr<Backend> config;
  std::unique_ptr<Backend> plan;
  size_t workspace = 0;
};

// Everything a graph plan refers to, kept alive with it.
struct GraphPlan {
  std::vector<std::unique_ptr<Backend>> parts;
  // The engines that run this convolution, in cuDNN's ranking; once timed on
  // the real operands (choose_engine) only the fastest is left.
  std::vector<GraphEngine> engines;
  bool tuned = false;
  // The last variant pack and the pointers it binds (x, w, y, workspace).
  std::unique_ptr<Backend> pack;
  std::array<void*, 4> pack_pointers{};
};

// More than cuDNN 9's heuristics rank for one convolution (tens); a bound on
// the descriptors made per plan.
constexpr int64_t kMaxEngineCandidates = 256;
// How many engines whose plans finalize are timed (autotune.h) per geometry.
constexpr size_t kTimedEngines = 8;

// The engines cuDNN's heuristics rank for this convolution (skipping
// tensor-core maths for float32 data unless TF32 is allowed) whose execution
// plans finalize, in rank order: the first `max_engines` of them. `workspace`
// is set to the largest workspace among them. Throws CudnnFailure when there
// is none.
std::unique_ptr<GraphPlan> make_graph_plan(void* handle, const ConvArgs& a, const ConvParams& p,
                                           bool allow_tf32, size_t max_engines, size_t* workspace) {
  auto g = std::make_unique<GraphPlan>();
  auto& parts = g->parts;
  parts.push_back(graph_tensor(kUidX, a.data_type, a.dims, a.x_sizes, a.x_strides, a.align[0]));
  parts.push_back(graph_tensor(kUidW, a.data_type, a.dims, a.w_sizes, a.w_strides, a.align[1]));
  parts.push_back(graph_tensor(kUidY, a.data_type, a.dims, a.y_sizes, a.y_strides, a.align[2]));
  void* x = parts[0]->get();
  void* w = parts[1]->get();
  void* y = parts[2]->get();
  auto conv = std::make_unique<Backend>(kBackendConvolution);
  const int compute = kCudnnFloat;
  const int mode = kCudnnCrossCorrelation;
  // ConvParams are depth, height, width: the last `spatial` of them.
  const int64_t spatial = a.dims - 2;
  const int first = first_used_dim(static_cast<int>(spatial));
  conv->set(kAttrConvCompType, kTypeDataType, 1, &compute)
      .set(kAttrConvMode, kTypeConvolutionMode, 1, &mode)
      .set(kAttrConvSpatialDims, kTypeInt64, 1, &spatial)
      .set(kAttrConvDilations, kTypeInt64, spatial, p.dilation + first)
      .set(kAttrConvFilterStrides, kTypeInt64, spatial, p.stride + first)
      .set(kAttrConvPrePaddings, kTypeInt64, spatial, p.padding + first)
      .set(kAttrConvPostPaddings, kTypeInt64, spatial, p.padding + first);
  conv->finalize("cudnnBackendFinalize(convolution)");
  const OperationAttrs& attrs = a.transposed ? kBackwardDataOp : kForwardOp;
  auto op = std::make_unique<Backend>(attrs.type);
  const float alpha = 1.0f, beta = 0.0f;
  op->set(attrs.input, x)
      .set(attrs.w, w)
      .set(attrs.output, y)
      .set(attrs.conv, conv->get())
      .set(attrs.alpha, kTypeFloat, 1, &alpha)
      .set(attrs.beta, kTypeFloat, 1, &beta);
  op->finalize(a.transposed ? "cudnnBackendFinalize(convolution backward data)"
                            : "cudnnBackendFinalize(convolution forward)");
  auto graph = std::make_unique<Backend>(kBackendOperationGraph);
  graph->set(kAttrOperationGraphHandle, kTypeHandle, 1, &handle)
      .set(kAttrOperationGraphOps, op->get());
  graph->finalize("cudnnBackendFinalize(operation graph)");
  auto heur = std::make_unique<Backend>(kBackendEngineHeur);
  const int heur_mode = kHeurModeA;
  heur->set(kAttrEngineHeurOperationGraph, graph->get())
      .set(kAttrEngineHeurMode, kTypeHeurMode, 1, &heur_mode);
  heur->finalize("cudnnBackendFinalize(engine heuristics)");
  const CudnnLibrary& d = cudnn_library();
  int64_t count = 0;
  ok(d.get_attribute(heur->get(), kAttrEngineHeurResults, kTypeBackendDescriptor, 0, &count,
                     nullptr),
     "cudnnBackendGetAttribute(heuristic results)");
  // Every ranked engine is a candidate: in true float32 the first ones are often
  // tensor-core (TF32) engines, skipped below, and the float32 ones come later.
  count = std::min<int64_t>(count, kMaxEngineCandidates);
  std::vector<std::unique_ptr<Backend>> configs;
  std::vector<void*> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.push_back(std::make_unique<Backend>(kBackendEngineCfg));
    raw.push_back(configs.back()->get());
  }
  int64_t returned = 0;
  if (count > 0) {
    ok(d.get_attribute(heur->get(), kAttrEngineHeurResults, kTypeBackendDescriptor, count,
                       &returned, raw.data()),
       "cudnnBackendGetAttribute(heuristic results)");
  }
  const bool strict = a.data_type == kCudnnFloat && !allow_tf32;
  for (int64_t i = 0; i < returned && i < count; ++i) {
    Backend engine(kBackendEngine);
    void* engine_desc = engine.get();
    int64_t one = 0;
    ok(d.get_attribute(raw[i], kAttrEngineCfgEngine, kTypeBackendDescriptor, 1, &one, &engine_desc),
       "cudnnBackendGetAttribute(engine)");
    if (strict && !true_float32(engine)) continue;
    auto plan = std::make_unique<Backend>(kBackendExecutionPlan);
    plan->set(kAttrExecutionPlanHandle, kTypeHandle, 1, &handle)
        .set(kAttrExecutionPlanEngineConfig, raw[i]);
    if (d.finalize(plan->get()) != kCudnnSuccess) continue;  // this engine declines: next
    int64_t bytes = 0;
    ok(d.get_attribute(plan->get(), kAttrExecutionPlanWorkspaceSize, kTypeInt64, 1, &one, &bytes),
       "cudnnBackendGetAttribute(workspace size)");
    GraphEngine engine_plan;
    engine_plan.config = std::move(configs[static_cast<size_t>(i)]);
    engine_plan.plan = std::move(plan);
    engine_plan.workspace = static_cast<size_t>(bytes < 0 ? 0 : bytes);
    g->engines.push_back(std::move(engine_plan));
    if (g->engines.size() >= max_engines) break;
  }
  if (g->engines.empty()) {
    throw CudnnFailure{std::string("the cuDNN graph API offers no ") +
                       (strict ? "true float32 " : "") + "engine for this convolution"};
  }
  *workspace = 0;
  for (const GraphEngine& e : g->engines) *workspace = std::max(*workspace, e.workspace);
  g->tuned = g->engines.size() == 1;
  parts.push_back(std::move(conv));
  parts.push_back(std::move(op));
  parts.push_back(std::move(graph));
  return g;
}

// The legacy API's descriptors (x of the op's input, y of its output) and
// chosen algorithm.
struct LegacyPlan {
  LegacyTensor x, y;
  void* w = nullptr;
  void* conv = nullptr;
  int algo = 0;
  ~LegacyPlan() {
    const CudnnLibrary& d = cudnn_library();
    if (w != nullptr) d.destroy_filter(w);
    if (conv != nullptr) d.destroy_conv(conv);
  }
};

std::vector<int> ints(const int64_t* v, int n) { return std::vector<int>(v, v + n); }

std::unique_ptr<LegacyPlan> make_legacy_plan(void* handle, const ConvArgs& a, int w_format,
                                             const ConvParams& p, int64_t groups, bool allow_tf32,
                                             size_t* workspace) {
  const CudnnLibrary& d = cudnn_library();
  auto plan = std::make_unique<LegacyPlan>();
  const int nd = a.dims;
  const std::vector<int> xs = ints(a.x_sizes, nd), xst = ints(a.x_strides, nd);
  const std::vector<int> ys = ints(a.y_sizes, nd), yst = ints(a.y_strides, nd);
  const std::vector<int> ws = ints(a.w_sizes, nd);
  plan->x.desc = tensor_descriptor(a.data_type, xs.data(), xst.data(), nd);
  plan->y.desc = tensor_descriptor(a.data_type, ys.data(), yst.data(), nd);
  ok(d.create_filter(&plan->w), "cudnnCreateFilterDescriptor");
  ok(d.set_filter(plan->w, a.data_type, w_format, nd, ws.data()), "cudnnSetFilterNdDescriptor");
  ok(d.create_conv(&plan->conv), "cudnnCreateConvolutionDescriptor");
  // ConvParams are depth, height, width: the last nd - 2 of them.
  const int spatial = nd - 2, first = first_used_dim(spatial);
  const std::vector<int> pad = ints(p.padding + first, spatial);
  const std::vector<int> stride = ints(p.stride + first, spatial);
  const std::vector<int> dilation = ints(p.dilation + first, spatial);
  ok(d.set_conv(plan->conv, spatial, pad.data(), stride.data(), dilation.data(),
                kCudnnCrossCorrelation, kCudnnFloat),
     "cudnnSetConvolutionNdDescriptor");
  ok(d.set_group_count(plan->conv, static_cast<int>(groups)), "cudnnSetConvolutionGroupCount");
  // True float32 unless TF32 is allowed (torch's default for cuDNN).
  const bool strict = a.data_type == kCudnnFloat && !allow_tf32;
  ok(d.set_math_type(plan->conv, strict ? kCudnnFmaMath : kCudnnTensorOpMath),
     "cudnnSetConvolutionMathType");
  CudnnAlgoPerf perf[8] = {};
  int returned = 0;
  if (a.transposed) {
    ok(d.get_backward_data_algorithm(handle, plan->w, plan->x.desc, plan->conv, plan->y.desc, 8,
                                     &returned, perf),
       "cudnnGetConvolutionBackwardDataAlgorithm_v7");
  } else {
    ok(d.get_forward_algorithm(handle, plan->x.desc, plan->w, plan->conv, plan->y.desc, 8,
                               &returned, perf),
       "cudnnGetConvolutionForwardAlgorithm_v7");
  }
  const CudnnAlgoPerf* chosen = nullptr;
  for (int i = 0; i < returned && i < 8; ++i) {
    // Ranked by cuDNN's heuristics; in strict mode skip tensor-op (TF32) maths.
    if (perf[i].status == kCudnnSuccess &&
        (!strict || perf[i].math_type == kCudnnFmaMath || perf[i].math_type == 0)) {
      chosen = &perf[i];
      break;
    }
  }
  if (chosen == nullptr) throw CudnnFailure{"cuDNN offers no algorithm for this convolution"};
  plan->algo = chosen->algo;
  if (a.transposed) {
    ok(d.get_backward_data_workspace_size(handle, plan->w, plan->x.desc, plan->conv, plan->y.desc,
                                          plan->algo, workspace),
       "cudnnGetConvolutionBackwardDataWorkspaceSize");
  } else {
    ok(d.get_workspace_size(handle, plan->x.desc, plan->w, plan->conv, plan->y.desc, plan->algo,
                            workspace),
       "cudnnGetConvolutionForwardWorkspaceSize");
  }
  return plan;
}

// One geometry's plan: graph or legacy, the weight layout it wants, the
// workspace, and the bias descriptors for cudnnAddTensor.
struct Plan {
  std::unique_ptr<GraphPlan> graph;
  std::unique_ptr<LegacyPlan> legacy;
  // The weight must first be transformed into these strides (empty: used as it is).
  bool transform_weight = false;
  int64_t w_dense_strides[kMaxDims] = {};
  LegacyTensor w_given, w_dense;  // descriptors for cudnnTransformTensor
  size_t workspace = 0;
  LegacyTensor bias, y;  // for cudnnAddTensor
};

// The plan cache key: every argument a plan depends on, in a fixed-size array
// (no allocation per call).
using Key = std::array<int64_t, 10 + 4 * kMaxDims + 4 * kConvDims>;

struct KeyHash {
  size_t operator()(const Key& k) const {
    uint64_t h = 1469598103934665603ull;
    for (int64_t v : k) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

int64_t alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  int64_t a = 16;
  while (a > 1 && v % static_cast<uintptr_t>(a) != 0) a /= 2;
  return a;
}

bool fits_int(const int64_t* v, int n) {
  for (int i = 0; i < n; ++i) {
    if (v[i] < 0 || v[i] > INT_MAX) return false;
  }
  return true;
}

bool on_device_in(const SlimTensor& t, int32_t device, int32_t dtype) {
  return is_cuda(t) && t.device_index() == device && t.dtype() == dtype;
}

// SHIMKIT_CUDNN_TRACE=1: say on stderr why a geometry's plan is not on the graph
// API (diagnostics for docs/cuda.md's GPU runs).
bool trace_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("SHIMKIT_CUDNN_TRACE");
    return env != nullptr && std::strcmp(env, "1") == 0;
  }();
  return enabled;
}

std::string shape_text(int dims, const int64_t* sizes, const int64_t* strides) {
  std::string text;
  for (int i = 0; i < dims; ++i) text += (i ? "x" : "") + std::to_string(sizes[i]);
  text += " strides";
  for (int i = 0; i < dims; ++i) text += " " + std::to_string(strides[i]);
  return text;
}

std::unique_ptr<Plan> make_plan(HandleState& h, ConvArgs a, const ConvParams& p, int64_t groups,
                                bool channels_last, bool with_bias, bool allow_tf32) {
  const CudnnLibrary& d = cudnn_library();
  auto plan = std::make_unique<Plan>();
  // The weight in the output's format (what the legacy filter format and
  // most engines want): a device-side transform when it is not already.
  const int nd = a.dims;
  std::vector<int64_t> w_sizes(a.w_sizes, a.w_sizes + nd);
  const std::vector<int64_t> dense =
      channels_last ? channels_last_strides(w_sizes) : contiguous_strides(w_sizes);
  bool w_dense = true;
  for (int i = 0; i < nd; ++i) w_dense = w_dense && (w_sizes[i] == 1 || a.w_strides[i] == dense[i]);
  const size_t engines = autotune_enabled("SHIMKIT_CUDNN_AUTOTUNE") ? kTimedEngines : 1;
  std::string graph_error;
  if (d.graph_ok) {
    try {
      plan->graph = make_graph_plan(h.handle, a, p, allow_tf32, engines, &plan->workspace);
    } catch (const CudnnFailure& f) {
      graph_error = f.what;
    }
  }
  if (plan->graph == nullptr && !w_dense) {
    // Neither graph engines for this weight layout nor the legacy API (whose
    // filters have a format, not strides) take it as it is.
    plan->transform_weight = true;
    const std::vector<int> ws = ints(a.w_sizes, nd), given = ints(a.w_strides, nd);
    std::copy(dense.begin(), dense.end(), plan->w_dense_strides);
    const std::vector<int> want = ints(plan->w_dense_strides, nd);
    plan->w_given.desc = tensor_descriptor(a.data_type, ws.data(), given.data(), nd);
    plan->w_dense.desc = tensor_descriptor(a.data_type, ws.data(), want.data(), nd);
    std::copy(dense.begin(), dense.end(), a.w_strides);
    if (d.graph_ok) {
      try {
        plan->graph = make_graph_plan(h.handle, a, p, allow_tf32, engines, &plan->workspace);
      } catch (const CudnnFailure& f) {
        graph_error = f.what;
      }
    }
  }
  if (plan->graph == nullptr) {
    if (trace_enabled()) {
      std::fprintf(stderr, "shimkit cuDNN: legacy API for x %s w %s: %s\n",
                   shape_text(a.dims, a.x_sizes, a.x_strides).c_str(),
                   shape_text(a.dims, a.w_sizes, a.w_strides).c_str(),
                   graph_error.empty() ? "graph API unavailable" : graph_error.c_str());
    }
    try {
      plan->legacy = make_legacy_plan(h.handle, a, channels_last ? kCudnnNhwc : kCudnnNchw, p,
                                      groups, allow_tf32, &plan->workspace);
    } catch (const CudnnFailure& f) {
      throw CudnnFailure{graph_error.empty() ? f.what : graph_error + "; legacy API: " + f.what};
    }
  }
  if (with_bias) {
    // The bias as [1, C, 1, ...]: broadcast over every other dim.
    std::vector<int> bias_sizes(nd, 1), bias_strides(nd, 1);
    bias_sizes[1] = static_cast<int>(a.y_sizes[1]);
    bias_strides[0] = bias_sizes[1];
    const std::vector<int> ys = ints(a.y_sizes, nd), yst = ints(a.y_strides, nd);
    plan->bias.desc = tensor_descriptor(a.data_type, bias_sizes.data(), bias_strides.data(), nd);
    plan->y.desc = tensor_descriptor(a.data_type, ys.data(), yst.data(), nd);
  }
  g_plans.fetch_add(1, std::memory_order_relaxed);
  return plan;
}

// Runs the graph plan's engine `engine` (its first unless given) on these pointers.
void run_graph_plan(HandleState& h, GraphPlan& g, void* x, void* w, void* y, void* workspace,
                    size_t engine = 0) {
  const CudnnLibrary& d = cudnn_library();
  const std::array<void*, 4> pointers = {x, w, y, workspace};
  if (g.pack == nullptr || g.pack_pointers != pointers) {
    auto pack = std::make_unique<Backend>(kBackendVariantPack);
    const int64_t uids[3] = {kUidX, kUidW, kUidY};
    void* data[3] = {x, w, y};
    pack->set(kAttrVariantPackUniqueIds, kTypeInt64, 3, uids)
        .set(kAttrVariantPackDataPointers, kTypeVoidPtr, 3, data)
        .set(kAttrVariantPackWorkspace, kTypeVoidPtr, 1, &workspace);
    pack->finalize("cudnnBackendFinalize(variant pack)");
    g.pack = std::move(pack);
    g.pack_pointers = pointers;
  }
  ok(d.execute(h.handle, g.engines[engine].plan->get(), g.pack->get()), "cudnnBackendExecute");
}

// Times the plan's engines on the real operands (`workspace` holds the
// largest one's) and keeps only the fastest; cuDNN's first-ranked engine is
// often not it for small batches. Nothing is timed while a CUDA graph is
// being captured: the first-ranked engine runs, and the next eager call
// times them.
void choose_engine(HandleState& h, Plan& plan, void* x, void* w, void* y, void* workspace,
                   Stream stream) {
  GraphPlan& g = *plan.graph;
  const size_t best = fastest_candidate(g.engines.size(), stream, [&](size_t i) {
    try {
      run_graph_plan(h, g, x, w, y, workspace, i);
      return true;
    } catch (const CudnnFailure&) {
      return false;  // this engine fails on these operands: not a candidate
    }
  });
  if (capturing()) return;
  if (best < g.engines.size()) {
    GraphEngine fastest = std::move(g.engines[best]);
    g.engines.clear();
    g.engines.push_back(std::move(fastest));
    plan.workspace = g.engines.front().workspace;
  }
  g.tuned = true;
}

}  // namespace

void count_conv(bool on_cudnn, const std::string& why) {
  (on_cudnn ? g_on_cudnn : g_on_host).fetch_add(1, std::memory_order_relaxed);
  if (!on_cudnn) t_last_fallback = why;
}

int64_t conv_count(bool on_cudnn) {
  return (on_cudnn ? g_on_cudnn : g_on_host).load(std::memory_order_relaxed);
}

int64_t conv_graph_count() { return g_on_graph.load(std::memory_order_relaxed); }

int64_t conv_plan_count() { return g_plans.load(std::memory_order_relaxed); }

const std::string& last_conv_fallback() { return t_last_fallback; }

bool cudnn_convolution(const SlimTensor& input_in, const SlimTensor& weight_in,
                       const SlimTensor* bias, const ConvParams& params,
                       const ConvTranspose* transpose, int64_t groups, SlimTensor* out,
                       std::string* why) {
  const CudnnLibrary& d = cudnn_library();
  if (!d.ok) {
    *why = d.error;
    return false;
  }
  const ConvShape s = transpose != nullptr
                          ? conv_transpose_shape(input_in, weight_in, params, *transpose, groups,
                                                 ConvBackend::kCudnn)
                          : conv_shape(input_in, weight_in, params, groups, ConvBackend::kCudnn);
  const int32_t device = input_in.device_index();
  const int32_t dtype = input_in.dtype();
  if (!on_device_in(input_in, device, dtype) || !on_device_in(weight_in, device, dtype) ||
      (bias != nullptr && !on_device_in(*bias, device, dtype))) {
    *why = "tensors are not all of one dtype on one CUDA device";
    return false;
  }
  if (bias != nullptr) {
    check_conv_bias(*bias, s.oc, dtype);
    if (s.oc > 1 && bias->strides()[0] != 1) {
      *why = "bias is not contiguous";
      return false;
    }
  }
  const SlimTensor x = lift_conv_1d(input_in);
  const SlimTensor w = lift_conv_1d(weight_in);
  ConvArgs a;
  a.transposed = transpose != nullptr;
  a.dims = s.spatial + 2;
  SlimTensor y = SlimTensor::empty(s.out_sizes.data(), s.out_strides.data(), a.dims, dtype,
                                   device::kCUDA, device);
  for (int i = 0; i < a.dims; ++i) {
    a.x_sizes[i] = x.sizes()[i];
    a.x_strides[i] = x.strides()[i];
    a.w_sizes[i] = w.sizes()[i];
    a.w_strides[i] = w.strides()[i];
    a.y_sizes[i] = s.out_sizes[i];
    a.y_strides[i] = s.out_strides[i];
  }
  a.align[0] = alignment(x.data_ptr());
  a.align[1] = alignment(w.data_ptr());
  a.align[2] = alignment(y.data_ptr());
  a.data_type = cudnn_dtype(dtype);
  const int nd = a.dims;
  if (!fits_int(a.x_sizes, nd) || !fits_int(a.x_strides, nd) || !fits_int(a.w_sizes, nd) ||
      !fits_int(a.w_strides, nd) || !fits_int(a.y_sizes, nd) || !fits_int(a.y_strides, nd) ||
      groups > INT_MAX || !fits_int(params.padding, kConvDims) ||
      !fits_int(params.stride, kConvDims) || !fits_int(params.dilation, kConvDims)) {
    *why = "a size or stride does not fit cuDNN's int";
    return false;
  }
  const bool allow_tf32 = tf32_allowed(Tf32Use::kConvolutions);
  Key key{};
  size_t k = 0;
  for (int64_t v : {int64_t{device}, int64_t{a.data_type}, int64_t{allow_tf32}, groups,
                    int64_t{bias != nullptr}, a.align[0], a.align[1], a.align[2], int64_t{nd},
                    int64_t{a.transposed}}) {
    key[k++] = v;
  }
  for (int i = 0; i < nd; ++i) {
    key[k++] = a.x_sizes[i];
    key[k++] = a.x_strides[i];
    key[k++] = a.w_sizes[i];
    key[k++] = a.w_strides[i];
  }
  for (int i = 0; i < kConvDims; ++i) {
    key[k++] = params.stride[i];
    key[k++] = params.padding[i];
    key[k++] = params.dilation[i];
    key[k++] = transpose != nullptr ? transpose->output_padding[i] : 0;
  }
  thread_local std::unordered_map<Key, std::unique_ptr<Plan>, KeyHash> plans;
  try {
    HandleState& h = cudnn_handle(device);
    auto it = plans.find(key);
    if (it == plans.end()) {
      if (plans.size() >= 256) plans.clear();  // a blob has a handful of geometries
      it = plans
               .emplace(key, make_plan(h, a, params, groups, s.channels_last, bias != nullptr,
                                       allow_tf32))
               .first;
    }
    Plan& plan = *it->second;
    bind_stream(h, current_stream(device));
    const float one = 1.0f, zero = 0.0f;
    void* w_data = w.data_ptr();
    SlimTensor w_dense;
    if (plan.transform_weight) {
      w_dense = SlimTensor::empty(w.sizes().data(), plan.w_dense_strides, nd, dtype, device::kCUDA,
                                  device);
      ok(d.transform_tensor(h.handle, &one, plan.w_given.desc, w_data, &zero, plan.w_dense.desc,
                            w_dense.data_ptr()),
         "cudnnTransformTensor");
      w_data = w_dense.data_ptr();
    }
    std::shared_ptr<Storage> workspace;
    if (plan.workspace > 0) workspace = device_storage(plan.workspace, device);
    void* ws = workspace ? workspace->data() : nullptr;
    if (plan.graph != nullptr) {
      if (!plan.graph->tuned) {
        choose_engine(h, plan, x.data_ptr(), w_data, y.data_ptr(), ws, current_stream(device));
      }
      run_graph_plan(h, *plan.graph, x.data_ptr(), w_data, y.data_ptr(), ws);
      g_on_graph.fetch_add(1, std::memory_order_relaxed);
    } else {
      const LegacyPlan& l = *plan.legacy;
      if (a.transposed) {
        ok(d.convolution_backward_data(h.handle, &one, l.w, w_data, l.x.desc, x.data_ptr(), l.conv,
                                       l.algo, ws, plan.workspace, &zero, l.y.desc, y.data_ptr()),
           "cudnnConvolutionBackwardData");
      } else {
        ok(d.convolution_forward(h.handle, &one, l.x.desc, x.data_ptr(), l.w, w_data, l.conv,
                                 l.algo, ws, plan.workspace, &zero, l.y.desc, y.data_ptr()),
           "cudnnConvolutionForward");
      }
    }
    if (bias != nullptr) {
      ok(d.add_tensor(h.handle, &one, plan.bias.desc, bias->data_ptr(), &one, plan.y.desc,
                      y.data_ptr()),
         "cudnnAddTensor");
    }
    *out = conv_output_view(y, s);
    return true;
  } catch (const CudnnFailure& failure) {
    *why = failure.what;
    return false;
  }
}

}  // namespace cuda
}  // namespace shimkit
