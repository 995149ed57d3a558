// A private temp file holding blob bytes for dlopen: created O_EXCL with mode
// 0600 under an unpredictable name ($TMPDIR/shimkit-blob-<random>.so, retried
// on a name clash), and unlinked as soon as the blob is mapped (`unlink_now`
// right after dlopen), so no crash or kill afterwards leaves a file behind.
// The destructor unlinks it on every error path before that.
#ifndef SHIMKIT_RUNTIME_TEMP_BLOB_FILE_H_
#define SHIMKIT_RUNTIME_TEMP_BLOB_FILE_H_

#include <cstddef>
#include <string>

namespace shimkit {

class TempBlobFile {
 public:
  TempBlobFile() = default;
  TempBlobFile(const TempBlobFile&) = delete;
  TempBlobFile& operator=(const TempBlobFile&) = delete;
  ~TempBlobFile() { unlink_now(); }

  // Writes `bytes` to a new file; false and *error on failure (nothing left
  // behind).
  bool write(const void* bytes, size_t size, std::string* error);
  // The file's path while it exists (empty after unlink_now).
  const std::string& path() const { return path_; }
  // Removes the name; a mapping of the file stays valid.
  void unlink_now();

 private:
  std::string path_;
};

}  // namespace shimkit

#endif  // SHIMKIT_RUNTIME_TEMP_BLOB_FILE_H_
