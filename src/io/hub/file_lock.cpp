#include "io/hub/file_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pagoda {

Result<FileLock> FileLock::acquire(const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0664);
  if (fd < 0) {
    return make_error(ErrorCode::kIo, fmt::format("cannot open lock file {}: {}", path.string(),
                                                  std::strerror(errno)));
  }
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd);
    return make_error(ErrorCode::kIo,
                      fmt::format("cannot lock {}: {}", path.string(), std::strerror(err)));
  }
  return FileLock(fd);
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace pagoda
