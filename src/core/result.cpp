#include "core/result.h"

namespace pagoda {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kCorrupt: return "corrupt";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kResourceExhausted: return "resource_exhausted";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

}  // namespace pagoda
