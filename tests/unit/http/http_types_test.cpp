// The transport's request helpers.
#include "http/http_types.h"

#include <gtest/gtest.h>

namespace pagoda::http {
namespace {

TEST(PercentDecode, Escapes) {
  EXPECT_EQ(percent_decode("org%2Fmodel%20x"), "org/model x");
  EXPECT_EQ(percent_decode("100%"), "100%");
  EXPECT_EQ(percent_decode("%zz"), "%zz");
}

}  // namespace
}  // namespace pagoda::http
