#include "pagoda/http_limit_flags.h"

#include <chrono>
#include <string>

namespace pagoda::app {

namespace {

// A whole number of seconds (at least 1) into `target`.
void add_seconds_option(CLI::App& app, const std::string& name, std::chrono::seconds& target,
                        const std::string& description) {
  app.add_option_function<int64_t>(
         name, [&target](int64_t seconds) { target = std::chrono::seconds(seconds); }, description)
      ->check(CLI::PositiveNumber)
      ->default_str(std::to_string(target.count()));
}

}  // namespace

void add_http_limit_flags(CLI::App& app, http::HttpLimits& limits) {
  app.add_option("--max-body-bytes", limits.max_body_bytes,
                 "largest request body; larger ones get 413")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-connections", limits.max_connections,
                 "open connections at most; at the limit the connection idle the longest is "
                 "closed to admit a new one, and when none is idle the new one gets 503; 0: the "
                 "open-file limit minus 256")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-connections-per-peer", limits.max_connections_per_peer,
                 "open connections from one client IP address at most (a reverse proxy is one "
                 "address); at the limit that address's connection idle the longest is closed, "
                 "else 503; 0: 3/4 of --max-connections")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_seconds_option(app, "--header-timeout", limits.header_timeout,
                     "seconds to receive a whole request header, from a new connection or the "
                     "request's first byte; slower clients are disconnected");
  add_seconds_option(app, "--keep-alive-timeout", limits.keep_alive_timeout,
                     "seconds an idle keep-alive connection waits for its next request");
}

}  // namespace pagoda::app
