// Running a CPU shim for a CUDA op: the correct, slow path for what cuBLAS(Lt)
// or cuDNN cannot take and for ops with no device kernel here. The CPU shim
// runs on host copies of the device inputs; its results are copied back into
// a given `out`, or become new device tensors in the geometry the CPU op chose.
//
// Eagerly, each call synchronises: inputs are copied to the host, the op runs,
// results are uploaded. Under a CUDA graph capture the call becomes a captured
// host step instead: stream-ordered copies into pinned buffers, the op in a
// host function (cudaLaunchHostFunc), copies back to the device, so models
// with host fallbacks replay too. The op then runs at every replay, long after
// the shim call returned, so its closure owns its arguments (OwnedInts,
// std::string), never pointers into the caller's. The capture learns the
// results' geometry by running the op once on zeros; an op whose result size
// depends on the data (nonzero) is refused under capture, with the reason.
#ifndef SHIMKIT_SHIMS_CUDA_HOST_FALLBACK_H_
#define SHIMKIT_SHIMS_CUDA_HOST_FALLBACK_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "shims/cuda/cuda_context.h"
#include "shims/shim_internal.h"

namespace shimkit {
namespace cuda {

// Handles to the host tensors of a host step's inputs, in the order the step
// named its device inputs (an absent optional input stays null).
using HostInputs = std::vector<AtenTensorHandle>;
// A CPU shim that returns new host tensors in out[0], out[1], ...
using HostResultsOp = std::function<AOTITorchError(const HostInputs& in, AtenTensorHandle* out)>;
// A CPU shim that writes into the host tensor `out`.
using HostIntoOp = std::function<AOTITorchError(AtenTensorHandle out, const HostInputs& in)>;

// Whether a host op's result sizes follow from its inputs' geometry and
// arguments alone (what a capture needs), or from their values.
enum class ResultSizes { kFromShapes, kFromData };

// Runs `op` on host copies of `inputs` and hands its results back in `rets`
// as tensors on the CUDA device of inputs[0] (all or none). `what` names the
// op in errors.
void results_on_host(const char* what, const std::vector<AtenTensorHandle*>& rets,
                     const HostInputs& inputs, HostResultsOp op,
                     ResultSizes sizes = ResultSizes::kFromShapes);

// Runs `op` on host copies of `out` and `inputs` and copies what it wrote
// back into `out`, a CUDA tensor.
void on_host_into(const char* what, AtenTensorHandle out, const HostInputs& inputs, HostIntoOp op);

// An op that reads no device input, only host state (random draws from the
// CPU shims' generator), run by `op` into a host copy of `out`. Eagerly it is
// on_host_into. Under capture it is no host step: the graph copies into `out`
// from a device buffer of its own, which each launch fills first with a new
// draw (draw_for_launch), so replays draw anew without a host function.
void drawn_before_each_replay(const char* what, AtenTensorHandle out, HostIntoOp op);
// Draws anew what the graph captured into `pool` copies in
// (drawn_before_each_replay), into its buffers, by copies ordered on `stream`
// before the launch that follows; called by every launch.
void draw_for_launch(uint64_t pool, Stream stream);

// The CUDA device `h`'s tensor lives on; throws naming `what` if it is not on one.
int32_t cuda_device_of(AtenTensorHandle h, const char* what);

// The host steps a capture into `pool` (the id begin_private_pool() gave)
// keeps for its graph's replays: how many there are, the first failure a
// replay's step reported, taken (empty when none; a host function cannot fail
// the stream, so the graph's owner asks after synchronising), and releasing
// them once the graph is gone.
size_t host_steps(uint64_t pool);
// The ops those host steps run, in capture order: "topk, histc".
std::string host_step_names(uint64_t pool);
std::string take_replay_error(uint64_t pool);
void release_host_steps(uint64_t pool);

// An int array argument (pointer and length) a host op's closure owns.
class OwnedInts {
 public:
  OwnedInts(const int64_t* values, int64_t length)
      : values_(values, values + (values != nullptr ? length : 0)), length_(length) {}
  const int64_t* data() const { return values_.empty() ? nullptr : values_.data(); }
  int64_t size() const { return length_; }

 private:
  std::vector<int64_t> values_;
  int64_t length_;
};

// An optional scalar argument (a nullable pointer) a host op's closure owns.
template <typename T>
class OwnedOptional {
 public:
  explicit OwnedOptional(const T* value) {
    if (value != nullptr) value_ = *value;
  }
  // The pointer the CPU shim takes (null when absent), valid while this lives.
  T* get() const { return value_.has_value() ? &*value_ : nullptr; }

 private:
  mutable std::optional<T> value_;
};

}  // namespace cuda
}  // namespace shimkit

#endif  // SHIMKIT_SHIMS_CUDA_HOST_FALLBACK_H_
