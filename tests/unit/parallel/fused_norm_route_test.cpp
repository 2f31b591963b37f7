#include "backend/fused_norm_route.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace pagoda {
namespace {

TEST(FusedNormRoute, RowsUpToTheThresholdTakeTheFusedKernel) {
  EXPECT_TRUE(takes_fused_norm(1, kDefaultFusedNormMaxRows));
  EXPECT_TRUE(takes_fused_norm(kDefaultFusedNormMaxRows, kDefaultFusedNormMaxRows));
  EXPECT_FALSE(takes_fused_norm(kDefaultFusedNormMaxRows + 1, kDefaultFusedNormMaxRows));
  EXPECT_FALSE(takes_fused_norm(1, 0));  // 0: never fused
  EXPECT_TRUE(takes_fused_norm(512, kMaxFusedNormRows));
}

TEST(FusedNormRoute, OptionThenEnvironmentThenDefault) {
  unsetenv(kFusedNormMaxRowsEnv);
  EXPECT_EQ(*resolve_fused_norm_max_rows(-1), kDefaultFusedNormMaxRows);
  setenv(kFusedNormMaxRowsEnv, "", 1);
  EXPECT_EQ(*resolve_fused_norm_max_rows(-1), kDefaultFusedNormMaxRows);
  setenv(kFusedNormMaxRowsEnv, "24", 1);
  EXPECT_EQ(*resolve_fused_norm_max_rows(-1), 24);
  setenv(kFusedNormMaxRowsEnv, "0", 1);
  EXPECT_EQ(*resolve_fused_norm_max_rows(-1), 0);
  EXPECT_EQ(*resolve_fused_norm_max_rows(7), 7);  // an explicit option wins over the environment
  EXPECT_EQ(*resolve_fused_norm_max_rows(kMaxFusedNormRows), kMaxFusedNormRows);
  unsetenv(kFusedNormMaxRowsEnv);
}

TEST(FusedNormRoute, BadValuesNameTheVariable) {
  for (const char* bad : {"lots", "-1", "16x", " 16", "2000000000"}) {
    setenv(kFusedNormMaxRowsEnv, bad, 1);
    auto r = resolve_fused_norm_max_rows(-1);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find(std::string(kFusedNormMaxRowsEnv) + "=" + bad),
              std::string::npos)
        << r.error().message;
  }
  unsetenv(kFusedNormMaxRowsEnv);
  EXPECT_FALSE(resolve_fused_norm_max_rows(kMaxFusedNormRows + 1).ok());
}

}  // namespace
}  // namespace pagoda
