// Request groups and logprobs through the engine on stories260K:
//  - n > 1 parallel samples equal the reference model's seeded draws per
//    sample seed, also under preemption and chunking; best_of returns the
//    samples with the highest cumulative logprob;
//  - beam search equals Hugging Face transformers' beams
//    (tests/data/engine/stories260K_beams.json, make_beam_reference.py);
//  - logprobs, top logprobs and prompt logprobs equal the log-softmax of the
//    reference logits and transformers' goldens (tests/data/golden/).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine_harness.h"
#include "sample/sampling_rows.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::test {
namespace {

const std::vector<int32_t> kEos = {2};

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in, nullptr, false);
}

class EngineGroups : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto tok = Tokenizer::load(stories_dir());
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    tok_ = tok->release();
    prompt_ = new std::vector<int32_t>(tok_->encode("Once upon a time"));
    ref_ = ReferenceModel::load(stories_dir()).release();
  }
  static void TearDownTestSuite() {
    delete ref_;
    delete prompt_;
    delete tok_;
  }
  // What decoding prompt + tokens adds to the prompt's text.
  static std::string continuation(std::span<const int32_t> prompt,
                                  std::span<const int32_t> tokens) {
    std::vector<int32_t> all(prompt.begin(), prompt.end());
    all.insert(all.end(), tokens.begin(), tokens.end());
    return tok_->decode(all, true).substr(tok_->decode(prompt, true).size());
  }
  void SetUp() override { ASSERT_NE(ref_, nullptr); }

  static inline Tokenizer* tok_ = nullptr;
  static inline ReferenceModel* ref_ = nullptr;
  static inline std::vector<int32_t>* prompt_ = nullptr;
};

SamplingParams sampled(uint64_t seed, int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 50;
  p.seed = seed;
  p.max_tokens = max_tokens;
  return p;
}

// The default setup, and a small pool with chunks of 7 in which groups are
// preempted and recomputed.
const std::vector<EngineSetup>& setups() {
  static const std::vector<EngineSetup> s = {
      {.model = stories_dir()},
      {.model = stories_dir(), .num_kv_blocks = 12, .max_chunk_tokens = 7},
  };
  return s;
}

void expect_preempted_in_small_pool(LlmEngine& engine, const EngineSetup& s) {
  if (s.num_kv_blocks < 20) {
    EXPECT_GT(engine.metrics().num_preemptions, 0u) << "the small pool must preempt";
  }
}

TEST_F(EngineGroups, ParallelSamplesEqualTheReferenceDrawsPerSampleSeed) {
  std::vector<TestRequest> requests;
  std::vector<std::vector<std::vector<int32_t>>> want;
  for (int i = 0; i < 4; ++i) {
    SamplingParams p = sampled(70 + i, 30);
    p.n = 3;
    requests.push_back({"n3-" + std::to_string(i), *prompt_, p});
    want.emplace_back();
    for (int k = 0; k < 3; ++k)
      want.back().push_back(ref_->generate(*prompt_, p, kEos, sample_seed(70 + i, k), 30));
  }
  requests.push_back({"n1", *prompt_, sampled(70, 30)});  // n = 1 is sample 0 of the same seed
  for (const EngineSetup& s : setups()) {
    auto engine = start_engine(s);
    ASSERT_NE(engine, nullptr);
    auto logs = run_all(*engine, requests);
    ASSERT_EQ(logs.size(), requests.size());
    for (size_t i = 0; i < want.size(); ++i) {
      for (size_t k = 0; k < 3; ++k) {
        EXPECT_EQ(logs[i]->samples[k].tokens, want[i][k]) << "request " << i << " sample " << k;
        EXPECT_EQ(logs[i]->samples[k].text, continuation(*prompt_, want[i][k]));
        EXPECT_EQ(logs[i]->samples[k].finish, FinishReason::kLength);
      }
    }
    EXPECT_EQ(logs.back()->samples[0].tokens, want[0][0]);
    expect_preempted_in_small_pool(*engine, s);
  }
}

TEST_F(EngineGroups, BestOfReturnsTheSamplesWithTheHighestCumulativeLogprob) {
  SamplingParams p = sampled(5, 20);
  p.best_of = 5;
  p.n = 2;
  p.prompt_logprobs = 1;
  std::vector<std::pair<double, std::vector<int32_t>>> all;
  for (int k = 0; k < 5; ++k) {
    double cum = 0.0;
    std::vector<int32_t> out = ref_->generate(*prompt_, p, kEos, sample_seed(5, k), 20, &cum);
    all.push_back({cum, out});
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const EngineSetup& s : setups()) {
    auto engine = start_engine(s);
    ASSERT_NE(engine, nullptr);
    auto logs = run_all(*engine, {{"best", *prompt_, p}, {"best2", *prompt_, p}});
    ASSERT_EQ(logs.size(), 2u);
    for (const auto& log : logs) {
      EXPECT_EQ(log->samples[0].tokens, all[0].second);
      EXPECT_EQ(log->samples[1].tokens, all[1].second);
      EXPECT_EQ(log->samples[0].text, continuation(*prompt_, all[0].second));
      EXPECT_EQ(log->samples[1].text, continuation(*prompt_, all[1].second));
      // Held events arrive merged; the prompt logprobs with index 0.
      EXPECT_EQ(log->num_prompt_logprob_events, 1);
      EXPECT_EQ(log->prompt_logprobs.size(), prompt_->size());
    }
    expect_preempted_in_small_pool(*engine, s);
  }
}

TEST_F(EngineGroups, BeamSearchEqualsTransformers) {
  nlohmann::json ref = read_json(std::string(PAGODA_TEST_DATA) + "/engine/stories260K_beams.json");
  ASSERT_FALSE(ref.is_discarded());
  std::vector<TestRequest> requests;
  for (size_t i = 0; i < ref["cases"].size(); ++i) {
    const nlohmann::json& c = ref["cases"][i];
    SamplingParams p;
    p.use_beam_search = true;
    p.temperature = 0.0f;
    p.beam_width = c["beam_width"].get<int32_t>();
    p.n = c["n"].get<int32_t>();
    p.length_penalty = c["length_penalty"].get<float>();
    const nlohmann::json& es = c["early_stopping"];
    p.early_stopping = es.is_string()   ? EarlyStopping::kNever
                       : es.get<bool>() ? EarlyStopping::kTrue
                                        : EarlyStopping::kFalse;
    p.max_tokens = c["max_new_tokens"].get<int32_t>();
    requests.push_back(
        {"beam" + std::to_string(i), c["prompt_ids"].get<std::vector<int32_t>>(), p});
  }
  for (const EngineSetup& s : setups()) {
    auto engine = start_engine(s);
    ASSERT_NE(engine, nullptr);
    auto logs = run_all(*engine, requests);
    ASSERT_EQ(logs.size(), requests.size());
    for (size_t i = 0; i < logs.size(); ++i) {
      const nlohmann::json& hyps = ref["cases"][i]["hypotheses"];
      ASSERT_EQ(logs[i]->samples.size(), hyps.size());
      for (size_t k = 0; k < hyps.size(); ++k) {
        const auto want = hyps[k]["tokens"].get<std::vector<int32_t>>();
        EXPECT_EQ(logs[i]->samples[k].tokens, want) << "case " << i << " hypothesis " << k;
        EXPECT_EQ(logs[i]->samples[k].text, continuation(requests[i].prompt, want)) << "case " << i;
        EXPECT_EQ(logs[i]->samples[k].finish, FinishReason::kLength);
      }
    }
    expect_preempted_in_small_pool(*engine, s);
  }
}

void expect_logprob(const TokenLogprob& got, int32_t token, const std::vector<double>& lp,
                    size_t num_top, const std::string& where) {
  constexpr double kTol = 1e-4;
  EXPECT_EQ(got.token_id, token) << where;
  EXPECT_NEAR(got.logprob, lp[static_cast<size_t>(token)], kTol) << where;
  EXPECT_EQ(got.rank, rank_of(lp, token)) << where;
  std::vector<int32_t> order(lp.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return lp[a] > lp[b]; });
  ASSERT_EQ(got.top.size(), num_top) << where;
  for (size_t j = 0; j < num_top; ++j) {
    EXPECT_EQ(got.top[j].token_id, order[j]) << where << " top " << j;
    EXPECT_NEAR(got.top[j].logprob, lp[static_cast<size_t>(order[j])], kTol)
        << where << " top " << j;
  }
}

TEST_F(EngineGroups, LogprobsEqualTheReferenceLogSoftmax) {
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.max_tokens = 12;
  greedy.logprobs = 5;
  SamplingParams drawn = sampled(9, 12);
  drawn.logprobs = 3;  // the first tokens of n > 1 come from repeated rows
  drawn.n = 2;
  drawn.repetition_penalty = 1.3f;  // logprobs stay raw: before any processing
  for (const EngineSetup& s : setups()) {
    auto engine = start_engine(s);
    ASSERT_NE(engine, nullptr);
    SamplingParams zero = greedy;
    zero.logprobs = 0;  // the chosen token's logprob only
    auto logs = run_all(
        *engine,
        {{"greedy", *prompt_, greedy}, {"drawn", *prompt_, drawn}, {"zero", *prompt_, zero}});
    ASSERT_EQ(logs.size(), 3u);
    for (const auto& log : logs) {
      for (const SampleLog& sample : log->samples) {
        ASSERT_EQ(sample.logprobs.size(), sample.tokens.size());
        std::vector<int32_t> context = *prompt_;
        for (size_t i = 0; i < sample.tokens.size(); ++i) {
          const std::vector<double> lp = log_softmax(ref_->next_logits(context));
          expect_logprob(sample.logprobs[i], sample.tokens[i], lp,
                         static_cast<size_t>(*(log->id == "greedy"  ? greedy
                                               : log->id == "drawn" ? drawn
                                                                    : zero)
                                                  .logprobs),
                         log->id + " token " + std::to_string(i));
          context.push_back(sample.tokens[i]);
        }
      }
    }
  }
}

TEST_F(EngineGroups, LogprobsAndPromptLogprobsMatchTransformersGolden) {
  nlohmann::json golden = read_json(std::string(PAGODA_TEST_DATA) + "/golden/stories260K.json");
  ASSERT_FALSE(golden.is_discarded());
  const double tol = golden["tolerance"]["logprob"].get<double>();
  const nlohmann::json& first = golden["cases"][0];  // prompt [BOS]
  const auto greedy_ids = first["greedy_ids"].get<std::vector<int32_t>>();
  const nlohmann::json& tops = first["top_logprobs"];
  // The golden's long prompt continues [BOS] greedily: its prompt logprobs
  // are the first case's generated logprobs.
  const auto long_prompt = golden["cases"][2]["prompt_ids"].get<std::vector<int32_t>>();
  ASSERT_TRUE(std::equal(greedy_ids.begin(), greedy_ids.end(), long_prompt.begin() + 1));
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = static_cast<int32_t>(greedy_ids.size());
  p.logprobs = 20;
  SamplingParams pp;
  pp.temperature = 0.0f;
  pp.max_tokens = 2;
  pp.prompt_logprobs = 20;
  auto engine = start_engine({.model = stories_dir(), .max_chunk_tokens = 7});
  ASSERT_NE(engine, nullptr);
  // A cached copy of the long prompt first: prompt logprobs must not use it.
  run_all(*engine, {{"warm", long_prompt, p}});
  auto logs = run_all(*engine, {{"gen", {1}, p}, {"prompt", long_prompt, pp}});
  ASSERT_EQ(logs.size(), 2u);
  const SampleLog& gen = logs[0]->samples[0];
  ASSERT_EQ(gen.tokens, greedy_ids);
  const auto& plp = logs[1]->prompt_logprobs;
  ASSERT_EQ(plp.size(), long_prompt.size());
  EXPECT_FALSE(plp[0].has_value());
  EXPECT_EQ(logs[1]->num_cached_prompt_tokens, 0);
  for (size_t i = 0; i < greedy_ids.size(); ++i) {
    const nlohmann::json& want = tops[i];
    for (const TokenLogprob* got : {&gen.logprobs[i], plp[i + 1] ? &*plp[i + 1] : nullptr}) {
      ASSERT_NE(got, nullptr) << "prompt logprob " << i + 1;
      EXPECT_EQ(got->token_id, greedy_ids[i]);
      EXPECT_EQ(got->rank, 1);
      ASSERT_EQ(got->top.size(), want.size());
      for (size_t j = 0; j < want.size(); ++j) {
        EXPECT_EQ(got->top[j].token_id, want[j][0].get<int32_t>()) << "step " << i << " top " << j;
        EXPECT_NEAR(got->top[j].logprob, want[j][1].get<double>(), tol)
            << "step " << i << " top " << j;
      }
    }
  }
}

TEST_F(EngineGroups, PromptLogprobsEqualTheReferenceInEveryPath) {
  std::vector<int32_t> prompt = *prompt_;
  for (int i = 0; i < 15; ++i) prompt.insert(prompt.end(), prompt_->begin() + 1, prompt_->end());
  const std::vector<float> logits = ref_->logits(prompt);
  const auto v = static_cast<size_t>(ref_->vocab_size());
  SamplingParams plain;
  plain.temperature = 0.0f;
  plain.max_tokens = 20;
  plain.prompt_logprobs = 2;
  SamplingParams n2 = sampled(1, 20);
  n2.n = 2;
  n2.prompt_logprobs = 2;
  SamplingParams beam = plain;
  beam.use_beam_search = true;
  beam.beam_width = 2;
  for (const EngineSetup& s : setups()) {
    auto engine = start_engine(s);
    ASSERT_NE(engine, nullptr);
    auto logs =
        run_all(*engine, {{"plain", prompt, plain}, {"n2", prompt, n2}, {"beam", prompt, beam}});
    ASSERT_EQ(logs.size(), 3u);
    for (const auto& log : logs) {
      EXPECT_EQ(log->num_prompt_logprob_events, 1) << log->id;
      ASSERT_EQ(log->prompt_logprobs.size(), prompt.size()) << log->id;
      EXPECT_FALSE(log->prompt_logprobs[0].has_value());
      for (size_t p = 1; p < prompt.size(); ++p) {
        ASSERT_TRUE(log->prompt_logprobs[p].has_value()) << log->id << " " << p;
        const std::vector<double> lp =
            log_softmax(std::span<const float>(logits.data() + (p - 1) * v, v));
        expect_logprob(*log->prompt_logprobs[p], prompt[p], lp, 2,
                       log->id + " prompt " + std::to_string(p));
      }
    }
    expect_preempted_in_small_pool(*engine, s);
  }
}

}  // namespace
}  // namespace pagoda::test
