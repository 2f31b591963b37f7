// The open-loop load generator: sends streamed OpenAI requests at scheduled
// arrival times over many concurrent connections on one I/O thread
// (Boost.Beast, one connection per request), and measures each stream as it
// arrives (see metrics.h for the definitions).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/http_client.h"
#include "bench/metrics.h"
#include "core/result.h"

namespace pagoda::bench {

struct StreamTarget {
  HttpUrl url;
  std::string path;           // endpoint, e.g. "/v1/completions"
  std::string api_key;        // empty: no Authorization header
  double timeout_s = 3600.0;  // per request, from sending to the end of the stream
};

struct PlannedRequest {
  std::string body;        // JSON request body
  int64_t prompt_len = 0;  // dataset length (the server's usage replaces it)
  double arrival = 0.0;    // seconds from the benchmark start
};

struct DriveResult {
  std::vector<RequestRecord> records;  // one per planned request, same order
  double duration_s = 0.0;             // benchmark start to the last completion
};

// Called after each request completes with the counts so far.
using ProgressFn = std::function<void(int64_t num_done, int64_t num_failed)>;

// Runs every request: request i is due at its arrival time; while
// max_concurrency (> 0) requests are in flight, due ones wait in FIFO order.
// Failed requests are recorded, not fatal. Errors: the host does not resolve.
Result<DriveResult> drive_requests(const StreamTarget& target,
                                   const std::vector<PlannedRequest>& plan, int64_t max_concurrency,
                                   const ProgressFn& on_progress);

}  // namespace pagoda::bench
