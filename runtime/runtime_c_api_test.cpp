// The runtime's C API on bad blobs (never loaded, never a crash), its temp
// files, and the shim provider it makes global. Exit status 0 = pass.
#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "runtime/shimkit_runtime.h"
#include "shims/aoti_shim_abi.h"

namespace {

int g_failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s (last error: %s)\n", what.c_str(), shimkit_last_error());
    ++g_failures;
  }
}

std::vector<char> read_file(const char* path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int count_entries(const std::string& dir) {
  int n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) ++n;
    }
    closedir(d);
  }
  return n;
}

}  // namespace

int main() {
  const char* test_tmp = std::getenv("TEST_TMPDIR");
  std::string tmp = std::string(test_tmp ? test_tmp : "/tmp") + "/rt_tmp";
  std::string mk = "mkdir -p " + tmp;
  expect(std::system(mk.c_str()) == 0, "mkdir");
  setenv("TMPDIR", tmp.c_str(), 1);

  const char* provider = shimkit_provider_path();
  expect(provider != nullptr && std::strstr(provider, "libshimkit_shims.so") != nullptr,
         "provider is the shim shared library");
  // The prefix the runtime reports is the one the provider's shims carry.
  const std::string served = shimkit_runtime_prefix();
  expect(!served.empty(), "runtime reports its prefix");
  expect(dlsym(RTLD_DEFAULT, (served + "aoti_torch_empty_strided").c_str()) != nullptr,
         "provider defines <served prefix>aoti_torch_empty_strided");
  expect(dlsym(RTLD_DEFAULT, ("x" + served + "aoti_torch_empty_strided").c_str()) == nullptr,
         "control: another prefix resolves to nothing");

  shimkit_model* model = nullptr;
  const char text[] = "definitely not an ELF file, but long enough to hold an ELF header ...";
  expect(shimkit_model_load(text, sizeof text, &model) == SHIMKIT_E_BAD_BLOB, "non-ELF rejected");
  expect(std::strstr(shimkit_last_error(), "bad magic") != nullptr, "non-ELF message");
  expect(model == nullptr, "no model on failure");

  // This test binary is a real ELF: truncated, then whole (no entry points).
  std::vector<char> self = read_file("/proc/self/exe");
  expect(self.size() > 4096, "read self");
  expect(shimkit_model_load(self.data(), 100, &model) == SHIMKIT_E_BAD_BLOB, "truncated rejected");
  const int whole = shimkit_check_blob(self.data(), self.size());
  // A PIE executable is ET_DYN; an old-style one is not: both are refused.
  expect(whole == SHIMKIT_E_MISSING_ENTRY || whole == SHIMKIT_E_BAD_BLOB,
         "executable without entry points rejected");
  expect(count_entries(tmp) == 0, "no temp file left behind");

  // The shims themselves answer through the renamed ABI.
  AtenTensorHandle t = nullptr;
  const int64_t sizes[2] = {2, 3};
  expect(aoti_torch_empty_strided(2, sizes, nullptr, aoti_torch_dtype_float32(),
                                  aoti_torch_device_type_cpu(), -1, &t) == AOTI_TORCH_SUCCESS,
         "empty_strided");
  int64_t numel = 0;
  expect(aoti_torch_get_numel(t, &numel) == AOTI_TORCH_SUCCESS && numel == 6, "numel");
  expect(aoti_torch_delete_tensor_object(t) == AOTI_TORCH_SUCCESS, "delete");
  expect(aoti_torch_get_numel(nullptr, &numel) == AOTI_TORCH_FAILURE, "null handle is an error");

  if (g_failures == 0) std::puts("runtime_c_api_test: all passed");
  return g_failures == 0 ? 0 : 1;
}
