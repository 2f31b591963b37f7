// NCCL, loaded at run time: pagoda does not link libnccl (a ~200 MB library
// that GPU machines often carry only inside Python's nvidia-nccl-cu12/13
// wheels), so a build without it runs everywhere and asks for NCCL only when
// a multi-GPU group is created.
//
// The library loaded is $PAGODA_NCCL_LIBRARY when set (a path or a name for
// dlopen), else libnccl.so.2 found on the loader path (LD_LIBRARY_PATH,
// ldconfig). The toolkit's nccl.h gives the types and prototypes only.
#pragma once

#include <nccl.h>

#include <string>

#include "core/result.h"

namespace pagoda::cuda {

// The entry points pagoda uses, resolved with dlsym.
struct NcclLibrary {
  std::string path;     // what was passed to dlopen
  int version = 0;      // ncclGetVersion's code, e.g. 22809
  std::string version_name;  // "2.28.9"

  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclCommInitAll) comm_init_all = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;

  // "ncclUnhandledCudaError: unhandled cuda error ..." for a result code.
  std::string error_string(ncclResult_t r) const;
};

// dlopen(path) and the symbols above; the handle is never closed. The error
// says what to install or set when the library is missing or lacks a symbol.
Result<NcclLibrary> open_nccl_library(const std::string& path);

// Loads NCCL ($PAGODA_NCCL_LIBRARY, else libnccl.so.2) once per process
// (later calls return the same library, or the same error) and logs its path
// and version.
Result<const NcclLibrary*> load_nccl();

}  // namespace pagoda::cuda
