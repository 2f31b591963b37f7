// Byte sizes as people type them on the command line.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/result.h"

namespace pagoda {

// "1073741824", "4GiB", "1.5G", "512M", "2g": a non-negative number, optionally
// with a fraction, then an optional unit. Binary (x 1024^n): K, M, G, T, KiB,
// MiB, GiB, TiB. Decimal (x 1000^n): k, m, g, t, KB, MB, GB, TB -- the
// lower-case single letters as vLLM's human-readable integers read them.
// The result is rounded down to whole bytes. Errors name the text.
Result<int64_t> parse_byte_size(std::string_view text);

}  // namespace pagoda
