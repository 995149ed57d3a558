// The blob's bytes in a file that dlopen can map, named so that no crash or kill
// can leave it behind:
// - an anonymous memory file (memfd_create), dlopen'd as /proc/self/fd/<n>:
//   nothing is ever written to disk, so nothing can be left there;
// - where that cannot be used (no memfd_create or /proc, executable mappings of
//   memory files refused, the name /proc/self/fd/<n> still held by a blob glibc
//   could not unload) or with SHIMKIT_BLOB_MEMFD=0: a private temp file,
//   created O_EXCL with mode 0600 under an unpredictable name
//   ($TMPDIR/shimkit-blob-<random>.so, retried on a name clash) and unlinked
//   right after dlopen. A kill during that dlopen (the blob's static
//   initialisers run in it) can leave this one file.
// `release` (after dlopen) and the destructor drop the name; a mapping made by
// dlopen stays valid. Until then `fd()` reads and writes the file: the loader
// gives back the pages a loaded blob no longer needs (`give_back`).
#ifndef SHIMKIT_RUNTIME_TEMP_BLOB_FILE_H_
#define SHIMKIT_RUNTIME_TEMP_BLOB_FILE_H_

#include <cstddef>
#include <string>
#include <vector>

namespace shimkit {

class TempBlobFile {
 public:
  TempBlobFile() = default;
  TempBlobFile(const TempBlobFile&) = delete;
  TempBlobFile& operator=(const TempBlobFile&) = delete;
  ~TempBlobFile() { release(); }

  // Puts `bytes` in a new file; false and *error on failure (nothing left
  // behind).
  bool write(const void* bytes, size_t size, std::string* error);
  // Puts the first `size` bytes of open file `from` in a new file, without a
  // copy in this process's memory (sendfile); false and *error on failure,
  // including a file that has fewer bytes than `size` by now.
  bool copy(int from, size_t size, std::string* error);
  // Descriptor of the file (read-write) until release; -1 if none.
  int fd() const { return fd_; }
  // Frees the file's pages in [offset, offset + length), rounded inwards to
  // whole pages (they read back as zeros); false if the file system cannot.
  bool give_back(size_t offset, size_t length) const;
  // Unlinks a temp file's name now (dlopen has it mapped); fd() stays open.
  void drop_name();
  // The path to dlopen while the file exists (empty after release).
  const std::string& path() const { return path_; }
  // Drops the file's name (unlinks the temp file, closes the memory file).
  void release();

 private:
  // Where the file's bytes come from: `bytes`, else descriptor `from`.
  struct Source {
    const void* bytes;
    int from;
    size_t size;
  };
  bool fill(const Source& source, std::string* error);
  bool write_memory_file(const Source& source);
  bool write_temp_file(const Source& source, std::string* error);

  std::string path_;
  std::string unlink_path_;  // the temp file's name, while it has one
  std::vector<int> fds_;     // the memory file's descriptors; path_ names the last
  int fd_ = -1;              // one of fds_ (the memory file's or the temp file's)
};

}  // namespace shimkit

#endif  // SHIMKIT_RUNTIME_TEMP_BLOB_FILE_H_
