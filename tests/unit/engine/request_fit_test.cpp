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

// With a sliding-window KV group (window 10, steps of up to 8 tokens) the
// sequences' windows must fit that pool too: a sequence of 41 tokens holds
// min(ceil(41 / 8), ceil((9 + 8) / 8) + 1) = 4 sliding blocks.
TEST(RequestFit, SlidingWindowPool) {
  ModelInfo info = small_engine();
  info.num_kv_blocks = 40;
  info.num_sliding_kv_blocks = 10;
  info.sliding_window = 10;
  info.max_num_batched_tokens = 8;
  EXPECT_TRUE(fit_request(info, {.num_prompt_tokens = 1, .max_tokens = 40, .num_seqs = 2}).ok());
  auto three = fit_request(info, {.num_prompt_tokens = 1, .max_tokens = 40, .num_seqs = 3});
  ASSERT_FALSE(three.ok());
  EXPECT_EQ(three.error().limit, RequestLimit::kKvBlocks);
  EXPECT_EQ(three.error().message,
            "3 sequence(s) of up to 41 tokens need 12 sliding-window KV blocks (window 10 behind "
            "steps of up to 8 tokens); the sliding-window pool has 10. Reduce n or best_of, or "
            "raise --num-kv-blocks.");
  // Short sequences keep all their blocks: 3 x ceil(9 / 8) = 6.
  EXPECT_TRUE(fit_request(info, {.num_prompt_tokens = 1, .max_tokens = 8, .num_seqs = 3}).ok());
}

}  // namespace
}  // namespace pagoda
