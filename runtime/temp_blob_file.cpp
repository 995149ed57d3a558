#include "runtime/temp_blob_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace shimkit {
namespace {
std::atomic<unsigned long long> g_counter{0};

std::string temp_dir() {
  const char* dir = std::getenv("TMPDIR");
  return (dir != nullptr && dir[0] != '\0') ? std::string(dir) : std::string("/tmp");
}
}  // namespace

bool TempBlobFile::write(const void* bytes, size_t size, std::string* error) {
  remove();
  const unsigned long long n = g_counter.fetch_add(1, std::memory_order_relaxed);
  std::string path =
      temp_dir() + "/shimkit-blob-" + std::to_string(getpid()) + "-" + std::to_string(n) + ".so";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = path + ": cannot create temp file: " + std::strerror(errno);
    return false;
  }
  path_ = path;
  const char* p = static_cast<const char*>(bytes);
  size_t left = size;
  while (left > 0) {
    const ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      *error = path + ": cannot write temp file: " + std::strerror(errno);
      ::close(fd);
      remove();
      return false;
    }
    p += w;
    left -= static_cast<size_t>(w);
  }
  if (::close(fd) != 0) {
    *error = path + ": cannot close temp file: " + std::strerror(errno);
    remove();
    return false;
  }
  return true;
}

void TempBlobFile::remove() {
  if (!path_.empty()) {
    ::unlink(path_.c_str());
    path_.clear();
  }
}

}  // namespace shimkit
