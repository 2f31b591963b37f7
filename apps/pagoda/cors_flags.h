// The CORS flags of `pagoda serve` (vLLM's names and defaults), shared with
// the test server (tests/unit/openai/fake_server.cpp) so both accept the same.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "http/cors.h"

namespace pagoda::app {

// Registers on `app`, writing into `cors`: --allowed-origins,
// --allowed-methods, --allowed-headers (each a list, see parse_cors_list) and
// --allow-credentials. `cors` must outlive parsing; its current values are the
// defaults shown by --help.
void add_cors_flags(CLI::App& app, http::CorsOptions& cors);

// A list flag's value: a JSON array of strings ('["*"]', as vLLM takes it) or
// a comma-separated list ("GET,POST"); blanks around items are dropped.
// Errors name `flag`.
Result<std::vector<std::string>> parse_cors_list(std::string_view flag, std::string_view text);

}  // namespace pagoda::app
