#include "runtime/temp_blob_file.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U  // Linux 6.3+; older kernels refuse it (EINVAL) and we retry without
#endif

namespace shimkit {
namespace {

// A name clash (EEXIST) is retried with fresh random bits this many times: a
// local user can occupy some names in a shared /tmp, never all of them.
constexpr int kCreateAttempts = 64;
// Memory files get descriptor numbers from a counter that wraps here (the usual
// soft limit on open files; the kernel's table grows with the highest number).
constexpr int kHighestNumber = 1023;
std::atomic<int> next_free_number{0};

int next_number() {
  const int next = next_free_number.load(std::memory_order_relaxed);
  return next > kHighestNumber ? 0 : next;
}

void note_number_used(int number) {
  const int next = number >= kHighestNumber ? 0 : number + 1;
  next_free_number.store(next, std::memory_order_relaxed);
}

std::string temp_dir() {
  const char* dir = std::getenv("TMPDIR");
  return (dir != nullptr && dir[0] != '\0') ? std::string(dir) : std::string("/tmp");
}

bool memory_file_wanted() {
  const char* value = std::getenv("SHIMKIT_BLOB_MEMFD");
  return value == nullptr || std::strcmp(value, "0") != 0;
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

// Copies `left` bytes from the start of `from` to `fd` in the kernel
// (sendfile), or through a small buffer where sendfile cannot: never a copy
// of the whole file in this process. errno ENODATA when `from` ends early.
bool copy_all(int fd, int from, size_t left) {
  off_t offset = 0;
  while (left > 0) {
    const ssize_t w = sendfile(fd, from, &offset, left);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EINVAL || errno == ENOSYS) && offset == 0) break;
    if (w < 0) return false;
    if (w == 0) {
      errno = ENODATA;  // shorter than it was
      return false;
    }
    left -= static_cast<size_t>(w);
  }
  std::vector<char> buffer(left > 0 ? size_t{1} << 20 : 0);
  while (left > 0) {
    const ssize_t r = ::pread(from, buffer.data(), std::min(buffer.size(), left), offset);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = ENODATA;
      return false;
    }
    if (!write_all(fd, buffer.data(), static_cast<size_t>(r))) return false;
    offset += r;
    left -= static_cast<size_t>(r);
  }
  return true;
}

// True if this process may map the file executable (a security policy can
// refuse it for memory files; dlopen would then fail on the blob's code).
bool executable_mapping_allowed(int fd) {
  const long page = sysconf(_SC_PAGESIZE);
  void* probe = mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
  if (probe == MAP_FAILED) return false;
  munmap(probe, static_cast<size_t>(page));
  return true;
}

}  // namespace

bool TempBlobFile::write(const void* bytes, size_t size, std::string* error) {
  return fill({bytes, -1, size}, error);
}

bool TempBlobFile::copy(int from, size_t size, std::string* error) {
  return fill({nullptr, from, size}, error);
}

bool TempBlobFile::fill(const Source& source, std::string* error) {
  release();
  if (memory_file_wanted() && write_memory_file(source)) return true;
  return write_temp_file(source, error);
}

bool TempBlobFile::give_back(size_t offset, size_t length) const {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t start = (offset + page - 1) / page * page, end = (offset + length) / page * page;
  if (fd_ < 0 || end <= start) return fd_ >= 0;
  return fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(start),
                   static_cast<off_t>(end - start)) == 0;
}

void TempBlobFile::drop_name() {
  if (!unlink_path_.empty()) {
    ::unlink(unlink_path_.c_str());
    unlink_path_.clear();
  }
}

bool TempBlobFile::write_memory_file(const Source& source) {
  int fd = memfd_create("shimkit-blob", MFD_CLOEXEC | MFD_EXEC);
  if (fd < 0 && (errno == EINVAL || errno == EACCES))
    fd = memfd_create("shimkit-blob", MFD_CLOEXEC);
  if (fd < 0) return false;
  fds_.push_back(fd);
  fd_ = fd;
  const bool filled = source.bytes != nullptr
                          ? write_all(fd, static_cast<const char*>(source.bytes), source.size)
                          : copy_all(fd, source.from, source.size);
  if (!filled || !executable_mapping_allowed(fd)) {
    release();
    return false;
  }
  // dlopen takes the file by the name /proc/self/fd/<n>, and glibc looks a name
  // up among the objects already loaded before it opens anything: a blob glibc
  // could not unload (one whose thread_local destructors are pending, as
  // AOTInductor blobs' are in every thread that used them) keeps its name, and
  // reusing its number would hand back that blob. So the numbers given to
  // memory files keep growing (up to kHighestNumber, then around again); a name
  // still taken after all (a wrap, or someone else's) means the temp file.
  int number = fcntl(fd, F_DUPFD_CLOEXEC, next_number());
  if (number < 0 && errno == EINVAL) number = fcntl(fd, F_DUPFD_CLOEXEC, 0);  // past the limit
  if (number < 0) {
    release();
    return false;
  }
  fds_.push_back(number);
  note_number_used(number);
  const std::string path = "/proc/self/fd/" + std::to_string(number);
  if (::access(path.c_str(), R_OK) != 0) {  // no /proc
    release();
    return false;
  }
  void* earlier = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (earlier != nullptr) {
    dlclose(earlier);
    release();
    return false;
  }
  dlerror();  // a refusal here is dlopen's to report, with the real mode
  path_ = path;
  return true;
}

bool TempBlobFile::write_temp_file(const Source& source, std::string* error) {
  const std::string dir = temp_dir();
  int fd = -1;
  std::string path;
  for (int attempt = 0; attempt < kCreateAttempts && fd < 0; ++attempt) {
    std::string suffix;
    if (!random_suffix(&suffix, error)) return false;
    path = dir + "/shimkit-blob-" + suffix + ".so";
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
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
  unlink_path_ = path;
  fds_.push_back(fd);
  fd_ = fd;
  const bool filled = source.bytes != nullptr
                          ? write_all(fd, static_cast<const char*>(source.bytes), source.size)
                          : copy_all(fd, source.from, source.size);
  if (!filled) {
    *error = source.bytes == nullptr && errno == ENODATA
                 ? std::string("it changed while being read (shorter than when opened)")
                 : path + ": cannot write the blob's temp file: " + std::strerror(errno);
    release();
    return false;
  }
  return true;
}

void TempBlobFile::release() {
  if (!unlink_path_.empty()) {
    ::unlink(unlink_path_.c_str());
    unlink_path_.clear();
  }
  for (const int fd : fds_) ::close(fd);
  fds_.clear();
  fd_ = -1;
  path_.clear();
}

}  // namespace shimkit
