// Request groups and logprobs through the engine on stories260K:
//  - n > 1 parallel samples equal the reference model's seeded draws per
//    sample seed, also under preemption and chunking; best_of returns the
//    samples with the highest cumulative logprob;
//  - beam search equals Hugging Face transformers' beams
//    (tests/data/engine/stories260K_beams.json, make_beam_reference.py;
//    on cuda up to near-ties in pruning, see engine_harness.h);
//  - logprobs, top logprobs and prompt logprobs equal the log-softmax of the
//    reference logits and transformers' goldens (tests/data/golden/).
// On cuda every comparison is up to bf16 near-ties (engine_harness.h).
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
  // What decoding prompt + tokens adds to the prompt's text (the engine's
  // tokens, which the reference checks separately).
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

// A finished sample's reason: EOS before max_tokens is a stop.
FinishReason finish_of(std::span<const int32_t> tokens, int32_t max_tokens) {
  const bool eos =
      !tokens.empty() && std::find(kEos.begin(), kEos.end(), tokens.back()) != kEos.end();
  return eos && static_cast<int32_t>(tokens.size()) < max_tokens ? FinishReason::kStop
                                                                 : FinishReason::kLength;
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
  std::vector<std::vector<RefSample>> want;
  for (int i = 0; i < 4; ++i) {
    SamplingParams p = sampled(70 + i, 30);
    p.n = 3;
    requests.push_back({"n3-" + std::to_string(i), *prompt_, p});
    want.emplace_back();
    for (int k = 0; k < 3; ++k)
      want.back().push_back(ref_->sample(*prompt_, p, kEos, sample_seed(70 + i, k), 30));
  }
  requests.push_back({"n1", *prompt_, sampled(70, 30)});  // n = 1 is sample 0 of the same seed
  ReferenceCheck check(ref_);
  for (const EngineSetup& s : setups()) {
    auto engine = start_engine(s);
    ASSERT_NE(engine, nullptr);
    auto logs = run_all(*engine, requests);
    ASSERT_EQ(logs.size(), requests.size());
    for (size_t i = 0; i < want.size(); ++i) {
      for (size_t k = 0; k < 3; ++k) {
        const SampleLog& got = logs[i]->samples[k];
        check.expect_tokens(got.tokens, want[i][k],
                            "request " + std::to_string(i) + " sample " + std::to_string(k));
        EXPECT_EQ(got.text, continuation(*prompt_, got.tokens));
        EXPECT_EQ(got.finish, finish_of(got.tokens, 30));
      }
    }
    check.expect_tokens(logs.back()->samples[0].tokens, want[0][0], "n1");
    expect_preempted_in_small_pool(*engine, s);
  }
}

TEST_F(EngineGroups, BestOfReturnsTheSamplesWithTheHighestCumulativeLogprob) {
  SamplingParams p = sampled(5, 20);
  p.best_of = 5;
  p.n = 2;
  p.prompt_logprobs = 1;
  std::vector<RefSample> all;  // one per sample seed
  for (int k = 0; k < 5; ++k) all.push_back(ref_->sample(*prompt_, p, kEos, sample_seed(5, k), 20));
  ReferenceCheck check(ref_);
  for (const EngineSetup& s : setups()) {
    auto engine = start_engine(s);
    ASSERT_NE(engine, nullptr);
    auto logs = run_all(*engine, {{"best", *prompt_, p}, {"best2", *prompt_, p}});
    ASSERT_EQ(logs.size(), 2u);
    for (const auto& log : logs) {
      const std::vector<std::vector<int32_t>> got = {log->samples[0].tokens,
                                                     log->samples[1].tokens};
      check.expect_best_of(got, all, log->id);
      EXPECT_EQ(log->samples[0].text, continuation(*prompt_, got[0]));
      EXPECT_EQ(log->samples[1].text, continuation(*prompt_, got[1]));
      // Held events arrive merged; the prompt logprobs with index 0.
      EXPECT_EQ(log->num_prompt_logprob_events, 1);
      EXPECT_EQ(log->prompt_logprobs.size(), prompt_->size());
    }
    expect_preempted_in_small_pool(*engine, s);
  }
}

TEST_F(EngineGroups, BeamSearchEqualsTransformers) {
  nlohmann::json ref = read_json(test_data_dir() + "/engine/stories260K_beams.json");
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
  ReferenceCheck check(ref_);
  for (const EngineSetup& s : setups()) {
    auto engine = start_engine(s);
    ASSERT_NE(engine, nullptr);
    auto logs = run_all(*engine, requests);
    ASSERT_EQ(logs.size(), requests.size());
    for (size_t i = 0; i < logs.size(); ++i) {
      const nlohmann::json& hyps = ref["cases"][i]["hypotheses"];
      ASSERT_EQ(logs[i]->samples.size(), hyps.size());
      std::vector<std::vector<int32_t>> got, want;
      for (size_t k = 0; k < hyps.size(); ++k) {
        got.push_back(logs[i]->samples[k].tokens);
        want.push_back(hyps[k]["tokens"].get<std::vector<int32_t>>());
        const SampleLog& sample = logs[i]->samples[k];
        EXPECT_EQ(sample.text, continuation(requests[i].prompt, sample.tokens)) << "case " << i;
        EXPECT_EQ(sample.finish, finish_of(sample.tokens, *requests[i].params.max_tokens));
      }
      check.expect_beams(requests[i].prompt, got, want, requests[i].params.beam_width,
                         requests[i].params.length_penalty, "case " + std::to_string(i));
    }
    expect_preempted_in_small_pool(*engine, s);
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
  ReferenceCheck check(ref_);
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
          check.expect_logprob(sample.logprobs[i], sample.tokens[i], lp,
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
  nlohmann::json golden = read_json(test_data_dir() + "/golden/stories260K.json");
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
  // The golden's log-softmax rows: its top entries, NaN (unlisted) elsewhere.
  std::vector<std::vector<double>> rows;
  for (size_t i = 0; i < greedy_ids.size(); ++i) {
    rows.emplace_back(static_cast<size_t>(ref_->vocab_size()), std::nan(""));
    for (const nlohmann::json& e : tops[i]) rows.back().at(e[0].get<size_t>()) = e[1].get<double>();
    // The greedy token is the golden's top-1: rank 1.
    ASSERT_EQ(tops[i][0][0].get<int32_t>(), greedy_ids[i]);
  }
  ReferenceCheck check(ref_);
  const SampleLog& gen = logs[0]->samples[0];
  const size_t num_same = check.expect_greedy_tokens(gen.tokens, greedy_ids, rows, "gen", tol);
  ASSERT_GE(gen.logprobs.size(), num_same);
  const auto& plp = logs[1]->prompt_logprobs;
  ASSERT_EQ(plp.size(), long_prompt.size());
  EXPECT_FALSE(plp[0].has_value());
  EXPECT_EQ(logs[1]->num_cached_prompt_tokens, 0);
  for (size_t i = 0; i < greedy_ids.size(); ++i) {
    const size_t num_top = tops[i].size();
    // Generated logprobs on the agreeing prefix; prompt logprobs everywhere.
    if (i < num_same) {
      check.expect_logprob(gen.logprobs[i], greedy_ids[i], rows[i], num_top,
                           "step " + std::to_string(i), tol);
    }
    ASSERT_TRUE(plp[i + 1].has_value()) << "prompt logprob " << i + 1;
    check.expect_logprob(*plp[i + 1], greedy_ids[i], rows[i], num_top,
                         "prompt logprob " + std::to_string(i + 1), tol);
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
    ReferenceCheck check(ref_);
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
        check.expect_logprob(*log->prompt_logprobs[p], prompt[p], lp, 2,
                             log->id + " prompt " + std::to_string(p));
      }
    }
    expect_preempted_in_small_pool(*engine, s);
  }
}

}  // namespace
}  // namespace pagoda::test
