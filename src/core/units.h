// Byte counts for people: GiB as the logs print them.
#pragma once

#include <cstdint>

namespace pagoda {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// `bytes` in GiB (binary), for log lines.
constexpr double to_gib(double bytes) { return bytes / kGiB; }

}  // namespace pagoda
