// engine/request_fit.h: the context, the seats and the KV pool, each refused
// with its one text; max_tokens resolved as requested, else from the default.
#include "engine/request_fit.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

// 100-token context, 4 seats, 20 blocks of 8 tokens.
ModelInfo small_engine() {
  ModelInfo info;
  info.max_model_len = 100;
  info.max_num_seqs = 4;
  info.num_kv_blocks = 20;
  info.block_size = 8;
  return info;
}

TEST(RequestFit, ResolvesMaxTokens) {
  const ModelInfo info = small_engine();
  EXPECT_EQ(fit_request(info, {.num_prompt_tokens = 10, .max_tokens = 5}).value(), 5);
  EXPECT_EQ(fit_request(info, {.num_prompt_tokens = 10, .default_max_tokens = 16}).value(), 16);
  EXPECT_EQ(fit_request(info, {.num_prompt_tokens = 95, .default_max_tokens = 16}).value(), 5);
  EXPECT_EQ(fit_request(info, {.num_prompt_tokens = 95}).value(), 5);
}

TEST(RequestFit, ContextNamesThePrompt) {
  const ModelInfo info = small_engine();
  auto full = fit_request(info, {.num_prompt_tokens = 100, .prompt_name = "messages"});
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().limit, RequestLimit::kContextLength);
  EXPECT_EQ(full.error().message,
            "This model's maximum context length is 100 tokens. However, you requested 100 tokens "
            "(100 in the messages, 0 in the completion). Please reduce the length of the messages "
            "or completion.");
  // fit_context looks at the context alone.
  EXPECT_EQ(fit_context(info, {.num_prompt_tokens = 10, .num_seqs = 99}).value(), 90);
}

TEST(RequestFit, SeatsAndKvPool) {
  const ModelInfo info = small_engine();
  auto wide = fit_request(info, {.num_prompt_tokens = 4, .max_tokens = 4, .num_seqs = 5});
  ASSERT_FALSE(wide.ok());
  EXPECT_EQ(wide.error().limit, RequestLimit::kNumSeqs);
  EXPECT_EQ(wide.error().message, "n/best_of/beam width 5 exceeds --max-num-seqs 4");
  // 4 x ceil(41 / 8) = 24 blocks > 20; 4 x ceil(40 / 8) = 20 fit.
  auto big = fit_request(info, {.num_prompt_tokens = 1, .max_tokens = 40, .num_seqs = 4});
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().limit, RequestLimit::kKvBlocks);
  EXPECT_EQ(big.error().message,
            "4 sequence(s) of up to 41 tokens (1 prompt + 40 max_tokens) need 24 KV blocks; the "
            "pool has 20. Reduce max_tokens, n or best_of, or raise --num-kv-blocks.");
  EXPECT_TRUE(fit_request(info, {.num_prompt_tokens = 1, .max_tokens = 39, .num_seqs = 4}).ok());
}

}  // namespace
}  // namespace pagoda
