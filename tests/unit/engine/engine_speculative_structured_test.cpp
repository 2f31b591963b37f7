// Speculative decoding of structured-output requests on stories260K with
// real constraints (the grammar module over the model's vocabulary: JSON
// Schema, regex, choice, GBNF): whatever the proposer drafts -- recorded
// outputs (accepted), noisy ones (partly) or random tokens -- greedy,
// seeded and n = 2 outputs equal the same requests' without speculation,
// with jump-forward on and off and async scheduling on and off; every
// output follows its constraint; drafts are accepted. Each verification row
// is masked by the constraint's state after the drafts before it (a row
// masked by the sample's own state would refuse the drafts' continuation).
// A verification row whose mask allows none of allowed_token_ids ends the
// sample with the same error event as without speculation.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine_harness.h"
#include "grammar/compiler.h"
#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "spec/random_proposer.h"
#include "stories_grammar_test.h"
#include "test_proposers.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::test {
namespace {

constexpr int32_t kMaxTokens = 48;

enum class Drafts { kRecorded, kNoisy, kRandom };

struct Constrained {
  std::string name;
  StructuredOutputSpec spec;
};

const std::vector<Constrained>& constraints() {
  static const std::vector<Constrained> c = {
      {"json_schema",
       {StructuredOutputSpec::Kind::kJsonSchema,
        R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 99}},
            "required": ["name", "age"], "additionalProperties": false})",
        {}}},
      {"regex",
       {StructuredOutputSpec::Kind::kRegex, "(the|a) [a-z]{1,9} (was|is) [a-z ]{2,30}\\.", {}}},
      {"choice",
       {StructuredOutputSpec::Kind::kChoice,
        "",
        {" there was a little girl named Lily.", " there was a big dog.", " the sun was hot."}}},
      {"gbnf",
       {StructuredOutputSpec::Kind::kGrammar,
        R"(root ::= "{\"first_name\": \"" [a-z]{1,8} "\", \"colour\": \"" ("red" | "green" | "blue") "\"}")",
        {}}},
  };
  return c;
}

class StoriesSpeculativeStructured : public StoriesGrammarTest {
 protected:
  static SamplingParams params(std::optional<uint64_t> seed, int32_t n = 1) {
    SamplingParams p;
    p.temperature = seed ? 1.0f : 0.0f;
    p.seed = seed;
    p.n = n;
    p.max_tokens = kMaxTokens;
    return p;
  }
  // Per constraint: greedy, two seeded requests and a seeded n = 2.
  static std::vector<TestRequest> requests() {
    std::vector<TestRequest> out;
    for (const Constrained& c : constraints()) {
      auto compiled = compiler_->compile(c.spec);
      EXPECT_TRUE(compiled.ok()) << c.name << ": " << compiled.error().message;
      if (!compiled.ok()) continue;
      out.push_back({c.name + " greedy", *prompt_, params(std::nullopt), 0, *compiled});
      for (uint64_t seed : {3u, 4u})
        out.push_back(
            {c.name + " seed" + std::to_string(seed), *prompt_, params(seed), 0, *compiled});
      out.push_back({c.name + " n2", *prompt_, params(7, 2), 0, *compiled});
    }
    return out;
  }
  // The GBNF `text` follows: all of it when `complete`, else a prefix of it.
  static bool matches(const StructuredOutputSpec& spec, const std::string& text, bool complete) {
    auto gbnf = grammar::GrammarCompiler::spec_to_gbnf(spec);
    if (!gbnf.ok()) return false;
    auto g = grammar::parse_gbnf(*gbnf);
    if (!g.ok()) return false;
    grammar::Matcher m(std::make_shared<const grammar::Grammar>(std::move(*g)));
    return m.accept_bytes(text) && (!complete || m.can_end());
  }

  struct Run {
    std::vector<std::shared_ptr<RequestLog>> logs;
    EngineMetrics metrics;
  };
  static Run run(EngineSetup setup, const std::vector<TestRequest>& reqs) {
    auto engine = start_engine(setup);
    if (engine == nullptr) return {};
    Run r;
    r.logs = run_all(*engine, reqs);
    r.metrics = engine->metrics();
    return r;
  }
  // A proposer drafting what `ref` output (prompt and tokens of every sample).
  static std::function<std::unique_ptr<Proposer>()> proposer(Drafts kind, const Run& ref) {
    auto recorded = std::make_shared<RecordingsProposer>();
    for (const auto& log : ref.logs) {
      for (const SampleLog& s : log->samples) {
        std::vector<int32_t> tokens = *prompt_;
        tokens.insert(tokens.end(), s.tokens.begin(), s.tokens.end());
        recorded->record(std::move(tokens));
      }
    }
    switch (kind) {
      case Drafts::kRecorded:
        return [recorded] { return std::make_unique<RecordingsProposer>(*recorded); };
      case Drafts::kNoisy:
        return [recorded] {
          return std::make_unique<NoisyProposer>(std::make_unique<RecordingsProposer>(*recorded),
                                                 0.3, 11);
        };
      case Drafts::kRandom:
        return [] { return std::make_unique<RandomProposer>(kVocab, 5); };
    }
    return {};
  }
  // Every sample of `got` received what the same sample of `want` did.
  static void expect_same(const Run& got, const Run& want, const std::string& what) {
    ASSERT_EQ(got.logs.size(), want.logs.size()) << what;
    for (size_t i = 0; i < want.logs.size(); ++i) {
      const RequestLog& g = *got.logs[i];
      const RequestLog& w = *want.logs[i];
      ASSERT_EQ(g.samples.size(), w.samples.size()) << what << " " << w.id;
      for (size_t k = 0; k < w.samples.size(); ++k) {
        const std::string where = what + ": " + w.id + " index " + std::to_string(k);
        EXPECT_EQ(g.samples[k].tokens, w.samples[k].tokens) << where;
        EXPECT_EQ(g.samples[k].text, w.samples[k].text) << where;
        EXPECT_EQ(g.samples[k].finish, w.samples[k].finish) << where;
        EXPECT_EQ(g.samples[k].error, w.samples[k].error) << where;
      }
    }
  }
};

TEST_F(StoriesSpeculativeStructured, OutputsEqualTheOutputsWithoutSpeculation) {
  if (on_cuda()) GTEST_SKIP() << "compares two engines' f32 runs";
  const std::vector<TestRequest> reqs = requests();
  ASSERT_EQ(reqs.size(), 4 * constraints().size());
  for (bool jump_forward : {true, false}) {
    for (bool async : {true, false}) {
      const std::string setup = std::string(jump_forward ? "jump-forward" : "no jump-forward") +
                                (async ? ", async" : ", sync");
      const EngineSetup plain{
          .model = stories_dir(), .async_scheduling = async, .jump_forward = jump_forward};
      const Run ref = run(plain, reqs);
      ASSERT_EQ(ref.logs.size(), reqs.size()) << setup;
      int complete = 0;
      for (size_t i = 0; i < reqs.size(); ++i) {
        const StructuredOutputSpec& spec = constraints()[i / 4].spec;
        for (const SampleLog& s : ref.logs[i]->samples) {
          EXPECT_EQ(s.error, "") << setup << ": " << reqs[i].id;
          const bool stopped = s.finish == FinishReason::kStop;
          EXPECT_TRUE(matches(spec, s.text, stopped))
              << setup << ": " << reqs[i].id << ": " << s.text;
          if (stopped && spec.kind == StructuredOutputSpec::Kind::kJsonSchema) {
            const nlohmann::json j = nlohmann::json::parse(s.text, nullptr, false);
            EXPECT_TRUE(j.is_object() && j.contains("name") && j.contains("age")) << s.text;
          }
          complete += stopped ? 1 : 0;
        }
      }
      EXPECT_GT(complete, static_cast<int>(reqs.size()) / 2) << setup;
      struct Case {
        Drafts drafts;
        int32_t k;
        const char* name;
      };
      for (const Case& c :
           {Case{Drafts::kRecorded, 4, "recorded k=4"}, Case{Drafts::kRecorded, 1, "recorded k=1"},
            Case{Drafts::kNoisy, 4, "noisy k=4"}, Case{Drafts::kRandom, 4, "random k=4"}}) {
        const std::string what = setup + ", " + c.name;
        EngineSetup s = plain;
        s.speculative.num_speculative_tokens = c.k;
        s.proposer = proposer(c.drafts, ref);
        const Run spec = run(s, reqs);
        expect_same(spec, ref, what);
        expect_consistent_metrics(spec.metrics);
        if (c.drafts != Drafts::kRandom) {
          EXPECT_GT(spec.metrics.spec_num_accepted_tokens, 0u) << what;
        }
        if (c.drafts == Drafts::kRecorded) {
          // The drafts are an output with the same start (samples of one
          // prompt may part later), cut where the masks refuse them.
          EXPECT_GT(spec.metrics.spec_num_accepted_tokens * 10,
                    spec.metrics.spec_num_draft_tokens * 8)
              << what;
          EXPECT_LT(spec.metrics.steps.steps, ref.metrics.steps.steps) << what;
        }
        if (c.drafts == Drafts::kNoisy) {
          EXPECT_LT(spec.metrics.spec_num_accepted_tokens, spec.metrics.spec_num_draft_tokens)
              << what;
        }
      }
    }
  }
}

// allowed_token_ids spells only the start of the one choice: the row after
// it allows no token. With speculation that row is the last verification
// row of the step that keeps the drafts before it; the sample ends with the
// same error event as without speculation, beside an unconstrained request.
TEST_F(StoriesSpeculativeStructured, NoAllowedTokenOnAVerificationRowFailsTheSample) {
  if (on_cuda()) GTEST_SKIP() << "compares two engines' f32 runs";
  auto choice = compiler_->compile(
      {StructuredOutputSpec::Kind::kChoice, "", {" there was a little girl named Lily."}});
  ASSERT_TRUE(choice.ok()) << choice.error().message;
  const std::vector<int32_t> start = tok_->encode(" there was a little", false);
  ASSERT_GE(start.size(), 3u);
  std::vector<TestRequest> reqs;
  for (std::optional<uint64_t> seed : {std::optional<uint64_t>(), std::optional<uint64_t>(9)}) {
    SamplingParams p = params(seed);
    p.allowed_token_ids = start;
    reqs.push_back({seed ? "seeded" : "greedy", *prompt_, p, 0, *choice});
  }
  reqs.push_back({"plain", *prompt_, params(std::nullopt)});
  const EngineSetup plain{.model = stories_dir(), .jump_forward = false};
  const Run ref = run(plain, reqs);
  ASSERT_EQ(ref.logs.size(), reqs.size());
  uint64_t num_drafted_tokens = 0;  // after each request's first token
  for (size_t i = 0; i < 2; ++i) {
    const SampleLog& s = ref.logs[i]->samples[0];
    EXPECT_GE(s.tokens.size(), 3u) << reqs[i].id;
    EXPECT_EQ(std::string(" there was a little girl named Lily.").rfind(s.text, 0), 0u) << s.text;
    EXPECT_EQ(s.finish, FinishReason::kAbort) << reqs[i].id;
    EXPECT_NE(s.error.find("allowed_token_ids"), std::string::npos) << s.error;
    num_drafted_tokens += s.tokens.size() - 1;
  }
  EngineSetup s = plain;
  s.speculative.num_speculative_tokens = 4;
  s.proposer = proposer(Drafts::kRecorded, ref);
  const Run spec = run(s, reqs);
  expect_same(spec, ref, "recorded k=4");
  // The outputs' tokens after the first are drafted and kept.
  EXPECT_GE(spec.metrics.spec_num_accepted_tokens, num_drafted_tokens);
}

}  // namespace
}  // namespace pagoda::test
