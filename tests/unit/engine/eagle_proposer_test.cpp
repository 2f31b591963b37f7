// EagleProposer on the CPU (the specification) with stories260K as the
// target: greedy outputs are the target's whatever the head drafts (a
// random head; batches mixing speculative and plain requests; preemption in
// a tiny KV pool), and a head built to copy the target's own prediction
// gets drafts accepted on a repetitive text while a perturbed copy gets
// fewer -- each for an EAGLE-1 and an EAGLE-3 head (make_eagle3_head). Also
// EAGLE-3's head forward against a host f32 evaluation, and its target side:
// the aux hidden states on the test device against the CPU's.
#include "engine/eagle_proposer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "core/float_elements.h"
#include "core/log.h"
#include "eagle_test_heads.h"
#include "engine/backend_factory.h"
#include "engine/eagle_head.h"
#include "engine_harness.h"
#include "io/model_files.h"
#include "io/model_location.h"
#include "model/eagle3.h"
#include "scratch_dir.h"
#include "spec/spec_config.h"

namespace pagoda::test {
namespace {

namespace fs = std::filesystem;

class EagleTest : public testing::Test {
 protected:
  static void SetUpTestSuite() { set_log_level(LogLevel::kError); }

  // The two engine tests below, for "method" eagle or eagle3.
  void random_head_keeps_greedy_outputs(const char* method);
  void copying_head_is_accepted(const char* method);
  void copying_head_drafts_last_token(const char* method);

  // Prompts of stories260K text, one of them a repeated phrase.
  static std::vector<TestRequest> requests(int count, int max_tokens, bool mix_plain) {
    std::unique_ptr<Tokenizer> tok = Tokenizer::load(stories_dir()).value();
    const std::vector<std::string> texts = {
        "Once upon a time", "Lily and Ben went to the park. They saw a big",
        "The dog ran and ran and ran and ran and ran and ran and ran and ran and",
        "One day, a boy named Tim found a shiny rock in the garden. He wanted to show it to his "
        "mom, so he ran inside the house. His mom was",
        "She saw a big, red ball."};
    std::vector<TestRequest> out;
    for (int i = 0; i < count; ++i) {
      TestRequest r;
      r.id = "r" + std::to_string(i);
      r.prompt = tok->encode(texts[static_cast<size_t>(i) % texts.size()]);
      r.prompt.push_back(20 + i);  // distinct prompts: no prefix-cache hits between them
      r.params = greedy_params(max_tokens);
      r.speculative = !(mix_plain && i % 3 == 1);
      out.push_back(r);
    }
    return out;
  }

  // The f32 reference's greedy continuation of each request (EOS id 2).
  static std::vector<RefSample> reference(ReferenceModel& ref,
                                          const std::vector<TestRequest>& reqs) {
    static const std::vector<int32_t> eos = {2};
    std::vector<RefSample> out;
    for (const TestRequest& r : reqs)
      out.push_back(ref.sample(r.prompt, r.params, eos, 0, r.params.max_tokens.value()));
    return out;
  }

  static std::vector<std::vector<int32_t>> run(const EngineSetup& s,
                                               const std::vector<TestRequest>& reqs,
                                               EngineMetrics* metrics = nullptr) {
    auto engine = start_engine(s);
    EXPECT_NE(engine, nullptr);
    if (engine == nullptr) return {};
    auto logs = run_all(*engine, reqs);
    std::vector<std::vector<int32_t>> tokens;
    for (const auto& log : logs) {
      expect_complete(*log);
      tokens.push_back(log->samples[0].tokens);
    }
    expect_idle_and_empty(*engine);
    if (metrics != nullptr) *metrics = engine->metrics();
    expect_consistent_metrics(engine->metrics());
    return tokens;
  }
};

// A random head: the greedy outputs equal the reference's (engine_harness.h's
// device contract: exactly on the CPU, up to bf16 near-ties on CUDA, where a
// verification row rounds unlike a decode row) for k = 1 and 4, async
// scheduling on and off, a batch mixing speculative and plain requests,
// 7-token prefill chunks, and a tiny KV pool that preempts.
// EAGLE-1 and EAGLE-3 heads alike.
TEST_F(EagleTest, RandomHeadKeepsGreedyOutputs) {
  for (const char* method : {"eagle", "eagle3"}) {
    SCOPED_TRACE(method);
    random_head_keeps_greedy_outputs(method);
  }
}

void EagleTest::random_head_keeps_greedy_outputs(const char* method) {
  ScratchDir dir;
  if (std::string(method) == "eagle3")
    make_eagle3_head(dir.path(), {});
  else
    make_head(dir.path(), {});
  const std::vector<TestRequest> reqs = requests(10, 40, /*mix_plain=*/true);
  std::unique_ptr<ReferenceModel> ref = ReferenceModel::load(stories_dir());
  const std::vector<RefSample> want = reference(*ref, reqs);
  ReferenceCheck check(ref.get(), std::string(method) + " random head");
  for (int k : {1, 4}) {
    for (bool async : {true, false}) {
      for (bool tiny : {false, true}) {
        const std::string what =
            "k=" + std::to_string(k) + (async ? " async" : " sync") + (tiny ? " tiny pool" : "");
        EngineSetup s{.model = stories_dir()};
        s.async_scheduling = async;
        if (tiny) {
          s.num_kv_blocks = 12;  // 192 tokens for 10 sequences of up to ~80: preemption
          s.max_chunk_tokens = 7;
        }
        s.speculative = eagle_config(dir.path(), k, method);
        EngineMetrics m;
        const std::vector<std::vector<int32_t>> got = run(s, reqs, &m);
        ASSERT_EQ(got.size(), want.size()) << what;
        for (size_t i = 0; i < got.size(); ++i)
          check.expect_tokens(got[i], want[i], what + " request " + std::to_string(i));
        EXPECT_GT(m.spec_num_draft_tokens, 0u) << what;
        if (tiny) EXPECT_GT(m.num_preemptions, 0u) << what;
      }
    }
  }
}

// The copying head (draft = the target's greedy token one position back)
// is accepted on a repeating text; with fc perturbed it is accepted less.
// EAGLE-1 and EAGLE-3 heads alike.
TEST_F(EagleTest, CopyingHeadIsAcceptedAndPerturbedHeadLess) {
  for (const char* method : {"eagle", "eagle3"}) {
    SCOPED_TRACE(method);
    copying_head_is_accepted(method);
  }
}

void EagleTest::copying_head_is_accepted(const char* method) {
  ScratchDir good, bad;
  if (std::string(method) == "eagle3") {
    make_eagle3_head(good.path(), {.copy = true});
    make_eagle3_head(bad.path(), {.copy = true, .noise = 0.5f, .seed = 7});
  } else {
    make_head(good.path(), {.copy = true});
    make_head(bad.path(), {.copy = true, .noise = 0.5f, .seed = 7});
  }
  // Prompts repeating one token: the target's greedy output often repeats too.
  std::vector<TestRequest> reqs;
  for (int32_t t = 30; t < 512; t += 16) {
    TestRequest r;
    r.id = "rep" + std::to_string(t);
    r.prompt.assign(24, t);
    r.params = greedy_params(60);
    reqs.push_back(r);
  }
  std::unique_ptr<ReferenceModel> ref = ReferenceModel::load(stories_dir());
  const std::vector<RefSample> want = reference(*ref, reqs);
  ReferenceCheck check(ref.get(), "eagle copying head");
  uint64_t accepted[2] = {0, 0};
  for (int which : {0, 1}) {
    EngineSetup s{.model = stories_dir()};
    s.speculative = eagle_config(which == 0 ? good.path() : bad.path(), 3, method);
    EngineMetrics m;
    const std::vector<std::vector<int32_t>> got = run(s, reqs, &m);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      check.expect_tokens(got[i], want[i],
                          "head " + std::to_string(which) + " request " + std::to_string(i));
    accepted[which] = m.spec_num_accepted_tokens;
  }
  EXPECT_GT(accepted[0], 0u);
  EXPECT_LT(accepted[1], accepted[0]);
  std::printf("%s accepted drafts: copying head %llu, perturbed %llu\n", method,
              static_cast<unsigned long long>(accepted[0]),
              static_cast<unsigned long long>(accepted[1]));
}

// The proposer itself against a target runner it is handed rows of: the
// copying head's drafts after a prefill are the target's greedy token
// repeated (the head read the hidden row of the last prompt position:
// a row one position off would give another token), for several sequences
// of one batch; a perturbed copy drafts something else for some of them.
// EAGLE-3 (its copying head reads the target's aux rows, chains its own
// pre-norm output and maps through d2t) as EAGLE-1.
TEST_F(EagleTest, CopyingHeadDraftsTheTargetsLastToken) {
  for (const char* method : {"eagle", "eagle3"}) {
    SCOPED_TRACE(method);
    copying_head_drafts_last_token(method);
  }
}

void EagleTest::copying_head_drafts_last_token(const char* method) {
  const bool eagle3 = std::string(method) == "eagle3";
  ScratchDir good, bad;
  if (eagle3) {
    make_eagle3_head(good.path(), {.copy = true});
    make_eagle3_head(bad.path(), {.copy = true, .noise = 0.5f, .seed = 7});
  } else {
    make_head(good.path(), {.copy = true});
    make_head(bad.path(), {.copy = true, .noise = 0.5f, .seed = 7});
  }
  Result<ModelLocation> loc = resolve_model(stories_dir());
  ASSERT_TRUE(loc.ok());
  Result<OpenedModel> opened = open_model(*loc);
  ASSERT_TRUE(opened.ok());
  std::unique_ptr<Backend> backend = create_backend("cpu", opened->config).value();
  RunnerOptions ro;
  ro.num_kv_blocks = 64;
  ro.max_num_batched_tokens = 256;
  ro.max_num_seqs = 8;
  if (eagle3) ro.aux_hidden_layers = {5, 1, 3};  // make_eagle3_head's copy
  std::unique_ptr<ModelRunner> target =
      ModelRunner::create(*backend, opened->config, *opened->weights, ro).value();
  std::unique_ptr<Tokenizer> tok = Tokenizer::load(stories_dir()).value();
  const std::vector<std::string> texts = {"Once upon a time", "The little dog was sad because",
                                          "Lily and Ben went to the park. They saw a big"};
  // One prefill of every prompt, sequence s in blocks [4s, 4s + 4).
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& t : texts) prompts.push_back(tok->encode(t));
  const StepBatch step = greedy_step(prompts);
  int differing = 0;
  for (const fs::path& head : {good.path(), bad.path()}) {
    EngineOptions o;
    o.device = "cpu";
    o.speculative = eagle_config(head, 3, method);
    o.max_num_seqs = 8;
    o.max_num_batched_tokens = 256;
    Result<std::unique_ptr<EagleProposer>> eagle =
        EagleProposer::create(o, {"stories260K", nullptr, 512, 512, 1024, 64, target.get()});
    ASSERT_TRUE(eagle.ok()) << eagle.error().message;
    SampleOutput out;
    ASSERT_TRUE(target->execute(step, &out).ok());
    const Tensor hidden = target->hidden_states();
    const size_t row_bytes = 64 * sizeof(float);
    if (eagle3) {  // the step's rows of each aux layer ([3, 256, 64])
      const Tensor aux = target->aux_hidden_states();
      std::vector<Tensor> views;
      for (int64_t j = 0; j < 3; ++j)
        views.push_back(Tensor(static_cast<char*>(aux.data) + j * 256 * row_bytes, aux.dtype,
                               {static_cast<int64_t>(step.num_tokens()), 64}));
      (*eagle)->on_aux_hidden_states(views);
    }
    std::vector<std::vector<int32_t>> seqs;
    std::vector<DraftInput> inputs;
    for (size_t s = 0; s < prompts.size(); ++s) {
      const int32_t first = step.query_start_loc[s];
      const int64_t n = static_cast<int64_t>(prompts[s].size());
      (*eagle)->on_hidden_states(
          static_cast<int64_t>(s), 0,
          Tensor(static_cast<char*>(hidden.data) + first * row_bytes, hidden.dtype, {n, 64}),
          eagle3 ? first : -1, {prompts[s], {}});
      seqs.push_back(prompts[s]);
      seqs.back().push_back(out.token_ids[s]);
    }
    for (size_t s = 0; s < seqs.size(); ++s)
      inputs.push_back(
          {static_cast<int64_t>(s), seqs[s], static_cast<int32_t>(prompts[s].size()), 3});
    std::vector<std::vector<int32_t>> drafts;
    ASSERT_TRUE((*eagle)->propose(inputs, drafts).ok());
    ASSERT_EQ(drafts.size(), seqs.size());
    for (size_t s = 0; s < seqs.size(); ++s) {
      const std::vector<int32_t> copy(3, seqs[s].back());
      if (head == good.path())
        EXPECT_EQ(drafts[s], copy) << "sequence " << s;
      else
        differing += drafts[s] != copy;
    }
  }
  EXPECT_GT(differing, 0);
}

// Host f32 helpers for the head reference below: y = W x for W [rows, cols]
// row-major reading cols of x; rms_norm(x) * w.
std::vector<float> matvec(const std::vector<float>& w, int64_t rows, const std::vector<float>& x) {
  const int64_t cols = static_cast<int64_t>(x.size());
  std::vector<float> y(static_cast<size_t>(rows), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (int64_t c = 0; c < cols; ++c) acc += double(w[r * cols + c]) * x[c];
    y[r] = static_cast<float>(acc);
  }
  return y;
}

std::vector<float> rms_norm(const std::vector<float>& x, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (float v : x) ss += double(v) * v;
  const double inv = 1.0 / std::sqrt(ss / x.size() + eps);
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(x[i] * inv * w[i]);
  return y;
}

// model/eagle3's forward over one sequence of 5 tokens (ids on both sides
// of the draft vocabulary, since they are the target's) with random hidden
// inputs g in the pool, against a host f32 evaluation of eagle_head.h's
// formula from load_eagle3_head's weights: 2H-wide q/k/v over
// [input_layernorm(e) | hidden_norm(g)], RoPE (rotate-half), causal GQA
// attention, the residual from g, the MLP, norm and the Vd-wide lm_head.
// On PAGODA_TEST_DEVICE: exact to f32 rounding on the CPU; on CUDA within
// bf16 rounding (weights, pool rows and activations in bf16).
TEST_F(EagleTest, Eagle3HeadForwardMatchesAHostReference) {
  ScratchDir dir;
  make_eagle3_head(dir.path(), {.seed = 3});
  Result<OpenedModel> target_model = open_model(resolve_model(stories_dir()).value());
  ASSERT_TRUE(target_model.ok());
  const ModelConfig& tc = target_model->config;
  Result<OpenedModel> head_model = open_model(resolve_model(dir.path().string()).value());
  ASSERT_TRUE(head_model.ok()) << head_model.error().message;
  std::ifstream in(dir.path() / "config.json");
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const EagleHeadTarget ht{"stories260K", tc.hidden_size, tc.vocab_size, tc.num_layers};
  Result<Eagle3Fields> fields = parse_eagle3_fields(json, ht);
  ASSERT_TRUE(fields.ok()) << fields.error().message;
  Result<Eagle3Head> head = load_eagle3_head(head_model->config, *fields, *head_model->weights, ht);
  ASSERT_TRUE(head.ok()) << head.error().message;

  std::unique_ptr<Backend> backend = create_backend(test_device(), tc).value();
  RunnerOptions tro;
  tro.num_kv_blocks = 8;
  std::unique_ptr<ModelRunner> target =
      ModelRunner::create(*backend, tc, *target_model->weights, tro).value();
  ModelConfig hc = head_model->config;
  hc.vocab_size = fields->draft_vocab_size;
  RunnerOptions ro;
  ro.architecture = &eagle3_architecture();
  ro.shared_globals = &target->weights();
  ro.input_vocab_size = tc.vocab_size;
  ro.num_kv_blocks = 4;
  ro.max_num_batched_tokens = 32;
  ro.max_num_seqs = 2;
  Result<std::unique_ptr<ModelRunner>> r =
      ModelRunner::create(*backend, hc, *head_model->weights, ro);
  ASSERT_TRUE(r.ok()) << r.error().message;

  const int64_t h = hc.hidden_size, d = hc.head_dim, nq = hc.num_heads, nkv = hc.num_kv_heads;
  const int64_t vd = hc.vocab_size, inter = hc.intermediate_size;
  const std::vector<int32_t> ids = {5, 300, 17, 480, 256};
  const int64_t t = static_cast<int64_t>(ids.size());
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> g(static_cast<size_t>(t), std::vector<float>(h));
  for (auto& row : g)
    for (float& x : row) x = normal(rng);
  const Tensor pool = (*r)->hidden_pool();
  StepBatch step;
  step.query_start_loc = {0, static_cast<int32_t>(t)};
  const size_t es = dtype_size(pool.dtype);
  std::vector<char> g_rows(static_cast<size_t>(t * h) * es);
  for (int64_t i = 0; i < t; ++i) {  // position i at slot i (block 0); its g at pool row i
    for (int64_t c = 0; c < h; ++c) {
      store_float_element(pool.dtype, g_rows.data(), i * h + c, g[i][c]);
      g[i][c] = load_float_element(pool.dtype, g_rows.data(), i * h + c);  // as stored
    }
    step.token_ids.push_back(ids[i]);
    step.positions.push_back(static_cast<int32_t>(i));
    step.slot_mapping.push_back(static_cast<int32_t>(i));
    step.logits_rows.push_back(static_cast<int32_t>(i));
  }
  backend->copy_to_device(pool.data, g_rows.data(), g_rows.size());
  step.seq_lens = {static_cast<int32_t>(t)};
  step.block_tables = {0};
  step.max_blocks_per_seq = 1;
  std::vector<float> logits;
  ASSERT_TRUE((*r)->execute_logits(step, &logits).ok());
  ASSERT_EQ(static_cast<int64_t>(logits.size()), t * vd);

  const std::vector<float> embed = target_tensor("model.embed_tokens.weight");
  const Eagle3Head& w = *head;
  std::vector<std::vector<float>> q(t), k(t), v(t);
  for (int64_t i = 0; i < t; ++i) {
    std::vector<float> e(embed.begin() + ids[i] * h, embed.begin() + (ids[i] + 1) * h);
    std::vector<float> x = rms_norm(e, w.input_norm, hc.rms_norm_eps);
    const std::vector<float> n = rms_norm(g[i], w.hidden_norm, hc.rms_norm_eps);
    x.insert(x.end(), n.begin(), n.end());  // [e | n], 2H
    q[i] = matvec(w.q_proj, nq * d, x);
    k[i] = matvec(w.k_proj, nkv * d, x);
    v[i] = matvec(w.v_proj, nkv * d, x);
    for (std::vector<float>* part : {&q[i], &k[i]}) {  // rotate-half RoPE at position i
      for (int64_t head0 = 0; head0 < static_cast<int64_t>(part->size()); head0 += d) {
        for (int64_t j = 0; j < d / 2; ++j) {
          const double angle = i * std::pow(hc.rope_theta, -2.0 * j / d);
          float& a = (*part)[head0 + j];
          float& b = (*part)[head0 + j + d / 2];
          const float a0 = a, b0 = b;
          a = static_cast<float>(a0 * std::cos(angle) - b0 * std::sin(angle));
          b = static_cast<float>(b0 * std::cos(angle) + a0 * std::sin(angle));
        }
      }
    }
  }
  int64_t max_i = 0;
  double max_err = 0;
  for (int64_t i = 0; i < t; ++i) {
    std::vector<float> attn(static_cast<size_t>(nq * d), 0.0f);
    for (int64_t hq = 0; hq < nq; ++hq) {
      const int64_t hk = hq / (nq / nkv);
      std::vector<double> score;
      double top = -1e30;
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (int64_t c = 0; c < d; ++c) dot += double(q[i][hq * d + c]) * k[j][hk * d + c];
        score.push_back(dot / std::sqrt(double(d)));
        top = std::max(top, score.back());
      }
      double sum = 0;
      for (double& sc : score) sum += (sc = std::exp(sc - top));
      for (int64_t j = 0; j <= i; ++j)
        for (int64_t c = 0; c < d; ++c)
          attn[hq * d + c] += static_cast<float>(score[j] / sum * v[j][hk * d + c]);
    }
    std::vector<float> res = matvec(w.o_proj, h, attn);
    for (int64_t c = 0; c < h; ++c) res[c] += g[i][c];
    const std::vector<float> pn = rms_norm(res, w.post_attn_norm, hc.rms_norm_eps);
    const std::vector<float> gate = matvec(w.gate_proj, inter, pn);
    const std::vector<float> up = matvec(w.up_proj, inter, pn);
    std::vector<float> act(static_cast<size_t>(inter));
    for (int64_t c = 0; c < inter; ++c) act[c] = gate[c] / (1.0f + std::exp(-gate[c])) * up[c];
    const std::vector<float> down = matvec(w.down_proj, h, act);
    for (int64_t c = 0; c < h; ++c) res[c] += down[c];
    const std::vector<float> want = matvec(w.lm_head, vd, rms_norm(res, w.norm, hc.rms_norm_eps));
    for (int64_t c = 0; c < vd; ++c) {
      const double err = std::abs(logits[i * vd + c] - want[c]);
      if (err > max_err) max_err = err, max_i = i;
      const double tol =
          on_cuda() ? 0.05 + 0.03 * std::abs(want[c]) : 1e-3 + 1e-3 * std::abs(want[c]);
      ASSERT_NEAR(logits[i * vd + c], want[c], tol) << "row " << i << " draft id " << c;
    }
  }
  std::printf("eagle3 head forward: max |logit error| %.2e (row %lld)\n", max_err,
              static_cast<long long>(max_i));
}

// EAGLE-3's target side (RunnerOptions::aux_hidden_layers) on the test
// device, decode graphs on: a batched prefill and a decode step leave the
// same aux rows as the f32 CPU runner (exact on the CPU; on CUDA within
// bf16 rounding of the residual stream).
TEST_F(EagleTest, TargetAuxHiddenStatesMatchTheCpuOnTheTestDevice) {
  Result<ModelLocation> loc = resolve_model(stories_dir());
  ASSERT_TRUE(loc.ok());
  Result<OpenedModel> opened = open_model(*loc);
  ASSERT_TRUE(opened.ok());
  RunnerOptions ro;
  ro.num_kv_blocks = 64;
  ro.max_num_batched_tokens = 256;
  ro.max_num_seqs = 8;
  ro.aux_hidden_layers = {4, 0, 2};
  std::unique_ptr<Tokenizer> tok = Tokenizer::load(stories_dir()).value();
  const std::vector<std::string> texts = {"Once upon a time", "The little dog was sad because",
                                          "Lily and Ben went to the park. They saw a big"};
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& t : texts) prompts.push_back(tok->encode(t));
  // Step 0: every prompt (sequence s in blocks [4s, 4s + 4)); step 1: one
  // token more each (a decode batch: a graph replay on CUDA).
  // The aux rows [3][T][H] of each step as f32 on the host.
  auto run = [&](const std::string& device) {
    std::unique_ptr<Backend> backend = create_backend(device, opened->config).value();
    std::unique_ptr<ModelRunner> r =
        ModelRunner::create(*backend, opened->config, *opened->weights, ro).value();
    std::vector<std::vector<float>> out;
    for (bool decode : {false, true}) {
      const StepBatch step = decode ? greedy_step(prompts, 13) : greedy_step(prompts);
      SampleOutput sampled;
      EXPECT_TRUE(r->execute(step, &sampled).ok());
      backend->synchronize();
      const Tensor aux = r->aux_hidden_states();
      const int64_t t = step.num_tokens(), h = aux.dim(2);
      const size_t es = dtype_size(aux.dtype);
      std::vector<char> raw(static_cast<size_t>(aux.dim(0) * aux.dim(1) * h) * es);
      backend->copy_to_host(raw.data(), aux.data, raw.size());
      std::vector<float> rows;
      for (int64_t j = 0; j < aux.dim(0); ++j)
        for (int64_t i = 0; i < t * h; ++i)
          rows.push_back(load_float_element(aux.dtype, raw.data(), j * aux.dim(1) * h + i));
      out.push_back(std::move(rows));
    }
    return out;
  };
  const std::vector<std::vector<float>> want = run("cpu"), got = run(test_device());
  ASSERT_EQ(got.size(), want.size());
  // Layers 4 and 0 (the embedding) differ: the rows are the named layers'.
  const size_t t0h = want[0].size() / 3;
  EXPECT_FALSE(std::equal(want[0].begin(), want[0].begin() + t0h, want[0].begin() + t0h));
  // The device keeps the residual stream in bf16, so rows are compared by
  // their relative L2 error (an element of a row can be off by several bf16
  // steps of the row's scale); each layer's rows against another layer's
  // rows are far apart, so a wrong layer or row fails.
  const int64_t h = opened->config.hidden_size;
  auto rel = [&](const std::vector<float>& g, size_t go, const std::vector<float>& w, size_t wo) {
    double d = 0, n = 0;
    for (int64_t c = 0; c < h; ++c) {
      d += std::pow(g[go + c] - w[wo + c], 2.0);
      n += std::pow(w[wo + c], 2.0);
    }
    return std::sqrt(d / std::max(n, 1e-30));
  };
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_EQ(got[k].size(), want[k].size());
    const size_t layer = want[k].size() / 3;
    double worst = 0, closest_other = 1e9;
    for (size_t j = 0; j < 3; ++j)
      for (size_t r = 0; r < layer; r += h) {
        worst = std::max(worst, rel(got[k], j * layer + r, want[k], j * layer + r));
        closest_other =
            std::min(closest_other, rel(got[k], j * layer + r, want[k], ((j + 1) % 3) * layer + r));
      }
    std::printf("[ %8s ] aux rows, %s: worst relative L2 error %.4f, closest other layer %.3f\n",
                test_device().c_str(), k == 0 ? "prefill" : "decode", worst, closest_other);
    EXPECT_LE(worst, 0.05) << (k == 0 ? "prefill" : "decode");
    EXPECT_GT(closest_other, 0.2) << (k == 0 ? "prefill" : "decode");
  }
}

// A head that is not the target's shape is refused at start.
TEST_F(EagleTest, RefusesHeadOfAnotherShape) {
  ScratchDir dir;
  make_head(dir.path(), {});
  nlohmann::json config;
  {
    std::ifstream in(dir.path() / "config.json");
    config = nlohmann::json::parse(in);
  }
  config["hidden_size"] = 32;
  std::ofstream(dir.path() / "config.json") << config.dump();
  EngineOptions o;
  o.model = stories_dir();
  o.device = "cpu";
  o.speculative = eagle_config(dir.path(), 2);
  Result<EngineParts> parts = load_engine_parts(o);
  ASSERT_FALSE(parts.ok());
  EXPECT_NE(parts.error().message.find("hidden size"), std::string::npos) << parts.error().message;
}

}  // namespace
}  // namespace pagoda::test
