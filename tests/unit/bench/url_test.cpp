#include <gtest/gtest.h>

#include "bench/http_client.h"

namespace pagoda::bench {
namespace {

TEST(BaseUrl, Parses) {
  auto u = parse_base_url("http://127.0.0.1:8000");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "8000");
  EXPECT_EQ(u->target("/v1/completions"), "/v1/completions");
  auto p = parse_base_url("http://example.com/proxy/");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->port, "80");
  EXPECT_EQ(p->target("/v1/models"), "/proxy/v1/models");
  auto v6 = parse_base_url("http://[::1]:9000");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, "9000");
}

TEST(BaseUrl, Rejects) {
  EXPECT_EQ(parse_base_url("https://x").error().code, ErrorCode::kUnsupported);
  EXPECT_FALSE(parse_base_url("ftp://x").ok());
  EXPECT_FALSE(parse_base_url("http://:80").ok());
  EXPECT_FALSE(parse_base_url("http://host:8x").ok());
  EXPECT_NE(parse_base_url("localhost:8000").error().message.find("localhost:8000"),
            std::string::npos);
}

TEST(HttpFetch, ConnectionRefusedIsAnError) {
  // Port 1 on loopback: nothing listens there.
  auto r = http_fetch(*parse_base_url("http://127.0.0.1:1"), "GET", "/v1/models", "", "", 5.0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kIo);
  EXPECT_NE(r.error().message.find("127.0.0.1:1"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::bench
