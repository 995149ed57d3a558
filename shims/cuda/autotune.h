// Choosing among the ways a library offers to run one operation by timing
// them on the real operands, once per geometry: cuBLASLt's algorithms
// (gemm.cpp) and cuDNN's engines (cudnn_conv.cpp). The libraries' heuristics
// rank without running anything, and for small batches their first guess
// can be several times slower than a runner-up (on an H200, a 28 us
// cuBLASLt kernel for [8, 256] x [256, 512] where another takes 6 us).
#ifndef SHIMKIT_SHIMS_CUDA_AUTOTUNE_H_
#define SHIMKIT_SHIMS_CUDA_AUTOTUNE_H_

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

// The index of the fastest of `count` candidates: each runs once to warm up,
// then kTimingRuns times between two synchronisations of `stream`;
// `run(i)` returns false when candidate i fails (it is skipped). Returns
// `count` when no candidate could be timed: while this thread captures a
// CUDA graph (a synchronisation would end the capture), or when the stream
// cannot be synchronised. The runs overwrite what the operation writes.
template <typename Run>
size_t fastest_candidate(size_t count, Stream stream, Run&& run) {
  if (capturing()) return count;
  const Runtime& rt = runtime();
  double best = 0.0;
  size_t best_index = count;
  for (size_t i = 0; i < count; ++i) {
    if (!run(i)) continue;
    if (rt.stream_synchronize(stream) != kSuccess) return count;
    const auto start = std::chrono::steady_clock::now();
    bool ok = true;
    for (int rep = 0; rep < kTimingRuns && ok; ++rep) ok = run(i);
    if (!ok || rt.stream_synchronize(stream) != kSuccess) continue;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (best_index == count || seconds < best) {
      best = seconds;
      best_index = i;
    }
  }
  return best_index;
}

}  // namespace cuda
}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CUDA_AUTOTUNE_H_
