// The HTTP limit flags of `pagoda serve`, shared with the test server
// (tests/unit/openai/fake_server.cpp) so both accept the same ones.
#pragma once

#include <CLI/CLI.hpp>

#include "http/http_session.h"

namespace pagoda::app {

// Registers on `app`, writing into `limits`: --max-body-bytes,
// --max-connections, --max-connections-per-peer, --header-timeout,
// --keep-alive-timeout. `limits` must outlive parsing; its current values are
// the defaults shown by --help.
void add_http_limit_flags(CLI::App& app, http::HttpLimits& limits);

}  // namespace pagoda::app
