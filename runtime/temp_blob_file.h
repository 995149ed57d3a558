// A private temp file holding blob bytes: named from the pid and a
// per-process atomic counter, created O_EXCL with mode 0600, removed when the
// object dies (unload and every error path).
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
  ~TempBlobFile() { remove(); }

  // Writes `bytes`; false and *error on failure (nothing left behind).
  bool write(const void* bytes, size_t size, std::string* error);
  const std::string& path() const { return path_; }
  void remove();

 private:
  std::string path_;
};

}  // namespace shimkit

#endif  // SHIMKIT_RUNTIME_TEMP_BLOB_FILE_H_
