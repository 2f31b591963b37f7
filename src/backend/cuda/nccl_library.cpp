#include "backend/cuda/nccl_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>
#include <mutex>

#include "core/log.h"

namespace pagoda::cuda {
namespace {

constexpr const char* kDefaultLibrary = "libnccl.so.2";
constexpr const char* kHowToGet =
    "install NCCL (e.g. `pip install nvidia-nccl-cu13` or nvidia-nccl-cu12 to match the CUDA "
    "driver) and put its lib folder (site-packages/nvidia/nccl/lib) on LD_LIBRARY_PATH, or set "
    "PAGODA_NCCL_LIBRARY to the full path of libnccl.so.2";

template <typename F>
bool resolve(void* handle, const char* symbol, F& fn, std::string& missing) {
  fn = reinterpret_cast<F>(dlsym(handle, symbol));
  if (fn == nullptr && missing.empty()) missing = symbol;
  return fn != nullptr;
}

}  // namespace

Result<NcclLibrary> open_nccl_library(const std::string& path) {
  NcclLibrary lib;
  lib.path = path;
  // RTLD_LOCAL: NCCL's symbols stay out of the global namespace. The handle is
  // never closed (NCCL keeps threads and CUDA state for the process' life).
  void* handle = dlopen(lib.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return make_error(ErrorCode::kNotFound,
                      fmt::format("cannot load NCCL from {} ({}): {}", lib.path,
                                  why != nullptr ? why : "dlopen failed", kHowToGet));
  }
  std::string missing;
  resolve(handle, "ncclGetVersion", lib.get_version, missing);
  resolve(handle, "ncclGetErrorString", lib.get_error_string, missing);
  resolve(handle, "ncclCommInitAll", lib.comm_init_all, missing);
  resolve(handle, "ncclCommDestroy", lib.comm_destroy, missing);
  resolve(handle, "ncclCommAbort", lib.comm_abort, missing);
  resolve(handle, "ncclCommGetAsyncError", lib.comm_get_async_error, missing);
  resolve(handle, "ncclAllReduce", lib.all_reduce, missing);
  resolve(handle, "ncclSend", lib.send, missing);
  resolve(handle, "ncclRecv", lib.recv, missing);
  if (!missing.empty()) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{} lacks {} (NCCL 2.7 or newer is needed): {}", lib.path,
                                  missing, kHowToGet));
  }
  const ncclResult_t r = lib.get_version(&lib.version);
  if (r != ncclSuccess) {
    return make_error(ErrorCode::kInternal,
                      fmt::format("ncclGetVersion: {}", lib.error_string(r)));
  }
  // Codes are MAJOR*10000 + MINOR*100 + PATCH since 2.9 (MAJOR*1000 +
  // MINOR*100 + PATCH before).
  const int v = lib.version;
  lib.version_name = v >= 20900 ? fmt::format("{}.{}.{}", v / 10000, v % 10000 / 100, v % 100)
                                : fmt::format("{}.{}.{}", v / 1000, v % 1000 / 100, v % 100);
  return lib;
}

std::string NcclLibrary::error_string(ncclResult_t r) const {
  const char* s = get_error_string != nullptr ? get_error_string(r) : nullptr;
  return fmt::format("{} (ncclResult {})", s != nullptr ? s : "unknown error", static_cast<int>(r));
}

Result<const NcclLibrary*> load_nccl() {
  static std::once_flag once;
  static Result<NcclLibrary>* loaded = nullptr;  // never freed: lives as long as the handle
  std::call_once(once, [] {
    const char* env = std::getenv("PAGODA_NCCL_LIBRARY");
    loaded = new Result<NcclLibrary>(open_nccl_library(env != nullptr && env[0] != '\0' ? env : kDefaultLibrary));
    if (loaded->ok()) log_info("nccl: {} from {}", (*loaded)->version_name, (*loaded)->path);
  });
  if (!loaded->ok()) return loaded->error();
  return &loaded->value();
}

}  // namespace pagoda::cuda
