// shimkit-run-blob: the smallest process that runs a blob on the slim runtime
// (no Python, no libtorch). Used to measure cold load and peak RSS.
//
//   shimkit-run-blob BLOB.so RUNS SPEC...     SPEC = f32:4x16 | f64:2x3 | i64:7 ...
//
// Inputs are zero-filled. Prints one JSON line: load_ms, first_run_ms,
// us_per_run (over RUNS further runs), max_rss_kb.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/shimkit_runtime.h"

namespace {

bool parse_spec(const char* spec, shimkit_tensor* t, std::vector<std::vector<char>>* storage) {
  const char* colon = std::strchr(spec, ':');
  if (colon == nullptr) return false;
  const std::string kind(spec, colon);
  size_t itemsize = 0;
  if (kind == "f32") {
    t->dtype = 6;
    itemsize = 4;
  } else if (kind == "f64") {
    t->dtype = 7;
    itemsize = 8;
  } else if (kind == "i64") {
    t->dtype = 4;
    itemsize = 8;
  } else if (kind == "i32") {
    t->dtype = 3;
    itemsize = 4;
  } else
    return false;
  t->ndim = 0;
  const char* p = colon + 1;
  while (*p != '\0') {
    if (t->ndim == SHIMKIT_MAX_DIMS) return false;
    char* end = nullptr;
    const long long v = std::strtoll(p, &end, 10);
    if (end == p || v < 0) return false;
    t->sizes[t->ndim++] = v;
    p = (*end == 'x') ? end + 1 : end;
    if (*end != 'x' && *end != '\0') return false;
  }
  int64_t n = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    t->strides[i] = n;
    n *= t->sizes[i];
  }
  storage->emplace_back(static_cast<size_t>(n) * itemsize + 1, 0);
  t->data = storage->back().data();
  return true;
}

// Peak RSS of this process image in kB. VmHWM restarts at exec, unlike
// getrusage's ru_maxrss, which a child inherits from a big parent.
long peak_rss_kb() {
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    long kb = -1;
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
    }
    std::fclose(f);
    if (kb >= 0) return kb;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s BLOB.so RUNS [f32:4x16 ...]\n", argv[0]);
    return 2;
  }
  const long runs = std::strtol(argv[2], nullptr, 10);
  std::vector<std::vector<char>> storage;
  storage.reserve(static_cast<size_t>(argc));
  std::vector<shimkit_tensor> inputs(static_cast<size_t>(argc - 3));
  for (int i = 3; i < argc; ++i) {
    if (!parse_spec(argv[i], &inputs[i - 3], &storage)) {
      std::fprintf(stderr, "%s: bad input spec '%s' (want e.g. f32:4x16)\n", argv[0], argv[i]);
      return 2;
    }
  }
  auto start = std::chrono::steady_clock::now();
  shimkit_model* model = nullptr;
  if (shimkit_model_load_file(argv[1], &model) != SHIMKIT_OK) {
    std::fprintf(stderr, "%s\n", shimkit_last_error());
    return 1;
  }
  const double load_ms = ms_since(start);
  std::vector<shimkit_tensor> outputs(shimkit_model_num_outputs(model));
  start = std::chrono::steady_clock::now();
  if (shimkit_model_run(model, inputs.data(), inputs.size(), outputs.data(), outputs.size()) !=
      SHIMKIT_OK) {
    std::fprintf(stderr, "%s\n", shimkit_last_error());
    shimkit_model_free(model);
    return 1;
  }
  const double first_ms = ms_since(start);
  double ns = 0;
  if (runs > 0 &&
      shimkit_model_bench(model, inputs.data(), inputs.size(), runs, &ns) != SHIMKIT_OK) {
    std::fprintf(stderr, "%s\n", shimkit_last_error());
    shimkit_model_free(model);
    return 1;
  }
  shimkit_model_free(model);
  std::printf(
      "{\"load_ms\": %.3f, \"first_run_ms\": %.3f, \"us_per_run\": %.3f, \"max_rss_kb\": %ld}\n",
      load_ms, first_ms, ns / 1000.0, peak_rss_kb());
  return 0;
}
