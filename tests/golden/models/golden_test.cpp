// End-to-end: io's open_model + ModelRunner on the CPU backend against the
// Hugging Face transformers references in tests/data/golden/*.json (made by
// tools/make_golden.py), plus the stories260K llama2.c golden from shared/.
//
// Per golden case: greedy tokens identical up to the first step where the
// reference's top-2 margin is under tolerance.margin (a near-tie may flip;
// comparison stops there), and at every compared step the k-th largest of our
// top-20 logprobs within tolerance.logprob of the reference's k-th (ids must
// match unless the reference's neighbours are within 2 * tolerance). Then all
// prompts of a file run again as one ragged batch (chunked prefills mixed with
// decodes, other block size, reversed block order) and must give bit-identical
// tokens and logprobs to the single-prompt runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "greedy_driver.h"
#include "io/model_files.h"
#include "model/model_runner.h"

namespace pagoda::golden {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& path) {
  std::ifstream f(path);
  return json::parse(f);
}

// Where a golden file's model lives; empty when it is an optional input that
// is absent (with the reason in *why).
fs::path model_path(const json& model, std::string* why) {
  const std::string kind = model.at("kind"), rel = model.at("path");
  if (kind == "repo") return fs::path(PAGODA_SOURCE_DIR) / rel;
  if (kind == "shared") return fs::path(PAGODA_SHARED_DIR) / rel;
  const char* cache = std::getenv("PAGODA_CACHE");
  const char* home = std::getenv("HOME");
  fs::path root = cache ? fs::path(cache) : fs::path(home ? home : "/root") / ".cache" / "pagoda";
  fs::path p = root / rel;
  if (!fs::exists(p)) {
    *why = p.string() + " not present (scripts/fetch_default_model.sh fetches it)";
    return {};
  }
  return p;
}

struct Loaded {
  CpuBackend backend;
  OpenedModel model;
  std::unique_ptr<ModelRunner> runner;
};

// Opens the model and a runner with room for `num_seqs` sequences of
// `max_tokens` tokens at block size 7.
// `keep_blocks`: RunnerOptions::keep_weight_blocks.
std::unique_ptr<Loaded> load(const fs::path& path, int num_seqs, int max_tokens,
                             bool keep_blocks = true) {
  auto l = std::make_unique<Loaded>();
  Result<ModelLocation> where = resolve_model(path.string());
  EXPECT_TRUE(where.ok()) << (where.ok() ? "" : where.error().message);
  if (!where.ok()) return nullptr;
  Result<OpenedModel> opened = open_model(*where);
  EXPECT_TRUE(opened.ok()) << (opened.ok() ? "" : opened.error().message);
  if (!opened.ok()) return nullptr;
  l->model = std::move(opened).value();
  RunnerOptions o;
  o.block_size = 7;
  o.max_num_batched_tokens = 256;
  o.max_num_seqs = 8;
  o.max_model_len = std::min<int64_t>(l->model.config.max_position_embeddings, max_tokens);
  o.num_kv_blocks = num_seqs * blocks_for(max_tokens, o.block_size);
  o.keep_weight_blocks = keep_blocks;
  Result<std::unique_ptr<ModelRunner>> r =
      ModelRunner::create(l->backend, l->model.config, *l->model.weights, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  if (!r.ok()) return nullptr;
  l->runner = std::move(r).value();
  return l;
}

// Compares one case's records with the reference; returns the steps compared
// and prints the largest logprob difference seen.
int compare_to_reference(const json& c, const std::vector<StepRecord>& ours, double tol,
                         double margin_tol) {
  const json& greedy = c.at("greedy_ids");
  const json& tops = c.at("top_logprobs");
  int compared = 0;
  double max_diff = 0;
  for (size_t s = 0; s < greedy.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    const json& ref = tops[s];
    const StepRecord& got = ours[s];
    for (size_t k = 0; k < ref.size(); ++k) {
      const double ref_lp = ref[k][1];
      EXPECT_NEAR(got.top_logprobs[k], ref_lp, tol) << "rank " << k;
      max_diff = std::max(max_diff, std::abs(got.top_logprobs[k] - ref_lp));
      const bool tied_above = k > 0 && double(ref[k - 1][1]) - ref_lp <= 2 * tol;
      const bool tied_below = k + 1 < ref.size() && ref_lp - double(ref[k + 1][1]) <= 2 * tol;
      if (!tied_above && !tied_below) {
        EXPECT_EQ(got.top_ids[k], int(ref[k][0])) << "rank " << k;
      }
    }
    ++compared;
    if (got.token != int(greedy[s])) {
      const double margin = double(ref[0][1]) - double(ref[1][1]);
      EXPECT_LT(margin, margin_tol)
          << "greedy token " << got.token << " != reference " << int(greedy[s]);
      break;  // a near-tie flipped: the continuations differ from here on
    }
  }
  std::printf("    %d of %zu steps compared, max |logprob - reference| = %.2e\n", compared,
              greedy.size(), max_diff);
  return compared;
}

std::vector<std::string> golden_files() {
  std::vector<std::string> names;
  for (const auto& e :
       fs::directory_iterator(fs::path(PAGODA_SOURCE_DIR) / "tests" / "data" / "golden"))
    if (e.path().extension() == ".json" && e.path().stem() != "rope_tables")
      names.push_back(e.path().stem());
  std::sort(names.begin(), names.end());
  return names;
}

class Golden : public ::testing::TestWithParam<std::string> {};

// The golden files whose model is a .gguf file.
std::vector<std::string> gguf_golden_files() {
  std::vector<std::string> names;
  for (const std::string& name : golden_files()) {
    const json doc =
        read_json(fs::path(PAGODA_SOURCE_DIR) / "tests" / "data" / "golden" / (name + ".json"));
    const std::string path = doc.at("model").at("path");
    if (fs::path(path).extension() == ".gguf") names.push_back(name);
  }
  return names;
}

class GgufGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, GreedyAndLogprobsMatchTransformers) {
  const json doc =
      read_json(fs::path(PAGODA_SOURCE_DIR) / "tests" / "data" / "golden" / (GetParam() + ".json"));
  std::string why;
  const fs::path path = model_path(doc.at("model"), &why);
  if (path.empty()) GTEST_SKIP() << why;
  const double tol = doc.at("tolerance").at("logprob"),
               margin_tol = doc.at("tolerance").at("margin");
  const json& cases = doc.at("cases");
  std::vector<std::vector<int32_t>> prompts;
  int steps = 0, max_tokens = 0;
  for (const json& c : cases) {
    prompts.push_back(c.at("prompt_ids").get<std::vector<int32_t>>());
    steps = static_cast<int>(c.at("greedy_ids").size());
    max_tokens = std::max(max_tokens, static_cast<int>(prompts.back().size()) + steps);
  }
  auto l = load(path, static_cast<int>(prompts.size()), max_tokens);
  ASSERT_NE(l, nullptr);

  DriverOptions alone_opts;
  alone_opts.num_steps = steps;
  std::vector<std::vector<StepRecord>> alone(prompts.size());
  int compared = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    std::vector<std::vector<StepRecord>> one;
    const Status st = run_greedy(*l->runner, {prompts[i]}, alone_opts, &one);
    ASSERT_TRUE(st.ok()) << st.error().message;
    alone[i] = one[0];
    compared += compare_to_reference(cases[i], alone[i], tol, margin_tol);
  }
  // Near-ties are rare: most steps must have been compared.
  EXPECT_GE(compared, static_cast<int>(prompts.size()) * steps / 2);

  DriverOptions batch_opts = alone_opts;
  batch_opts.prefill_chunk = 5;
  batch_opts.token_budget = 9;
  batch_opts.reverse_blocks = true;
  std::vector<std::vector<StepRecord>> batched;
  const Status st = run_greedy(*l->runner, prompts, batch_opts, &batched);
  ASSERT_TRUE(st.ok()) << st.error().message;
  for (size_t i = 0; i < prompts.size(); ++i)
    for (int s = 0; s < steps; ++s) {
      ASSERT_EQ(batched[i][s].token, alone[i][s].token) << "case " << i << " step " << s;
      ASSERT_EQ(batched[i][s].top_ids, alone[i][s].top_ids) << "case " << i << " step " << s;
      ASSERT_EQ(0, std::memcmp(batched[i][s].top_logprobs.data(), alone[i][s].top_logprobs.data(),
                               alone[i][s].top_logprobs.size() * sizeof(float)))
          << "case " << i << " step " << s;
    }
}

// A quantized GGUF's linear weights kept in their blocks (the default) give
// bit-identical tokens and logprobs to dequantizing them at load: the CPU
// linear dequantizes each weight panel with the loader's dequantizer and runs
// the same f32 kernel. Every GGUF golden whose model has block-format tensors.
TEST_P(GgufGolden, KeptBlocksEqualDequantized) {
  const json doc =
      read_json(fs::path(PAGODA_SOURCE_DIR) / "tests" / "data" / "golden" / (GetParam() + ".json"));
  std::string why;
  const fs::path path = model_path(doc.at("model"), &why);
  if (path.empty()) GTEST_SKIP() << why;
  const json& cases = doc.at("cases");
  std::vector<std::vector<int32_t>> prompts;
  int max_tokens = 0;
  for (const json& c : cases) {
    prompts.push_back(c.at("prompt_ids").get<std::vector<int32_t>>());
    max_tokens = std::max(max_tokens, static_cast<int>(prompts.back().size()) + 16);
  }
  auto kept = load(path, static_cast<int>(prompts.size()), max_tokens, true);
  ASSERT_NE(kept, nullptr);
  bool any_blocks = false;
  for (const auto& [dtype, f] : kept->runner->weights().bytes_by_dtype)
    any_blocks = any_blocks || is_block_dtype(dtype);
  if (!any_blocks) GTEST_SKIP() << "no block-format weights in " << path;
  auto dequantized = load(path, static_cast<int>(prompts.size()), max_tokens, false);
  ASSERT_NE(dequantized, nullptr);
  for (const auto& [dtype, f] : dequantized->runner->weights().bytes_by_dtype)
    EXPECT_FALSE(is_block_dtype(dtype)) << dtype_name(dtype);
  EXPECT_LT(kept->runner->weights().num_bytes, dequantized->runner->weights().num_bytes);
  DriverOptions o;
  o.num_steps = 16;
  std::vector<std::vector<StepRecord>> a, b;
  Status st = run_greedy(*kept->runner, prompts, o, &a);
  ASSERT_TRUE(st.ok()) << st.error().message;
  st = run_greedy(*dequantized->runner, prompts, o, &b);
  ASSERT_TRUE(st.ok()) << st.error().message;
  for (size_t i = 0; i < prompts.size(); ++i)
    for (int s = 0; s < o.num_steps; ++s) {
      ASSERT_EQ(a[i][s].token, b[i][s].token) << "case " << i << " step " << s;
      ASSERT_EQ(0, std::memcmp(a[i][s].top_logprobs.data(), b[i][s].top_logprobs.data(),
                               b[i][s].top_logprobs.size() * sizeof(float)))
          << "case " << i << " step " << s;
    }
}

INSTANTIATE_TEST_SUITE_P(Files, Golden, ::testing::ValuesIn(golden_files()),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Files, GgufGolden, ::testing::ValuesIn(gguf_golden_files()),
                         [](const auto& info) { return info.param; });

// llama2.c's stories260K: 200 greedy tokens from BOS and reference logits,
// from shared/models/stories260K/golden_greedy.json (float64 numpy forward).
TEST(GoldenStories, LlamaCppGreedyAndLogits) {
  const fs::path dir = fs::path(PAGODA_SHARED_DIR) / "models" / "stories260K";
  const json g = read_json(dir / "golden_greedy.json");
  const auto expected = g.at("greedy_ids").get<std::vector<int32_t>>();
  auto l = load(dir, 1, static_cast<int>(expected.size()));
  ASSERT_NE(l, nullptr);
  DriverOptions o;
  o.num_steps = static_cast<int>(expected.size()) - 1;
  o.num_top_logprobs = 2;
  std::vector<std::vector<StepRecord>> out;
  const Status st =
      run_greedy(*l->runner, {g.at("prompt_ids").get<std::vector<int32_t>>()}, o, &out);
  ASSERT_TRUE(st.ok()) << st.error().message;
  for (size_t s = 1; s < expected.size(); ++s)
    ASSERT_EQ(out[0][s - 1].token, expected[s]) << "token " << s;

  const json& check = g.at("logits_check");
  const auto ids = check.at("input_ids").get<std::vector<int32_t>>();
  const int n = static_cast<int>(ids.size());
  StepBatch in;
  in.token_ids = ids;
  for (int i = 0; i < n; ++i) {
    in.positions.push_back(i);
    in.slot_mapping.push_back(i);  // blocks 0.. in order, block size 7
    in.logits_rows.push_back(i);
  }
  in.query_start_loc = {0, n};
  in.seq_lens = {n};
  in.max_blocks_per_seq = static_cast<int32_t>(blocks_for(n, 7));
  for (int b = 0; b < in.max_blocks_per_seq; ++b) in.block_tables.push_back(b);
  std::vector<float> logits;
  const Status st2 = l->runner->execute_logits(in, &logits);
  ASSERT_TRUE(st2.ok()) << st2.error().message;
  const int64_t v = l->model.config.vocab_size;
  const json& first8 = check.at("logits_first8_each_position");
  for (int p = 0; p < n; ++p)
    for (int i = 0; i < 8; ++i)
      EXPECT_NEAR(logits[p * v + i], double(first8[p][i]), 1e-4) << p << "," << i;
  for (const json& e : check.at("last_position_logits_top5"))
    EXPECT_NEAR(logits[(n - 1) * v + int(e[0])], double(e[1]), 1e-4);
}

}  // namespace
}  // namespace pagoda::golden
