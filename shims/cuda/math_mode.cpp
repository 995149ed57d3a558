#include "shims/cuda/math_mode.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace shimkit {
namespace cuda {
namespace {

// -1: not decided yet (the environment decides at first use).
std::atomic<int> g_conv_tf32{-1};
std::atomic<int> g_matmul_tf32{-1};

std::atomic<int>& flag(Tf32Use use) {
  return use == Tf32Use::kConvolutions ? g_conv_tf32 : g_matmul_tf32;
}

const char* environment_name(Tf32Use use) {
  return use == Tf32Use::kConvolutions ? "SHIMKIT_CUDNN_TF32" : "SHIMKIT_MATMUL_TF32";
}

}  // namespace

bool tf32_allowed(Tf32Use use) {
  std::atomic<int>& allowed = flag(use);
  int v = allowed.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* env = std::getenv(environment_name(use));
    int expected = -1;
    allowed.compare_exchange_strong(expected, env != nullptr && std::strcmp(env, "1") == 0);
    v = allowed.load();
  }
  return v == 1;
}

void set_tf32_allowed(Tf32Use use, bool allowed) { flag(use).store(allowed ? 1 : 0); }

}  // namespace cuda
}  // namespace shimkit
