// Choosing among the ways a library offers to run one operation by timing
// them on the real operands, once per geometry: cuBLASLt's algorithms
// (gemm.cpp) and cuDNN's engines (cudnn_conv.cpp). The libraries' heuristics
// rank without running anything, and for small batches their first guess
// can be several times slower than a runner-up (on an H200, a 28 us
// cuBLASLt kernel for [8, 256] x [256, 512] where another takes 6 us).
#ifndef SHIMKIT_SHIMS_CUDA_AUTOTUNE_H_
#define SHIMKIT_SHIMS_CUDA_AUTOTUNE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "shims/cuda/cuda_api.h"
#include "shims/cuda/cuda_context.h"

namespace shimkit {
namespace cuda {

// Timed runs per candidate, after one warm-up run.
constexpr int kTimingRuns = 5;

// Whether the environment variable `name` leaves autotuning on (anything but
// "0"; unset: on).
inline bool autotune_enabled(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

// Holds a stream (a host function it runs waits) until open() or the
// destructor: the work enqueued behind it then runs back to back on the
// device, so events around it time the kernels, not the host's launches (a
// cuDNN execute or a cuBLASLt call costs the host about as long as a small
// kernel runs: timed from the host, the candidates of a small operation all
// look alike). The wait gives up after a second, so work that itself waits
// for the stream (nothing the candidates do should) cannot hang.
class StreamGate {
 public:
  StreamGate(const Runtime& rt, Stream stream)
      : held_(rt.launch_host_func(stream, &StreamGate::wait, &open_) == kSuccess) {}
  StreamGate(const StreamGate&) = delete;
  StreamGate& operator=(const StreamGate&) = delete;
  // The destructor opens it too; the caller must not leave before the stream
  // has passed it (an event recorded after it, synchronised, or a stream
  // synchronisation): the host function reads open_.
  ~StreamGate() { open(); }
  bool held() const { return held_; }
  void open() { open_.store(true, std::memory_order_release); }

 private:
  static void wait(void* flag) {
    const auto* open = static_cast<const std::atomic<bool>*>(flag);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (!open->load(std::memory_order_acquire) && std::chrono::steady_clock::now() < deadline) {
    }
  }
  std::atomic<bool> open_{false};
  bool held_;
};

// Two events (cudaEventCreate: timing on), destroyed with the object.
class EventPair {
 public:
  explicit EventPair(const Runtime& rt) : rt_(rt) {
    ok_ = rt.event_create(&start_) == kSuccess && rt.event_create(&stop_) == kSuccess;
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair() {
    if (start_ != nullptr) rt_.event_destroy(start_);
    if (stop_ != nullptr) rt_.event_destroy(stop_);
  }
  bool ok() const { return ok_; }
  void* start() const { return start_; }
  void* stop() const { return stop_; }

 private:
  const Runtime& rt_;
  void* start_ = nullptr;
  void* stop_ = nullptr;
  bool ok_ = false;
};

// The index of the fastest of `count` candidates: each runs once to warm up,
// then kTimingRuns times back to back on `stream` behind a StreamGate, timed
// on the device by events; `run(i)` returns false when candidate i fails (it
// is skipped). Returns `count` when no candidate could be timed: while this
// thread captures a CUDA graph (a synchronisation would end the capture), or
// when the runtime cannot time on the device (Runtime::timing_error) or the
// timing fails. The runs overwrite what the operation writes.
template <typename Run>
size_t fastest_candidate(size_t count, Stream stream, Run&& run) {
  if (capturing()) return count;
  const Runtime& rt = runtime();
  if (!rt.timing_error.empty() || rt.launch_host_func == nullptr) return count;
  const EventPair events(rt);
  if (!events.ok()) return count;
  float best = 0.0f;
  size_t best_index = count;
  for (size_t i = 0; i < count; ++i) {
    if (!run(i)) continue;
    bool ok = true;
    {
      StreamGate gate(rt, stream);
      ok = gate.held() && rt.event_record(events.start(), stream) == kSuccess;
      for (int rep = 0; rep < kTimingRuns && ok; ++rep) ok = run(i);
      ok = ok && rt.event_record(events.stop(), stream) == kSuccess;
      gate.open();
      // Past the gate before it goes (its host function reads it).
      if (rt.stream_synchronize(stream) != kSuccess) return count;
    }
    float ms = 0.0f;
    if (!ok || rt.event_elapsed_time(&ms, events.start(), events.stop()) != kSuccess) continue;
    if (best_index == count || ms < best) {
      best = ms;
      best_index = i;
    }
  }
  return best_index;
}

}  // namespace cuda
}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CUDA_AUTOTUNE_H_
