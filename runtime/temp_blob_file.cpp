#include "runtime/temp_blob_file.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace shimkit {
namespace {

// A name clash (EEXIST) is retried with fresh random bits this many times: a
// local user can occupy some names in a shared /tmp, never all of them.
constexpr int kCreateAttempts = 64;

std::string temp_dir() {
  const char* dir = std::getenv("TMPDIR");
  return (dir != nullptr && dir[0] != '\0') ? std::string(dir) : std::string("/tmp");
}

// 64 unpredictable bits as 16 hex digits (getrandom; never blocks once the
// kernel's pool is initialised, which it is long before any blob is loaded).
bool random_suffix(std::string* out, std::string* error) {
  uint64_t bits = 0;
  char* p = reinterpret_cast<char*>(&bits);
  size_t left = sizeof bits;
  while (left > 0) {
    const ssize_t got = getrandom(p, left, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      *error = std::string("cannot get random bytes for a temp file name: ") + std::strerror(errno);
      return false;
    }
    p += got;
    left -= static_cast<size_t>(got);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(bits));
  *out = hex;
  return true;
}

bool write_all(int fd, const char* p, size_t left) {
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    left -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace

bool TempBlobFile::write(const void* bytes, size_t size, std::string* error) {
  unlink_now();
  const std::string dir = temp_dir();
  int fd = -1;
  std::string path;
  for (int attempt = 0; attempt < kCreateAttempts && fd < 0; ++attempt) {
    std::string suffix;
    if (!random_suffix(&suffix, error)) return false;
    path = dir + "/shimkit-blob-" + suffix + ".so";
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    const int saved = errno;
    *error = dir + ": cannot create a temp file for the blob: " + std::strerror(saved) +
             (saved == EEXIST ? " (every name tried was taken)" : "") +
             "; set TMPDIR to a writable directory";
    return false;
  }
  path_ = path;
  if (!write_all(fd, static_cast<const char*>(bytes), size)) {
    *error = path + ": cannot write the blob's temp file: " + std::strerror(errno);
    ::close(fd);
    unlink_now();
    return false;
  }
  if (::close(fd) != 0) {
    *error = path + ": cannot close the blob's temp file: " + std::strerror(errno);
    unlink_now();
    return false;
  }
  return true;
}

void TempBlobFile::unlink_now() {
  if (!path_.empty()) {
    ::unlink(path_.c_str());
    path_.clear();
  }
}

}  // namespace shimkit
