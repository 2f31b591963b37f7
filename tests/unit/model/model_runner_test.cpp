// ModelRunner mechanics on a tiny random model: KV sizing and max_model_len,
// lm_head chunking and sampling-batch slicing, copy-on-write block copies,
// and step validation errors. (Numerical correctness against transformers is
// the golden tests' job.)
#include "model/model_runner.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "memory_source.h"
#include "model_steps.h"
#include "model/step_validation.h"

namespace pagoda {
namespace {

using test::MemorySource;
using test::make_step;
using test::tiny_config;

class RunnerTest : public ::testing::Test {
 protected:
  std::unique_ptr<ModelRunner> make(RunnerOptions o, ModelConfig c = tiny_config()) {
    test::fill_random(c, &src_);
    auto r = ModelRunner::create(be_, c, src_, o);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? std::move(r).value() : nullptr;
  }
  Error create_error(RunnerOptions o, ModelConfig c = tiny_config()) {
    test::fill_random(c, &src_);
    auto r = ModelRunner::create(be_, c, src_, o);
    EXPECT_FALSE(r.ok());
    return r.ok() ? Error{} : r.error();
  }
  CpuBackend be_;
  MemorySource src_;
};

TEST_F(RunnerTest, SizesKvCacheAndMaxModelLen) {
  RunnerOptions o;
  o.block_size = 16;
  o.kv_cache_bytes = 1 << 20;  // block = 2 (k,v) * 2 layers * 16 * 2 heads * 8 * 4 B = 4 KiB
  auto r = make(o);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->num_kv_blocks(), 256);
  EXPECT_EQ(r->max_model_len(), 128);  // the config's max_position_embeddings
  EXPECT_EQ(r->max_blocks_per_seq(), 8);

  o.kv_cache_bytes = 5 * 4096;  // 80 tokens: a derived max_model_len shrinks to fit
  r = make(o);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->num_kv_blocks(), 5);
  EXPECT_EQ(r->max_model_len(), 80);

  o.max_model_len = 100;  // an explicit one that does not fit is an error
  Error e = create_error(o);
  EXPECT_EQ(e.code, ErrorCode::kResourceExhausted);
  EXPECT_NE(e.message.find("max_model_len 100"), std::string::npos) << e.message;

  o = RunnerOptions{};
  o.max_model_len = 129;
  e = create_error(o);
  EXPECT_NE(e.message.find("max_position_embeddings 128"), std::string::npos) << e.message;

  o = RunnerOptions{};
  o.num_kv_blocks = 40;
  o.block_size = 4;
  r = make(o);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->num_kv_blocks(), 40);
  EXPECT_EQ(r->max_model_len(), 128);

  e = create_error(o, tiny_config("gpt_neox"));
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
}

// longrope's factor set follows max_model_len (rope.h), also when the KV
// cache caps a derived one: capped to the original context (16), the runner
// computes what an explicit --max-model-len 16 does, not the long factors.
TEST_F(RunnerTest, LongropeTableFollowsTheCappedMaxModelLen) {
  ModelConfig c = tiny_config("phi3");
  RopeScaling& s = c.rope_scaling;
  s.type = RopeScalingType::kLongrope;
  s.original_max_position_embeddings = 16;
  s.factor = 8;  // 128 / 16
  s.short_factor = {1.0f, 1.5f, 2.0f, 3.0f};
  s.long_factor = {2.0f, 5.0f, 9.0f, 17.0f};
  auto logits_of = [&](int64_t max_model_len, int64_t num_blocks) {
    RunnerOptions o;
    o.block_size = 4;
    o.num_kv_blocks = num_blocks;
    o.max_model_len = max_model_len;
    auto r = make(o, c);
    std::vector<float> logits;
    if (r == nullptr) return logits;
    EXPECT_EQ(r->max_model_len(), max_model_len > 0 ? max_model_len : 16);
    const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
    EXPECT_TRUE(r->execute_logits(make_step({{prompt, 0, {0, 1, 2}}}, 4, 3), &logits).ok());
    return logits;
  };
  const std::vector<float> capped = logits_of(0, 4);  // 128 capped to 4 blocks of 4
  const std::vector<float> short_set = logits_of(16, 4), long_set = logits_of(20, 5);
  ASSERT_EQ(capped.size(), 97u);
  EXPECT_EQ(capped, short_set);
  EXPECT_NE(capped, long_set);
}

// Gemma 3's tiny shape (layer 0 sliding with window 3, layer 1 full), blocks
// of 4 tokens (512 bytes per layer), steps of up to 8 tokens over 4
// sequences: one decoding sequence of 128 tokens holds 32 full blocks and 2
// sliding ones, and a step adds at most 8 / 4 + 4 = 6 sliding blocks.
RunnerOptions sliding_options() {
  RunnerOptions o;
  o.block_size = 4;
  o.max_num_batched_tokens = 8;
  o.max_num_seqs = 4;
  o.sliding_kv_group = true;
  return o;
}

TEST_F(RunnerTest, SlidingWindowGroupSplitsThePool) {
  RunnerOptions o = sliding_options();
  o.kv_cache_bytes = (2 * (32 + 2) + 6) * 512;  // two sequences of 128 tokens and a step
  auto r = make(o, tiny_config("gemma3"));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->kv_block_bytes(), 512);
  EXPECT_EQ(r->sliding_kv_block_bytes(), 512);
  EXPECT_EQ(r->num_kv_blocks(), 64);
  EXPECT_EQ(r->num_sliding_kv_blocks(), 10);
  EXPECT_EQ(r->max_model_len(), 128);
  // The same bytes with every layer keeping its whole context: 37 blocks.
  o.sliding_kv_group = false;
  r = make(o, tiny_config("gemma3"));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->kv_block_bytes(), 1024);
  EXPECT_EQ(r->num_kv_blocks(), 37);
  EXPECT_EQ(r->num_sliding_kv_blocks(), 0);
  // --num-kv-blocks sets the full pool; the sliding pool holds as many
  // sequences and a step: ceil(40 x 2 / 32) + 6.
  o = sliding_options();
  o.num_kv_blocks = 40;
  r = make(o, tiny_config("gemma3"));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->num_kv_blocks(), 40);
  EXPECT_EQ(r->num_sliding_kv_blocks(), 9);
  // A model without sliding layers keeps one pool, sized as before.
  o = sliding_options();
  o.block_size = 16;
  o.kv_cache_bytes = 1 << 20;
  r = make(o);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->num_kv_blocks(), 256);
  EXPECT_EQ(r->num_sliding_kv_blocks(), 0);
  EXPECT_EQ(r->sliding_kv_block_bytes(), 0);
}

// Rows [start, start + n) of one sequence of `tokens` with the full table
// 0, 1, 2, ...; with `sliding`, the sliding group's table cycles through 4
// blocks (block b of the sequence in sliding block 3 - b % 4, reused as the
// window moves on, as the KV manager reuses released blocks) and leaves -1
// before the window of the chunk's first query.
StepBatch windowed_chunk(const std::vector<int32_t>& tokens, int32_t start, int32_t n,
                         bool sliding) {
  constexpr int32_t kBs = 4, kWidth = 32, kWindow = 3;
  std::vector<int32_t> table(kWidth);
  for (int32_t b = 0; b < kWidth; ++b) table[static_cast<size_t>(b)] = b;
  StepBatch s = make_step(
      {{std::vector<int32_t>(tokens.begin() + start, tokens.begin() + start + n), start, table}},
      kBs, kWidth);
  s.logits_rows.clear();
  s.sampling.rows.clear();
  for (int32_t j = 0; j < n; ++j) s.logits_rows.push_back(j);
  if (!sliding) return s;
  const int32_t first_block = std::max(0, start - kWindow + 1) / kBs;
  for (int32_t b = 0; b < kWidth; ++b)
    s.sliding_block_tables.push_back(b < first_block ? -1 : 3 - b % 4);
  for (int32_t p = start; p < start + n; ++p)
    s.sliding_slot_mapping.push_back(s.sliding_block_tables[static_cast<size_t>(p / kBs)] * kBs +
                                     p % kBs);
  return s;
}

TEST_F(RunnerTest, SlidingWindowGroupComputesWhatTheFullCacheDoes) {
  RunnerOptions o = sliding_options();
  o.num_kv_blocks = 32;
  auto windowed = make(o, tiny_config("gemma3"));
  o.sliding_kv_group = false;
  auto full = make(o, tiny_config("gemma3"));
  ASSERT_NE(windowed, nullptr);
  ASSERT_NE(full, nullptr);
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 40; ++i) tokens.push_back((i * 37 + 11) % 97);
  // Chunks of 8 and 5 tokens, then decodes: released entries and reused
  // blocks at every step.
  int32_t start = 0;
  for (const int32_t n : {8, 5, 8, 1, 1, 1, 7, 1, 1}) {
    std::vector<float> a, b;
    ASSERT_TRUE(windowed->execute_logits(windowed_chunk(tokens, start, n, true), &a).ok());
    ASSERT_TRUE(full->execute_logits(windowed_chunk(tokens, start, n, false), &b).ok());
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_NEAR(a[i], b[i], 1e-5) << "chunk at " << start << ", logit " << i;
    start += n;
  }
  // The group's tables are required, and refused without the group.
  std::vector<float> logits;
  Status st = windowed->execute_logits(windowed_chunk(tokens, start, 1, false), &logits);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("sliding_block_tables has 0 entries"), std::string::npos)
      << st.error().message;
  st = full->execute_logits(windowed_chunk(tokens, start, 1, true), &logits);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("keeps no such group"), std::string::npos)
      << st.error().message;
}

TEST_F(RunnerTest, LogitsChunksAndSamplingSlicesMatchOneShot) {
  RunnerOptions o;
  o.block_size = 4;
  o.num_kv_blocks = 32;
  o.max_num_seqs = 3;  // lm_head runs in chunks of 3 rows
  auto r = make(o);
  ASSERT_NE(r, nullptr);
  StepBatch in = make_step({{{5, 6, 7, 8, 9}, 0, {0, 1}}, {{10, 11, 12}, 0, {2}}}, 4, 2);
  in.logits_rows = {0, 1, 2, 3, 4, 5, 6, 4, 4};  // R = 9 > 3, with repeats
  std::vector<float> logits;
  ASSERT_TRUE(r->execute_logits(in, &logits).ok());
  const int64_t v = 97;
  ASSERT_EQ(logits.size(), 9u * v);
  EXPECT_EQ(0, std::memcmp(&logits[4 * v], &logits[7 * v], v * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(&logits[4 * v], &logits[8 * v], v * sizeof(float)));

  // Seeded sampling with penalties and biases spread over the chunks equals
  // the backend's sampler on the one-shot logits.
  SamplingBatch& b = in.sampling;
  b.rows.assign(9, SamplingRow{});
  b.max_top_logprobs = 3;
  b.penalty_offsets = {0};
  b.bias_offsets = {0};
  for (int i = 0; i < 9; ++i) {
    b.rows[i].seed = 100 + i;
    b.rows[i].temperature = i % 3 == 0 ? 0.0f : 0.8f;
    b.rows[i].num_top_logprobs = i % 4;
    b.rows[i].target_token = i;
    b.rows[i].repetition_penalty = 1.3f;
    for (int k = 0; k < i % 3; ++k) {
      b.penalty_tokens.push_back(i * 7 + k);
      b.penalty_output_counts.push_back(k + 1);
      b.penalty_in_prompt.push_back(1);
    }
    b.penalty_offsets.push_back(static_cast<int32_t>(b.penalty_tokens.size()));
    if (i % 2) {
      b.bias_tokens.push_back(i * 3);
      b.bias_values.push_back(-2.0f);
    }
    b.bias_offsets.push_back(static_cast<int32_t>(b.bias_tokens.size()));
  }
  // Allowed-token masks: three masks of 12 tokens, used by rows across
  // chunk boundaries and shared between chunks; rows 1, 5 and 8 (one per
  // chunk) unmasked.
  b.mask_words = (v + 31) / 32;
  for (int m = 0; m < 3; ++m) {
    std::vector<uint32_t> words(static_cast<size_t>(b.mask_words), 0u);
    for (int k = 0; k < 12; ++k) {
      const int t = (m * 31 + k * 7 + 3) % v;
      words[static_cast<size_t>(t / 32)] |= 1u << (t % 32);
    }
    b.allowed_words.insert(b.allowed_words.end(), words.begin(), words.end());
  }
  b.mask_index = {2, -1, 0, 1, 0, -1, 2, 1, -1};
  SampleOutput unmasked;
  {
    SamplingBatch plain = b;
    plain.mask_index.clear();
    plain.allowed_words.clear();
    plain.mask_words = 0;
    be_.sample(Tensor(logits.data(), DType::kF32, {9, v}), plain, unmasked);
  }
  SampleOutput got, want;
  ASSERT_TRUE(r->execute(in, &got).ok());
  be_.sample(Tensor(logits.data(), DType::kF32, {9, v}), b, want);
  EXPECT_EQ(got.token_ids, want.token_ids);
  EXPECT_EQ(got.logprobs, want.logprobs);
  EXPECT_EQ(got.ranks, want.ranks);
  EXPECT_EQ(got.top_ids, want.top_ids);
  EXPECT_EQ(got.target_ranks, want.target_ranks);
  EXPECT_EQ(got.target_logprobs, want.target_logprobs);
  int changed = 0;  // the masks matter: a wrong mask in a slice would show
  for (int i = 0; i < 9; ++i) changed += got.token_ids[i] != unmasked.token_ids[i];
  EXPECT_GE(changed, 4);
}

TEST_F(RunnerTest, CopyOnWriteBlockCopyIsAppliedBeforeTheForward) {
  RunnerOptions o;
  o.block_size = 4;
  o.num_kv_blocks = 16;
  auto r = make(o);
  ASSERT_NE(r, nullptr);
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5,
                                       9, 2, 6, 5, 3};  // fills blocks 0, 1 and half of 2
  SampleOutput out;
  ASSERT_TRUE(r->execute(make_step({{prompt, 0, {0, 1, 2}}}, 4, 3), &out).ok());
  // A fork appends into its own copy of the shared partial block 2 (as 7);
  // the original appends the same token into block 2: identical logits.
  StepBatch in = make_step({{{42}, 10, {0, 1, 2}}, {{42}, 10, {0, 1, 7}}}, 4, 3);
  in.copy_src = {2};
  in.copy_dst = {7};
  std::vector<float> logits;
  ASSERT_TRUE(r->execute_logits(in, &logits).ok());
  EXPECT_EQ(0, std::memcmp(logits.data(), logits.data() + 97, 97 * sizeof(float)));
  // Without the copy, block 8 holds no prefix: the logits differ.
  StepBatch no_copy = make_step({{{42}, 10, {0, 1, 2}}, {{42}, 10, {0, 1, 8}}}, 4, 3);
  ASSERT_TRUE(r->execute_logits(no_copy, &logits).ok());
  EXPECT_NE(0, std::memcmp(logits.data(), logits.data() + 97, 97 * sizeof(float)));
}

// Async scheduling: step B is launched before step A is collected, its
// decode tokens taken on the device from A's samples; both equal the
// sequential run where B's tokens come from the host.
TEST_F(RunnerTest, PipelinedStepTakesPendingTokensFromThePreviousSamples) {
  RunnerOptions o;
  o.block_size = 4;
  o.num_kv_blocks = 16;
  auto r = make(o);
  ASSERT_NE(r, nullptr);
  auto prefill = [](int32_t b0, int32_t b1) {
    StepBatch in = make_step({{{5, 6, 7}, 0, {b0}}, {{10, 11}, 0, {b1}}}, 4, 1);
    for (int i = 0; i < 2; ++i) in.sampling.rows[i].seed = 7 + i;
    return in;
  };
  auto decode = [](int32_t t0, int32_t t1, int32_t b0, int32_t b1) {
    StepBatch in = make_step({{{t0}, 3, {b0}}, {{t1}, 2, {b1}}}, 4, 1);
    for (int i = 0; i < 2; ++i) in.sampling.rows[i] = {.seed = 9 + static_cast<uint64_t>(i), .step = 1};
    return in;
  };
  SampleOutput a, b;
  ASSERT_TRUE(r->execute(prefill(0, 1), &a).ok());
  ASSERT_TRUE(r->execute(decode(a.token_ids[0], a.token_ids[1], 0, 1), &b).ok());

  StepBatch next = decode(-1, -1, 2, 3);  // placeholders (the scheduler's kPendingToken)
  next.pending_rows = {0, 1};
  next.pending_sources = {0, 1};
  ASSERT_TRUE(r->launch(prefill(2, 3), 0).ok());
  ASSERT_TRUE(r->launch(next, 1).ok());
  SampleOutput pa, pb;
  ASSERT_TRUE(r->collect(0, &pa).ok());
  ASSERT_TRUE(r->collect(1, &pb).ok());
  EXPECT_EQ(pa.token_ids, a.token_ids);
  EXPECT_EQ(pa.logprobs, a.logprobs);
  EXPECT_EQ(pb.token_ids, b.token_ids);
  EXPECT_EQ(pb.logprobs, b.logprobs);

  // Misuse is an error, not a wrong step.
  SampleOutput out;
  EXPECT_FALSE(r->collect(0, &out).ok());  // nothing launched there
  next.pending_sources = {0, 2};           // the step before sampled 2 rows
  Status st = r->launch(next, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("pending_sources[1] = 2 not in [0, 2)"), std::string::npos)
      << st.error().message;
  ASSERT_TRUE(r->launch(prefill(4, 5), 0).ok());
  EXPECT_FALSE(r->launch(prefill(6, 7), 0).ok());  // slot 0 is not collected yet
  ASSERT_TRUE(r->collect(0, &out).ok());
}

// A step of more rows than one lm_head chunk (max_num_seqs) keeps each
// chunk's samples for the next step's pending tokens: those of its last
// chunk on the device, those of the earlier chunks (waited for at launch)
// from the host. Sources in every chunk, in either order, give the tokens
// of the sequential run, where the host fills them in.
TEST_F(RunnerTest, PendingTokensComeFromEveryLmHeadChunk) {
  RunnerOptions o;
  o.block_size = 4;
  o.num_kv_blocks = 16;
  o.max_num_seqs = 2;  // lm_head chunks of 2 rows: A's 5 rows sample in 3
  auto r = make(o);
  ASSERT_NE(r, nullptr);
  auto prefill = [](int32_t b0, int32_t b1) {
    StepBatch in = make_step({{{5, 6, 7}, 0, {b0}}, {{10, 11}, 0, {b1}}}, 4, 1);
    in.logits_rows = {0, 1, 2, 3, 4};
    in.sampling.rows.assign(5, SamplingRow{});
    for (int i = 0; i < 5; ++i) {
      in.sampling.rows[i].seed = 7 + i;
      in.sampling.rows[i].temperature = i % 2 == 0 ? 0.0f : 1.0f;
    }
    return in;
  };
  auto decode = [](int32_t t0, int32_t t1, int32_t b0, int32_t b1) {
    StepBatch in = make_step({{{t0}, 3, {b0}}, {{t1}, 2, {b1}}}, 4, 1);
    for (int i = 0; i < 2; ++i) in.sampling.rows[i] = {.seed = 9 + static_cast<uint64_t>(i), .step = 1};
    return in;
  };
  SampleOutput a;
  ASSERT_TRUE(r->execute(prefill(0, 1), &a).ok());
  ASSERT_EQ(a.token_ids.size(), 5u);
  // Rows 0 and 2 (earlier chunks), 4 (the last), 3 (the middle one).
  for (const auto& sources : {std::vector<int32_t>{2, 4}, std::vector<int32_t>{4, 0},
                              std::vector<int32_t>{3, 2}}) {
    SampleOutput b;
    ASSERT_TRUE(r->execute(decode(a.token_ids[sources[0]], a.token_ids[sources[1]], 0, 1), &b).ok());
    StepBatch next = decode(-1, -1, 2, 3);  // placeholders (the scheduler's kPendingToken)
    next.pending_rows = {0, 1};
    next.pending_sources = sources;
    ASSERT_TRUE(r->launch(prefill(2, 3), 0).ok());
    ASSERT_TRUE(r->launch(next, 1).ok());
    SampleOutput pa, pb;
    ASSERT_TRUE(r->collect(0, &pa).ok());
    ASSERT_TRUE(r->collect(1, &pb).ok());
    EXPECT_EQ(pa.token_ids, a.token_ids);
    EXPECT_EQ(pb.token_ids, b.token_ids) << sources[0] << ", " << sources[1];
    EXPECT_EQ(pb.logprobs, b.logprobs) << sources[0] << ", " << sources[1];
  }
}

// Deferred sampling (structured output planned ahead): launch() runs the
// forward and lm_head only; launch_sampling() then samples with the batch it
// is given, equal to a step launched with that batch. Until then collect()
// and further launches are refused; a bad batch is refused by name and the
// step dropped.
TEST_F(RunnerTest, DeferredSamplingEqualsSamplingAtLaunch) {
  RunnerOptions o;
  o.block_size = 4;
  o.num_kv_blocks = 16;
  auto r = make(o);
  ASSERT_NE(r, nullptr);
  auto prefill = [](int32_t b0, int32_t b1, uint64_t seed) {
    StepBatch in = make_step({{{5, 6, 7}, 0, {b0}}, {{10, 11}, 0, {b1}}}, 4, 1);
    for (int i = 0; i < 2; ++i) in.sampling.rows[i].seed = seed + static_cast<uint64_t>(i);
    return in;
  };
  SampleOutput want;
  ASSERT_TRUE(r->execute(prefill(0, 1, 40), &want).ok());

  StepBatch deferred = prefill(2, 3, 1);  // sampling rows with other seeds: ignored
  deferred.defer_sampling = true;
  ASSERT_TRUE(r->launch(deferred, 0).ok());
  SampleOutput out;
  EXPECT_FALSE(r->collect(0, &out).ok());             // its sampler is not launched
  EXPECT_FALSE(r->launch(prefill(4, 5, 1), 1).ok());  // nor may another step start
  ASSERT_TRUE(r->launch_sampling(0, prefill(0, 1, 40).sampling).ok());
  EXPECT_FALSE(r->launch_sampling(0, prefill(0, 1, 40).sampling).ok());  // once
  ASSERT_TRUE(r->collect(0, &out).ok());
  EXPECT_EQ(out.token_ids, want.token_ids);
  EXPECT_EQ(out.logprobs, want.logprobs);

  // A batch of the wrong size is refused by name; the slot is free again.
  ASSERT_TRUE(r->launch(deferred, 0).ok());
  SamplingBatch one_row = prefill(0, 1, 40).sampling;
  one_row.rows.pop_back();
  const Status st = r->launch_sampling(0, one_row);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("sampling.rows"), std::string::npos) << st.error().message;
  EXPECT_FALSE(r->collect(0, &out).ok());
  ASSERT_TRUE(r->launch(prefill(4, 5, 1), 0).ok());
  ASSERT_TRUE(r->collect(0, &out).ok());
}

// RunnerOptions::aux_hidden_layers (EAGLE-3's target side): each forward
// leaves the residual entering the named layers in aux_hidden_states(), in
// the named order. Layer 0's is the embedding; layer j's, through the final
// norm, is the final hidden state of the same model cut to its first j
// layers (fill_random gives the cut model the same weights); id L's is the
// model's own.
TEST_F(RunnerTest, AuxHiddenStatesAreTheResidualEnteringEachLayer) {
  ModelConfig c = tiny_config();
  c.num_layers = 3;
  RunnerOptions o;
  o.block_size = 4;
  o.num_kv_blocks = 8;
  o.max_num_batched_tokens = 16;
  const RunnerOptions plain = o;
  o.aux_hidden_layers = {2, 0, 1};
  auto r = make(o, c);
  ASSERT_NE(r, nullptr);
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2};
  const StepBatch step = make_step({{prompt, 0, {0, 1}}}, 4, 2);
  std::vector<float> logits;
  ASSERT_TRUE(r->execute_logits(step, &logits).ok());
  const int64_t t = static_cast<int64_t>(prompt.size()), h = c.hidden_size;
  const Tensor aux = r->aux_hidden_states();
  ASSERT_EQ(aux.ndim, 3);
  ASSERT_EQ(aux.dim(0), 3);
  ASSERT_EQ(aux.dim(1), 16);
  ASSERT_EQ(aux.dim(2), h);
  auto rows = [&](const Tensor& x, int64_t first_row, int64_t n) {
    std::vector<float> v(static_cast<size_t>(n * h));
    be_.copy_to_host(v.data(), static_cast<const float*>(x.data) + first_row * h,
                     v.size() * sizeof(float));
    return v;
  };
  const std::vector<float> embed = rows(r->weights().embed, 0, c.vocab_size);
  const std::vector<float> layer0 = rows(aux, 16, t);  // aux_hidden_layers[1] = 0
  for (int64_t i = 0; i < t; ++i)
    for (int64_t k = 0; k < h; ++k)
      ASSERT_EQ(layer0[i * h + k], embed[prompt[i] * h + k]) << "row " << i << " col " << k;
  const std::vector<float> final_norm = rows(r->weights().final_norm, 0, 1);
  for (const auto& [layers, j] : {std::pair<int64_t, int64_t>{1, 2}, {2, 0}}) {
    ModelConfig cut = c;
    cut.num_layers = layers;
    MemorySource src;
    test::fill_random(cut, &src);
    auto rc = ModelRunner::create(be_, cut, src, plain);
    ASSERT_TRUE(rc.ok()) << rc.error().message;
    ASSERT_TRUE((*rc)->execute_logits(step, &logits).ok());
    const std::vector<float> want = rows((*rc)->hidden_states(), 0, t);
    const std::vector<float> got = rows(aux, j * 16, t);
    for (int64_t i = 0; i < t; ++i) {
      double ss = 0;
      for (int64_t k = 0; k < h; ++k) ss += double(got[i * h + k]) * got[i * h + k];
      const double inv = 1.0 / std::sqrt(ss / h + c.rms_norm_eps);
      for (int64_t k = 0; k < h; ++k)
        EXPECT_NEAR(got[i * h + k] * inv * final_norm[k], want[i * h + k], 1e-4)
            << layers << " layers, row " << i << " col " << k;
    }
  }
  // Id L = 3, the stream leaving the last layer: through the final norm, the
  // model's own final hidden states.
  o.aux_hidden_layers = {3};
  auto last = make(o, c);
  ASSERT_NE(last, nullptr);
  ASSERT_TRUE(last->execute_logits(step, &logits).ok());
  const std::vector<float> out = rows(last->aux_hidden_states(), 0, t);
  const std::vector<float> final_hidden = rows(last->hidden_states(), 0, t);
  for (int64_t i = 0; i < t; ++i) {
    double ss = 0;
    for (int64_t k = 0; k < h; ++k) ss += double(out[i * h + k]) * out[i * h + k];
    const double inv = 1.0 / std::sqrt(ss / h + c.rms_norm_eps);
    for (int64_t k = 0; k < h; ++k)
      EXPECT_NEAR(out[i * h + k] * inv * final_norm[k], final_hidden[i * h + k], 1e-4)
          << "id L, row " << i << " col " << k;
  }
  // Refused: ids outside [0, L] or repeated, a family not on the llama decoder.
  o.aux_hidden_layers = {0, 4, 1};
  EXPECT_NE(create_error(o, c).message.find("[0, 4, 1]"), std::string::npos);
  o.aux_hidden_layers = {1, 1, 0};
  EXPECT_NE(create_error(o, c).message.find("not distinct"), std::string::npos);
  o.aux_hidden_layers = {0, 1};
  EXPECT_EQ(create_error(o, tiny_config("gemma2")).code, ErrorCode::kUnsupported);
}

TEST_F(RunnerTest, ExecuteRejectsBadSteps) {
  RunnerOptions o;
  o.block_size = 4;
  o.num_kv_blocks = 8;
  o.max_num_batched_tokens = 6;
  auto r = make(o);
  ASSERT_NE(r, nullptr);
  SampleOutput out;
  StepBatch ok = make_step({{{1, 2, 3}, 0, {0}}}, 4, 1);
  ASSERT_TRUE(r->execute(ok, &out).ok());
  auto expect_error = [&](StepBatch in, const std::string& needle) {
    Status s = r->execute(in, &out);
    ASSERT_FALSE(s.ok()) << needle;
    EXPECT_NE(s.error().message.find(needle), std::string::npos) << s.error().message;
  };
  expect_error(make_step({{{1, 2, 3, 4, 5, 6, 7}, 0, {0, 1}}}, 4, 2), "max_num_batched_tokens 6");
  StepBatch bad = ok;
  bad.token_ids[1] = 97;
  expect_error(bad, "token_ids[1] = 97");
  bad = ok;
  bad.positions[2] = 5;
  expect_error(bad, "positions[2] = 5, expected 2");
  bad = ok;
  bad.slot_mapping[0] = 9;
  expect_error(bad, "slot_mapping[0] = 9, expected 0");
  expect_error(make_step({{{1}, 3, {8}}}, 4, 1), "block_tables[0][0] = 8");
  bad = ok;
  bad.logits_rows = {3};
  expect_error(bad, "logits_rows[0] = 3");
  bad = ok;
  bad.sampling.rows.push_back({});
  expect_error(bad, "sampling.rows has 2 entries, expected 1");
  bad = ok;
  bad.copy_src = {1};
  bad.copy_dst = {8};
  expect_error(bad, "block 8");
}

TEST(StepValidation, CatchesEveryMalformedField) {
  StepLimits l{8, 2, 3, 10, 4, 50, 12};
  StepBatch ok = make_step({{{1, 2, 3}, 0, {4}}, {{7}, 5, {1, 2}}}, 4, 2);
  ASSERT_TRUE(validate_step(ok, l, true).ok()) << validate_step(ok, l, true).error().message;
  auto expect_error = [&](const StepBatch& in, const std::string& needle) {
    Status s = validate_step(in, l, true);
    ASSERT_FALSE(s.ok()) << needle;
    EXPECT_NE(s.error().message.find(needle), std::string::npos) << s.error().message;
  };
  StepBatch s = ok;
  s.query_start_loc = {0, 3, 3};
  expect_error(s, "query_start_loc must run from 0");
  s = ok;
  s.query_start_loc = {0, 0, 4};
  expect_error(s, "sequence 0 has 0 new tokens");
  s = ok;
  s.seq_lens[1] = 13;
  expect_error(s, "seq_lens[1] = 13");
  s = ok;
  s.position_offsets = {2, 0};  // sequence 0's KV holds its positions from 2 on
  for (size_t t = 0; t < 3; ++t) s.positions[t] += 2;
  EXPECT_TRUE(validate_step(s, l, true).ok()) << validate_step(s, l, true).error().message;
  s.positions[1] -= 2;
  expect_error(s, "positions[1] = 1, expected 3");
  s = ok;
  s.position_offsets = {0};
  expect_error(s, "position_offsets has 1 entries, expected 2");
  s = ok;
  s.position_offsets = {0, 7};  // position 12 of max_model_len 12
  s.positions[3] += 7;
  expect_error(s, "position_offsets[1] = 7");
  s = ok;
  s.token_ids[1] = 60;  // vocab 50
  expect_error(s, "token_ids[1] = 60");
  {  // input_vocab_size (an EAGLE-3 head): token ids to 100, sampling still over 50
    StepLimits wide = l;
    wide.input_vocab_size = 100;
    EXPECT_TRUE(validate_step(s, wide, true).ok());
    StepBatch pen = s;
    pen.sampling.penalty_offsets = {0, 1, 1};
    pen.sampling.penalty_tokens = {60};
    pen.sampling.penalty_output_counts = {1};
    pen.sampling.penalty_in_prompt = {0};
    EXPECT_FALSE(validate_step(pen, wide, true).ok());
  }
  s = ok;
  s.max_blocks_per_seq = 4;
  expect_error(s, "max_blocks_per_seq 4");
  s = ok;
  s.block_tables.pop_back();
  expect_error(s, "block_tables has 3 entries, expected 4");
  s = ok;
  s.sampling.penalty_offsets = {0, 1, 1};
  s.sampling.penalty_tokens = {60};
  s.sampling.penalty_output_counts = {1};
  s.sampling.penalty_in_prompt = {0};
  expect_error(s, "sampling.penalty_tokens[0] = 60");
  s.sampling.penalty_tokens = {6};
  s.sampling.penalty_offsets = {0, 1};
  expect_error(s, "sampling.penalty_offsets has 2 entries, expected 3");
  s = ok;
  s.sampling.bias_offsets = {0, 1, 0};
  s.sampling.bias_tokens = {1};
  s.sampling.bias_values = {1.0f};
  expect_error(s, "sampling.bias_offsets must run from 0 to 1");
  s = ok;
  s.sampling.rows[0].num_top_logprobs = 1;
  expect_error(s, "num_top_logprobs = 1");
  s = ok;
  s.sampling.rows[1].top_p = 0.0f;
  expect_error(s, "top_p");
  s = ok;
  s.sampling.mask_words = 2;  // V = 50: two words, bits 50..63 clear
  s.sampling.allowed_words = {0x10u, 0u, 0u, 1u << 17};
  s.sampling.mask_index = {1, -1};
  EXPECT_TRUE(validate_step(s, l, true).ok()) << validate_step(s, l, true).error().message;
  s.sampling.mask_index = {2, -1};
  expect_error(s, "sampling.mask_index[0] = 2 not in [-1, 2)");
  s.sampling.mask_index = {0};
  expect_error(s, "sampling.mask_index has 1 entries, expected 2");
  s.sampling.mask_index = {0, 1};
  s.sampling.allowed_words[3] = 1u << 18;  // token 50
  expect_error(s, "sampling mask 1 allows tokens outside the vocabulary");
  s.sampling.allowed_words[3] = 0u;
  expect_error(s, "sampling mask 1 allows no token");
  s.sampling.allowed_words.pop_back();
  expect_error(s, "not a multiple of mask_words 2");
  s.sampling.mask_words = 3;
  expect_error(s, "sampling.mask_words = 3, expected ceil(vocab / 32) = 2");
  s.sampling.mask_index.clear();
  expect_error(s, "sampling.mask_index is empty but allowed_words is not");
  s = ok;
  s.copy_src = {1, 2};
  s.copy_dst = {3};
  expect_error(s, "copy_src and copy_dst differ");
  // A runner without a sliding-window KV group refuses that group's tables.
  s = ok;
  s.sliding_block_tables = {-1, 0};  // kNullBlock, then a block
  s.sliding_slot_mapping.assign(s.slot_mapping.size(), 0);
  expect_error(s, "sliding-window KV group's tables: this model runner keeps no such group");
  // execute_logits ignores the sampling batch.
  s = ok;
  s.sampling.rows.clear();
  EXPECT_TRUE(validate_step(s, l, false).ok());
}

// With a sliding-window KV group (window 3, blocks of 4, 6 sliding blocks):
// its tables and slots are required, blocks the step's windows read must be
// real, earlier entries may be released (-1), and its copies stay in its pool.
TEST(StepValidation, ChecksTheSlidingWindowGroup) {
  StepLimits l{8, 2, 3, 10, 4, 50, 12};
  l.num_sliding_kv_blocks = 6;
  l.sliding_window = 3;
  // Sequence 0: a prefill chunk at 0..2; sequence 1: a decode at position 9,
  // whose window (7..9) starts in block 1.
  StepBatch ok = make_step({{{1, 2, 3}, 0, {4}}, {{7}, 9, {1, 2, 3}}}, 4, 3);
  ok.sliding_block_tables = {5, -1, -1, -1, 0, 2};
  ok.sliding_slot_mapping = {20, 21, 22, 9};
  ASSERT_TRUE(validate_step(ok, l, true).ok()) << validate_step(ok, l, true).error().message;
  auto expect_error = [&](const StepBatch& in, const std::string& needle) {
    Status s = validate_step(in, l, true);
    ASSERT_FALSE(s.ok()) << needle;
    EXPECT_NE(s.error().message.find(needle), std::string::npos) << s.error().message;
  };
  StepBatch s = ok;
  s.sliding_block_tables.clear();
  expect_error(s, "sliding_block_tables has 0 entries, expected 6");
  s = ok;
  s.sliding_slot_mapping.pop_back();
  expect_error(s, "sliding_slot_mapping has 3 entries, expected 4");
  s = ok;
  s.sliding_block_tables[4] = -1;  // sequence 1's block 1: in its window
  expect_error(s, "sliding_block_tables[1][1] = -1 not in [0, 6) (read by this step's window)");
  s = ok;
  s.sliding_block_tables[3] = 6;  // before the window, but neither a block nor released
  expect_error(s, "sliding_block_tables[1][0] = 6 not in [0, 6) nor -1 (released)");
  s = ok;
  s.sliding_block_tables[3] = 4;  // a block before the window is fine too
  EXPECT_TRUE(validate_step(s, l, true).ok());
  s = ok;
  s.sliding_slot_mapping[3] = 8;
  expect_error(s, "sliding_slot_mapping[3] = 8, expected 9");
  s = ok;
  s.sliding_copy_src = {6};
  s.sliding_copy_dst = {0};
  expect_error(s, "sliding_copy 0 names block 6 outside [0, 6)");
  s.sliding_copy_src = {5};  // in the sliding pool, not the full pool's range
  EXPECT_TRUE(validate_step(s, l, true).ok());
  s.sliding_copy_dst = {};
  expect_error(s, "sliding_copy_src and sliding_copy_dst differ in length");
}

}  // namespace
}  // namespace pagoda
