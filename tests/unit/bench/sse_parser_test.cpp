#include "bench/sse_parser.h"

#include <gtest/gtest.h>

namespace pagoda::bench {
namespace {

const std::string kStream =
    ": ping comment\r\n"
    "data: {\"a\":1}\r\n\r\n"
    "event: message\n"
    "id: 7\n"
    "data: line one\n"
    "data:line two\n\n"
    "data: [DONE]\r\r";

const std::vector<std::string> kEvents = {"{\"a\":1}", "line one\nline two", "[DONE]"};

TEST(SseParser, WholeStream) {
  SseParser p;
  EXPECT_EQ(p.feed(kStream), kEvents);
  EXPECT_TRUE(p.finish().empty());
}

TEST(SseParser, EverySplitPointGivesTheSameEvents) {
  for (size_t cut = 0; cut <= kStream.size(); ++cut) {
    SseParser p;
    auto a = p.feed(kStream.substr(0, cut));
    auto b = p.feed(kStream.substr(cut));
    a.insert(a.end(), b.begin(), b.end());
    EXPECT_EQ(a, kEvents) << "split at " << cut;
  }
}

TEST(SseParser, ByteByByte) {
  SseParser p;
  std::vector<std::string> got;
  for (char c : kStream) {
    auto e = p.feed(std::string_view(&c, 1));
    got.insert(got.end(), e.begin(), e.end());
  }
  EXPECT_EQ(got, kEvents);
}

TEST(SseParser, FinishFlushesAnUnterminatedEvent) {
  SseParser p;
  EXPECT_TRUE(p.feed("data: {\"last\":true}").empty());
  EXPECT_EQ(p.finish(), std::vector<std::string>{"{\"last\":true}"});
  SseParser q;
  EXPECT_TRUE(q.feed("data: x\n").empty());
  EXPECT_EQ(q.finish(), std::vector<std::string>{"x"});
}

TEST(SseParser, EmptyDataLineIsAnEvent) {
  SseParser p;
  EXPECT_EQ(p.feed("data\n\n"), std::vector<std::string>{""});
}

}  // namespace
}  // namespace pagoda::bench
