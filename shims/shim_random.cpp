// Slim CPU random numbers: randint's out variant, which is how an Inductor
// program seeds its own generator (torch.rand, randn, rand_like, dropout in
// a kernel): it draws one int64 seed per random op of the program over the
// whole int64 range, then its kernels derive every value from those seeds.
// The draws come from one process-wide 64-bit Mersenne Twister, seeded from
// the operating system's entropy at first use, from SHIMKIT_SEED when that is
// set, or by shimkit_shim_manual_seed (the runtimes' manual_seed): a program
// run twice after the same seed gives the same values, as torch's runner does
// after torch.manual_seed. The values themselves differ from torch's, whose
// generator is another (Philox for its own draws).
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>

#include "shims/shim_internal.h"
#include "shims/strided_loop.h"

namespace shimkit {
namespace {

class Generator {
 public:
  Generator() {
    const char* seed = std::getenv("SHIMKIT_SEED");
    engine_.seed(seed != nullptr ? std::strtoull(seed, nullptr, 10) : entropy());
  }

  void seed(uint64_t value) {
    std::lock_guard<std::mutex> lock(mutex_);
    engine_.seed(value);
  }

  // Hands `for_each` a function that draws uniformly over [low, high) (high >
  // low, the whole int64 range included); it calls it once per element. One
  // lock and one distribution for the whole tensor: its draws are consecutive.
  template <typename ForEach>
  void draw_each(int64_t low, int64_t high, ForEach&& for_each) {
    const uint64_t span = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
    std::uniform_int_distribution<uint64_t> offset(0, span - 1);
    std::lock_guard<std::mutex> lock(mutex_);
    for_each([&] { return static_cast<int64_t>(static_cast<uint64_t>(low) + offset(engine_)); });
  }

 private:
  static uint64_t entropy() {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }

  std::mutex mutex_;
  std::mt19937_64 engine_;
};

Generator& generator() {
  static Generator* instance = new Generator();  // never destroyed: used until exit
  return *instance;
}

template <typename T>
void fill_uniform(SlimTensor& out, int64_t low, int64_t high) {
  T* data = static_cast<T*>(out.data_ptr());
  generator().draw_each(low, high, [&](auto draw) {
    for_each_offset(out, [&](int64_t offset) { data[offset] = static_cast<T>(draw()); });
  });
}

void randint_into(SlimTensor& out, int64_t low, int64_t high, const int64_t* size,
                  int64_t size_len) {
  if (!(low < high)) {
    throw ShimError("randint: low must be below high, got [" + std::to_string(low) + ", " +
                    std::to_string(high) + ")");
  }
  int64_t numel = 1;
  for (int64_t i = 0; i < size_len; ++i) numel *= size[i];
  if (out.dim() != size_len || out.numel() != numel) {
    throw ShimError("randint: out has " + std::to_string(out.numel()) +
                    " elements in its shape, the size asks for " + std::to_string(numel));
  }
  switch (out.dtype()) {
    case dtype::kInt64:
      return fill_uniform<int64_t>(out, low, high);
    case dtype::kInt32:
      return fill_uniform<int32_t>(out, low, high);
    case dtype::kFloat32:
      return fill_uniform<float>(out, low, high);
    case dtype::kFloat64:
      return fill_uniform<double>(out, low, high);
    default:
      throw ShimError(std::string("randint: out of dtype ") + dtype_name(out.dtype()) +
                      " (int64, int32, float32 or float64 here)");
  }
}

}  // namespace
}  // namespace shimkit

extern "C" {

AOTITorchError aoti_torch_cpu_randint_low_out(AtenTensorHandle out, int64_t low, int64_t high,
                                              const int64_t* size, int64_t size_len_) {
  return SHIMKIT_GUARD(
      { shimkit::randint_into(shimkit::as_tensor(out), low, high, size, size_len_); });
}

void shimkit_shim_manual_seed(uint64_t seed) { shimkit::generator().seed(seed); }

}  // extern "C"
