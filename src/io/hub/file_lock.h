// An exclusive advisory lock on a file (flock), held for the object's life.
// huggingface_hub's filelock takes the same kind of lock on the same path
// (<cache>/.locks/models--org--name/<etag>.lock), so a pagoda download and a
// Python one never write the same blob at once.
#pragma once

#include <filesystem>

#include "core/result.h"

namespace pagoda {

class FileLock {
 public:
  // Creates the file (and its folder) when absent; blocks until the lock is
  // free.
  static Result<FileLock> acquire(const std::filesystem::path& path);

  FileLock(FileLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace pagoda
