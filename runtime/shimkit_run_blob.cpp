// shimkit-run-blob: the smallest process that runs a blob on the slim runtime
// (no Python, no libtorch). Used to measure cold load and peak RSS.
//
//   shimkit-run-blob [--bytes] [--stand-ins=FILE] BLOB.so RUNS SPEC...
//   SPEC = f32:4x16 | f64:2x3 | i64:7 ...
//
// The blob is loaded from its file (shimkit_model_load_file), or with --bytes
// read into this process's memory and loaded from there (shimkit_model_load),
// as a host that holds its blob in memory does; that copy stays for the run.
// --stand-ins names, one original FQN per line, the constants whose bytes a
// shim's packed copy may replace (shimkit_model_allow_stand_ins).
// Inputs are zero-filled. Prints one JSON line: load_ms, first_run_ms,
// us_per_run (over RUNS further runs), max_rss_kb, and "memory": what the
// process held before the load, after it, after the first run and at the end
// (phases).
// Each phase gives the peak RSS so far (VmHWM), the RSS split into anonymous,
// file-backed and shared-memory pages, and memfd_kb: every page of the memory
// files this process maps (the blob's), resident or not; a memory file's pages
// not mapped in are memory the process holds that RSS does not show, so
// held_kb = RSS - RssShmem + memfd_kb is the honest figure. With
// SHIMKIT_RUN_BLOB_SMAPS=1 the mappings with the most RSS go to stderr too.
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <utility>
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

// One line of /proc/self/status ("VmHWM:" ...) in kB, or -1.
long status_kb(const char* key) {
  long kb = -1;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    const size_t n = std::strlen(key);
    while (std::fgets(line, sizeof line, f) != nullptr) {
      if (std::strncmp(line, key, n) == 0 && line[n] == ':') {
        kb = std::strtol(line + n + 1, nullptr, 10);
        break;
      }
    }
    std::fclose(f);
  }
  return kb;
}

// Pages (kB) held by the memory files this process maps, counted once per
// file (fstat of /proc/self/map_files/<range>: st_blocks is what the file
// holds, resident or not, holes not counted).
long memfd_kb() {
  FILE* f = std::fopen("/proc/self/maps", "r");
  if (f == nullptr) return -1;
  std::set<std::pair<dev_t, ino_t>> seen;
  long kb = 0;
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strstr(line, "/memfd:") == nullptr) continue;
    const std::string range(line, std::strcspn(line, " "));
    struct stat st{};
    if (::stat(("/proc/self/map_files/" + range).c_str(), &st) != 0) continue;
    if (seen.insert({st.st_dev, st.st_ino}).second) kb += static_cast<long>(st.st_blocks / 2);
  }
  std::fclose(f);
  return kb;
}

// The mappings with the most RSS (smaps), to stderr.
void print_top_mappings(const char* phase) {
  FILE* f = std::fopen("/proc/self/smaps", "r");
  if (f == nullptr) return;
  std::vector<std::pair<long, std::string>> rows;
  std::string name;
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    long kb = 0;
    if (std::sscanf(line, "Rss: %ld kB", &kb) == 1) {
      rows.emplace_back(kb, name);
    } else if (std::strchr(line, '-') != nullptr && std::strchr(line, ':') != nullptr &&
               line[0] != ' ' && std::strncmp(line, "Rss", 3) != 0 && line[0] >= '0' &&
               (line[0] <= '9' || line[0] >= 'a')) {
      // "start-end perms offset dev inode  path": the path, or "[anon]".
      const char* path = std::strchr(line, '/');
      const char* bracket = std::strchr(line, '[');
      const char* p = path != nullptr ? path : bracket;
      name = p != nullptr ? std::string(p, std::strcspn(p, "\n")) : "[anon]";
    }
  }
  std::fclose(f);
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::fprintf(stderr, "%s: mappings by RSS\n", phase);
  for (size_t i = 0; i < rows.size() && i < 12; ++i) {
    std::fprintf(stderr, "  %8ld kB  %s\n", rows[i].first, rows[i].second.c_str());
  }
}

// One phase of the "memory" report, as a JSON object.
std::string memory_phase(const char* phase) {
  const long rss = status_kb("VmRSS"), shmem = status_kb("RssShmem"), memfd = memfd_kb();
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "{\"phase\": \"%s\", \"peak_rss_kb\": %ld, \"rss_kb\": %ld, \"anon_kb\": %ld, "
                "\"file_kb\": %ld, \"shmem_kb\": %ld, \"memfd_kb\": %ld, \"held_kb\": %ld}",
                phase, status_kb("VmHWM"), rss, status_kb("RssAnon"), status_kb("RssFile"), shmem,
                memfd, rss - shmem + memfd);
  const char* smaps = std::getenv("SHIMKIT_RUN_BLOB_SMAPS");
  if (smaps != nullptr && std::strcmp(smaps, "1") == 0) print_top_mappings(phase);
  return buf;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// The non-empty lines of `path`.
bool read_lines(const char* path, std::vector<std::string>* lines) {
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  std::string line;
  for (int c = std::fgetc(f);; c = std::fgetc(f)) {
    if (c == EOF || c == '\n') {
      if (!line.empty()) lines->push_back(line);
      line.clear();
      if (c == EOF) break;
    } else {
      line.push_back(static_cast<char>(c));
    }
  }
  const bool ok = std::ferror(f) == 0;
  std::fclose(f);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  bool from_bytes = false;
  const char* stand_ins_file = nullptr;
  while (argc > 1 && std::strncmp(argv[1], "--", 2) == 0) {
    if (std::strcmp(argv[1], "--bytes") == 0) {
      from_bytes = true;
    } else if (std::strncmp(argv[1], "--stand-ins=", 12) == 0) {
      stand_ins_file = argv[1] + 12;
    } else {
      break;
    }
    --argc;
    ++argv;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s [--bytes] [--stand-ins=FILE] BLOB.so RUNS [f32:4x16 ...]\n",
                 argv[0]);
    return 2;
  }
  std::vector<std::string> stand_ins;
  if (stand_ins_file != nullptr && !read_lines(stand_ins_file, &stand_ins)) {
    std::fprintf(stderr, "%s: cannot read\n", stand_ins_file);
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
  std::vector<std::string> phases{memory_phase("start")};
  auto start = std::chrono::steady_clock::now();
  shimkit_model* model = nullptr;
  std::vector<char> bytes;
  if (from_bytes) {
    FILE* f = std::fopen(argv[1], "rb");
    char chunk[1 << 16];
    size_t got = 0;
    while (f != nullptr && (got = std::fread(chunk, 1, sizeof chunk, f)) > 0) {
      bytes.insert(bytes.end(), chunk, chunk + got);
    }
    if (f == nullptr || std::ferror(f) != 0) {
      std::fprintf(stderr, "%s: cannot read\n", argv[1]);
      if (f != nullptr) std::fclose(f);
      return 1;
    }
    std::fclose(f);
  }
  const int loaded = from_bytes ? shimkit_model_load(bytes.data(), bytes.size(), &model)
                                : shimkit_model_load_file(argv[1], &model);
  if (loaded != SHIMKIT_OK) {
    std::fprintf(stderr, "%s\n", shimkit_last_error());
    return 1;
  }
  std::vector<const char*> names;
  for (const std::string& name : stand_ins) names.push_back(name.c_str());
  size_t allowed = 0;
  if (shimkit_model_allow_stand_ins(model, names.data(), names.size(), &allowed) != SHIMKIT_OK) {
    std::fprintf(stderr, "%s\n", shimkit_last_error());
    shimkit_model_free(model);
    return 1;
  }
  const double load_ms = ms_since(start);
  phases.push_back(memory_phase("load"));
  std::vector<shimkit_tensor> outputs(shimkit_model_num_outputs(model));
  start = std::chrono::steady_clock::now();
  if (shimkit_model_run(model, inputs.data(), inputs.size(), outputs.data(), outputs.size()) !=
      SHIMKIT_OK) {
    std::fprintf(stderr, "%s\n", shimkit_last_error());
    shimkit_model_free(model);
    return 1;
  }
  const double first_ms = ms_since(start);
  phases.push_back(memory_phase("first_run"));
  double ns = 0;
  if (runs > 0 &&
      shimkit_model_bench(model, inputs.data(), inputs.size(), runs, &ns) != SHIMKIT_OK) {
    std::fprintf(stderr, "%s\n", shimkit_last_error());
    shimkit_model_free(model);
    return 1;
  }
  phases.push_back(memory_phase("runs"));
  shimkit_model_free(model);
  std::string memory;
  for (const std::string& p : phases) memory += (memory.empty() ? "" : ", ") + p;
  std::printf(
      "{\"load_ms\": %.3f, \"first_run_ms\": %.3f, \"us_per_run\": %.3f, \"max_rss_kb\": %ld, "
      "\"stand_ins\": %zu, \"memory\": [%s]}\n",
      load_ms, first_ms, ns / 1000.0, peak_rss_kb(), allowed, memory.c_str());
  return 0;
}
