#include "shims/cuda/host_fallback.h"

#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace shimkit {
namespace cuda {
namespace {

struct CapturedHostStep;

// A value a graph's launches draw on the host (drawn_before_each_replay): the
// op that draws it, and the device buffer the graph copies it from.
struct ReplayDraw {
  std::string what;
  HostIntoOp op;
  SlimTensor device_buffer;
};

// Per capture pool (the graph's identity): the host steps its replays run,
// the first failure one reported, and what its launches draw. Kept until the
// graph is freed.
struct ReplayState {
  std::vector<std::shared_ptr<CapturedHostStep>> steps;
  std::string error;
  std::vector<std::shared_ptr<ReplayDraw>> draws;
};

class ReplayStates {
 public:
  void keep(uint64_t pool, std::shared_ptr<CapturedHostStep> step) {
    std::lock_guard<std::mutex> lock(mutex_);
    states_[pool].steps.push_back(std::move(step));
  }
  void keep_draw(uint64_t pool, std::shared_ptr<ReplayDraw> draw) {
    std::lock_guard<std::mutex> lock(mutex_);
    states_[pool].draws.push_back(std::move(draw));
  }
  std::vector<std::shared_ptr<ReplayDraw>> draws(uint64_t pool) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = states_.find(pool);
    return it == states_.end() ? std::vector<std::shared_ptr<ReplayDraw>>() : it->second.draws;
  }
  size_t count(uint64_t pool) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = states_.find(pool);
    return it == states_.end() ? 0 : it->second.steps.size();
  }
  std::string names(uint64_t pool);
  void report(uint64_t pool, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = states_.find(pool);
    if (it != states_.end() && it->second.error.empty()) it->second.error = what;
  }
  std::string take(uint64_t pool) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = states_.find(pool);
    if (it == states_.end()) return "";
    return std::exchange(it->second.error, std::string());
  }
  // Destroys the pool's steps outside the lock (their pinned buffers go
  // back to the runtime).
  void release(uint64_t pool) {
    ReplayState gone;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = states_.find(pool);
      if (it == states_.end()) return;
      gone = std::move(it->second);
      states_.erase(it);
    }
  }

 private:
  std::mutex mutex_;
  std::unordered_map<uint64_t, ReplayState> states_;
};

// Never destroyed, like the allocator's block cache: host functions of a
// graph still alive at exit may refer to it.
ReplayStates& replay_states() {
  static ReplayStates* s = new ReplayStates();
  return *s;
}

// Owns the handles a CPU shim returned.
class OwnedHandles {
 public:
  explicit OwnedHandles(size_t n) : handles_(n, nullptr) {}
  OwnedHandles(const OwnedHandles&) = delete;
  OwnedHandles& operator=(const OwnedHandles&) = delete;
  ~OwnedHandles() {
    for (AtenTensorHandle h : handles_) {
      if (h != nullptr) aoti_torch_delete_tensor_object(h);
    }
  }
  AtenTensorHandle* data() { return handles_.data(); }
  const SlimTensor& operator[](size_t i) const {
    if (handles_[i] == nullptr) throw ShimError("result " + std::to_string(i) + " is missing");
    return as_tensor(handles_[i]);
  }
  size_t size() const { return handles_.size(); }

 private:
  std::vector<AtenTensorHandle> handles_;
};

// A handle that views `t` without owning it (valid while `t` lives).
AtenTensorHandle borrow_handle(SlimTensor& t) { return reinterpret_cast<AtenTensorHandle>(&t); }

// Host tensors behind a host step's inputs, and handles to them in order (a
// deque: the handles point into it).
struct HostTensors {
  std::deque<SlimTensor> tensors;
  HostInputs handles;

  void add(SlimTensor t) {
    tensors.push_back(std::move(t));
    handles.push_back(borrow_handle(tensors.back()));
  }
};

// Eagerly: host mirrors of the inputs (synchronous copies).
HostTensors mirrors_of(const HostInputs& inputs) {
  HostTensors host;
  for (AtenTensorHandle h : inputs) {
    if (h == nullptr) {
      host.handles.push_back(nullptr);
    } else {
      host.add(host_mirror(as_tensor(h)));
    }
  }
  return host;
}

std::string describe(const SlimTensor& t) {
  std::string s = std::string(dtype_name(t.dtype())) + "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.sizes()[i]);
  return s + "]";
}

bool same_sizes_and_dtype(const SlimTensor& a, const SlimTensor& b) {
  return a.dtype() == b.dtype() && a.sizes().vec() == b.sizes().vec();
}

size_t span_bytes(const SlimTensor& t) {
  return static_cast<size_t>(span_elements(t)) * t.itemsize();
}

// A zeroed page-locked host tensor with t's sizes, strides and dtype.
SlimTensor pinned_like(const SlimTensor& t) {
  const size_t bytes = span_bytes(t);
  std::shared_ptr<Storage> storage = pinned_storage(bytes);
  if (bytes > 0) std::memset(storage->data(), 0, bytes);
  return host_view_of(t, std::move(storage));
}

// One host fallback captured into a CUDA graph: what its host function needs
// at every replay. The copies around it are graph nodes of their own.
struct CapturedHostStep {
  std::string what;
  uint64_t pool = 0;
  HostTensors inputs;               // pinned copies of the device inputs
  std::vector<SlimTensor> results;  // pinned buffers in the captured geometry
  HostResultsOp results_op;         // results_on_host
  HostIntoOp into_op;               // on_host_into: writes into results[0]

  // cudaLaunchHostFunc's callback: runs the op on this replay's inputs.
  // Errors go to the pool's replay state (a host function cannot fail the
  // stream); the device outputs then keep the last replay's values.
  static void run(void* self) {
    auto* step = static_cast<CapturedHostStep*>(self);
    try {
      step->run_op();
    } catch (const std::exception& e) {
      replay_states().report(step->pool, step->what + ": " + e.what());
    }
  }

  void run_op() {
    if (into_op) {
      if (into_op(borrow_handle(results[0]), inputs.handles) != AOTI_TORCH_SUCCESS) {
        throw ShimError(shimkit_shim_last_error());
      }
      return;
    }
    OwnedHandles out(results.size());
    if (results_op(inputs.handles, out.data()) != AOTI_TORCH_SUCCESS) {
      throw ShimError(shimkit_shim_last_error());
    }
    for (size_t i = 0; i < results.size(); ++i) {
      if (!same_sizes_and_dtype(out[i], results[i])) {
        throw ShimError("result " + std::to_string(i) + " is " + describe(out[i]) +
                        " at this replay, " + describe(results[i]) + " when captured");
      }
      copy_tensor(results[i], out[i]);
    }
  }
};

// Under capture: a step whose inputs are pinned buffers filled by copies
// enqueued now on each input's device stream (host inputs are read in place).
std::shared_ptr<CapturedHostStep> begin_step(const char* what, const HostInputs& inputs) {
  auto step = std::make_shared<CapturedHostStep>();
  step->what = what;
  step->pool = current_pool();
  for (AtenTensorHandle h : inputs) {
    if (h == nullptr) {
      step->inputs.handles.push_back(nullptr);
      continue;
    }
    const SlimTensor& t = as_tensor(h);
    if (!is_cuda(t)) {
      step->inputs.add(t);
      continue;
    }
    SlimTensor pinned = pinned_like(t);
    memcpy_any(pinned.data_ptr(), t.data_ptr(), span_bytes(t), t.device_index(), false);
    step->inputs.add(std::move(pinned));
  }
  return step;
}

// Enqueues the step's host function on the current stream of `device_index`
// and keeps the step for the graph's replays.
void launch_step(const std::shared_ptr<CapturedHostStep>& step, int32_t device_index) {
  const Runtime& rt = require_runtime();
  if (rt.launch_host_func == nullptr) {
    throw ShimError(step->what +
                    ": cudaLaunchHostFunc is unavailable, so a CUDA graph cannot "
                    "capture its host fallback");
  }
  check(rt.launch_host_func(current_stream(device_index), &CapturedHostStep::run, step.get()),
        "cudaLaunchHostFunc");
  replay_states().keep(step->pool, step);
}

void capture_results(const char* what, int32_t device_index,
                     const std::vector<AtenTensorHandle*>& rets, const HostInputs& inputs,
                     HostResultsOp op, ResultSizes sizes) {
  if (sizes == ResultSizes::kFromData) {
    throw ShimError(std::string(what) +
                    ": the size of its result depends on the data, so a CUDA graph cannot "
                    "capture it");
  }
  std::shared_ptr<CapturedHostStep> step = begin_step(what, inputs);
  // The result geometry, from one run on the (still zero) pinned inputs.
  OwnedHandles probe(rets.size());
  if (op(step->inputs.handles, probe.data()) != AOTI_TORCH_SUCCESS) {
    throw ShimError(std::string(what) + " (finding its result sizes for a CUDA graph capture): " +
                    shimkit_shim_last_error());
  }
  std::vector<SlimTensor> device_results;
  for (size_t i = 0; i < rets.size(); ++i) {
    const SlimTensor& r = probe[i];
    step->results.push_back(pinned_like(r));
    device_results.push_back(SlimTensor::empty(r.sizes().data(), r.strides().data(), r.dim(),
                                               r.dtype(), device::kCUDA, device_index));
  }
  step->results_op = std::move(op);
  launch_step(step, device_index);
  for (size_t i = 0; i < rets.size(); ++i) {
    memcpy_any(device_results[i].data_ptr(), step->results[i].data_ptr(),
               span_bytes(device_results[i]), device_index, false);
  }
  for (size_t i = 0; i < rets.size(); ++i) *rets[i] = to_handle(std::move(device_results[i]));
}

}  // namespace

// The ops of a pool's host steps in capture order, ", "-separated (defined
// here: CapturedHostStep is complete only now).
std::string ReplayStates::names(uint64_t pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string joined;
  auto it = states_.find(pool);
  if (it == states_.end()) return joined;
  for (const auto& step : it->second.steps) {
    if (!joined.empty()) joined += ", ";
    joined += step->what;
  }
  return joined;
}

size_t host_steps(uint64_t pool) { return replay_states().count(pool); }

std::string host_step_names(uint64_t pool) { return replay_states().names(pool); }

std::string take_replay_error(uint64_t pool) { return replay_states().take(pool); }

void release_host_steps(uint64_t pool) { replay_states().release(pool); }

int32_t cuda_device_of(AtenTensorHandle h, const char* what) {
  if (h == nullptr) throw ShimError(std::string(what) + ": null tensor");
  const SlimTensor& t = as_tensor(h);
  if (!is_cuda(t)) throw ShimError(std::string(what) + ": tensor is not on a CUDA device");
  return t.device_index();
}

void results_on_host(const char* what, const std::vector<AtenTensorHandle*>& rets,
                     const HostInputs& inputs, HostResultsOp op, ResultSizes sizes) {
  for (AtenTensorHandle* r : rets) check_out(r);
  const int32_t device_index = cuda_device_of(inputs.empty() ? nullptr : inputs[0], what);
  if (capturing()) {
    capture_results(what, device_index, rets, inputs, std::move(op), sizes);
    return;
  }
  HostTensors host = mirrors_of(inputs);
  OwnedHandles out(rets.size());
  if (op(host.handles, out.data()) != AOTI_TORCH_SUCCESS) {
    throw ShimError(shimkit_shim_last_error());
  }
  std::vector<SlimTensor> device_results;
  for (size_t i = 0; i < rets.size(); ++i) device_results.push_back(upload(out[i], device_index));
  for (size_t i = 0; i < rets.size(); ++i) *rets[i] = to_handle(std::move(device_results[i]));
}

void drawn_before_each_replay(const char* what, AtenTensorHandle out, HostIntoOp op) {
  if (!capturing()) {
    on_host_into(what, out, {}, std::move(op));
    return;
  }
  const int32_t device_index = cuda_device_of(out, what);
  const SlimTensor& o = as_tensor(out);
  auto draw = std::make_shared<ReplayDraw>();
  draw->what = what;
  draw->op = std::move(op);
  // From the capture's pool: the block stays the graph's until it is freed.
  draw->device_buffer = SlimTensor::empty(o.sizes().data(), o.strides().data(), o.dim(), o.dtype(),
                                          device::kCUDA, device_index);
  memcpy_any(o.data_ptr(), draw->device_buffer.data_ptr(), span_bytes(o), device_index, false);
  replay_states().keep_draw(current_pool(), std::move(draw));
}

void draw_for_launch(uint64_t pool, Stream stream) {
  const Runtime& rt = require_runtime();
  for (const std::shared_ptr<ReplayDraw>& draw : replay_states().draws(pool)) {
    const SlimTensor& buffer = draw->device_buffer;
    SlimTensor drawn = host_view_of(buffer, Storage::allocate(span_bytes(buffer)));
    if (draw->op(borrow_handle(drawn), {}) != AOTI_TORCH_SUCCESS) {
      throw ShimError(draw->what + ": " + shimkit_shim_last_error());
    }
    // From pageable memory: the copy has taken the bytes when it returns, and
    // it follows the stream's earlier work, a replay still reading the buffer.
    check(rt.memcpy_async(buffer.data_ptr(), drawn.data_ptr(), span_bytes(buffer), kMemcpyDefault,
                          stream),
          "cudaMemcpyAsync");
  }
}

void on_host_into(const char* what, AtenTensorHandle out, const HostInputs& inputs, HostIntoOp op) {
  const int32_t device_index = cuda_device_of(out, what);
  const SlimTensor& o = as_tensor(out);
  if (capturing()) {
    std::shared_ptr<CapturedHostStep> step = begin_step(what, inputs);
    // `out` is read too (the op may keep what lies between its elements).
    step->results.push_back(pinned_like(o));
    memcpy_any(step->results[0].data_ptr(), o.data_ptr(), span_bytes(o), device_index, false);
    step->into_op = std::move(op);
    launch_step(step, device_index);
    memcpy_any(o.data_ptr(), step->results[0].data_ptr(), span_bytes(o), device_index, false);
    return;
  }
  SlimTensor host_out = host_mirror(o);
  HostTensors host = mirrors_of(inputs);
  if (op(borrow_handle(host_out), host.handles) != AOTI_TORCH_SUCCESS) {
    throw ShimError(shimkit_shim_last_error());
  }
  copy_tensor(o, host_out);
}

}  // namespace cuda
}  // namespace shimkit
