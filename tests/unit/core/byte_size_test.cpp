#include "core/byte_size.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

TEST(ByteSize, ParsesBytesAndUnits) {
  EXPECT_EQ(parse_byte_size("1073741824").value(), int64_t{1} << 30);
  EXPECT_EQ(parse_byte_size("4GiB").value(), int64_t{4} << 30);
  EXPECT_EQ(parse_byte_size("4G").value(), int64_t{4} << 30);
  EXPECT_EQ(parse_byte_size("1.5G").value(), int64_t{3} << 29);
  EXPECT_EQ(parse_byte_size("512MiB").value(), int64_t{512} << 20);
  EXPECT_EQ(parse_byte_size("2g").value(), 2'000'000'000);
  EXPECT_EQ(parse_byte_size("2GB").value(), 2'000'000'000);
  EXPECT_EQ(parse_byte_size("25.6k").value(), 25'600);
  EXPECT_EQ(parse_byte_size("1TiB").value(), int64_t{1} << 40);
  EXPECT_EQ(parse_byte_size("0").value(), 0);
}

TEST(ByteSize, RefusesOtherText) {
  for (const char* text :
       {"", "GiB", "-1", "4 GiB", "4gib", "4X", "1.2.3", "1e3", "99999999999T"}) {
    auto r = parse_byte_size(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.error().message.find("byte size"), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace pagoda
