// CorsPolicy: preflight answers and response headers (vLLM's, i.e.
// Starlette's CORSMiddleware semantics), without sockets.
#include "http/cors.h"

#include <gtest/gtest.h>

#include <map>

namespace pagoda::http {
namespace {

HttpRequest preflight_request(std::string origin, std::string method, std::string headers = "") {
  HttpRequest r;
  r.method = "OPTIONS";
  r.path = "/v1/chat/completions";
  r.headers = {{"origin", std::move(origin)}, {"access-control-request-method", std::move(method)}};
  if (!headers.empty())
    r.headers.emplace_back("access-control-request-headers", std::move(headers));
  return r;
}

std::map<std::string, std::string> as_map(const HeaderList& headers) {
  return {headers.begin(), headers.end()};
}

TEST(CorsPolicy, PreflightNeedsOriginAndRequestedMethod) {
  HttpRequest r = preflight_request("http://a", "POST");
  EXPECT_TRUE(CorsPolicy::is_preflight(r));
  r.headers.pop_back();
  EXPECT_FALSE(CorsPolicy::is_preflight(r));
  r = preflight_request("http://a", "POST");
  r.method = "GET";
  EXPECT_FALSE(CorsPolicy::is_preflight(r));
}

TEST(CorsPolicy, DefaultsAllowEveryOriginMethodAndHeader) {
  const CorsPolicy policy{CorsOptions{}};
  const auto answer =
      policy.preflight(preflight_request("http://a", "PATCH", "X-Custom, Authorization"));
  EXPECT_EQ(answer.refused, "");
  auto headers = as_map(answer.headers);
  EXPECT_EQ(headers["Access-Control-Allow-Origin"], "*");
  EXPECT_EQ(headers["Access-Control-Allow-Methods"],
            "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT");
  EXPECT_EQ(headers["Access-Control-Allow-Headers"], "X-Custom, Authorization");
  EXPECT_EQ(headers["Access-Control-Max-Age"], "600");
  EXPECT_EQ(headers.count("Access-Control-Allow-Credentials"), 0u);
  EXPECT_EQ(as_map(policy.response_headers("http://a"))["Access-Control-Allow-Origin"], "*");
  EXPECT_TRUE(policy.response_headers("").empty());
}

TEST(CorsPolicy, ListedOriginsAreEchoedWithVary) {
  CorsOptions options;
  options.allowed_origins = {"http://a", "http://b"};
  options.allowed_methods = {"GET", "POST"};
  options.allowed_headers = {"Authorization"};
  const CorsPolicy policy{options};
  const auto ok =
      policy.preflight(preflight_request("http://b", "POST", "authorization, Content-Type"));
  EXPECT_EQ(ok.refused, "");
  auto headers = as_map(ok.headers);
  EXPECT_EQ(headers["Access-Control-Allow-Origin"], "http://b");
  EXPECT_EQ(headers["Vary"], "Origin");
  EXPECT_EQ(headers["Access-Control-Allow-Methods"], "GET, POST");
  EXPECT_EQ(headers["Access-Control-Allow-Headers"],
            "accept, accept-language, authorization, content-language, content-type");

  EXPECT_EQ(policy.preflight(preflight_request("http://c", "POST")).refused, "origin");
  EXPECT_EQ(policy.preflight(preflight_request("http://c", "PUT", "X-Other")).refused,
            "origin, method, headers");
  EXPECT_EQ(as_map(policy.response_headers("http://a"))["Access-Control-Allow-Origin"], "http://a");
  EXPECT_TRUE(policy.response_headers("http://c").empty());
}

TEST(CorsPolicy, CredentialsEchoTheOriginEvenWhenAllAreAllowed) {
  CorsOptions options;
  options.allow_credentials = true;
  const CorsPolicy policy{options};
  auto headers = as_map(policy.response_headers("http://a"));
  EXPECT_EQ(headers["Access-Control-Allow-Origin"], "http://a");
  EXPECT_EQ(headers["Access-Control-Allow-Credentials"], "true");
  EXPECT_EQ(headers["Vary"], "Origin");
}

TEST(CorsPolicy, AnEmptyOriginListAllowsNone) {
  CorsOptions options;
  options.allowed_origins = {};
  const CorsPolicy policy{options};
  EXPECT_EQ(policy.preflight(preflight_request("http://a", "GET")).refused, "origin");
  EXPECT_TRUE(policy.response_headers("http://a").empty());
}

}  // namespace
}  // namespace pagoda::http
