// In-process bench runners against a fake Engine with a known token
// schedule, and the model arithmetic against published parameter counts.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "bench/inproc/engine_bench.h"
#include "bench/inproc/inproc_report.h"
#include "bench/inproc/model_cost.h"

namespace pagoda::bench {
namespace {

// A compiled constraint the fake engine hands out (never started: the fake
// does not sample).
class FakeConstraint : public CompiledConstraint {
 public:
  std::unique_ptr<TokenConstraint> start() const override { return nullptr; }
};

// Emits the first token `ttft` after add_request, then one token every
// `itl`, up to max_tokens; refuses the request numbered `refuse_at`.
// Compiles json_object specs (counted) and refuses every other kind.
class FakeEngine : public Engine {
 public:
  FakeEngine(std::chrono::milliseconds ttft, std::chrono::milliseconds itl, int refuse_at = -1)
      : ttft_(ttft), itl_(itl), refuse_at_(refuse_at) {
    info_.served_model_name = "fake";
    info_.vocab_size = 100;
    info_.device = "cpu (fake)";
  }
  ~FakeEngine() override { drain(); }

  Status add_request(GenerateRequest request) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (num_added_++ == refuse_at_) return make_error(ErrorCode::kResourceExhausted, "queue full");
    prompts_.push_back(request.prompt_token_ids);
    constraints_.push_back(request.constraint);
    auto stop = std::make_shared<std::atomic<bool>>(false);
    stops_[request.request_id] = stop;
    threads_.emplace_back(
        [this, r = std::move(request), stop]() mutable { serve(std::move(r), *stop); });
    return Status::Ok();
  }
  void abort(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = stops_.find(id); it != stops_.end()) it->second->store(true);
    ++num_aborted_;
  }
  const Tokenizer& tokenizer() const override { throw std::logic_error("not used by the benches"); }
  bool has_chat_template() const override { return false; }
  Result<std::string> apply_chat_template(const ChatTemplateInputs&) const override {
    return make_error(ErrorCode::kUnsupported, "no template");
  }
  const ModelInfo& info() const override { return info_; }
  EngineMetrics metrics() const override { return {}; }
  Result<std::shared_ptr<const CompiledConstraint>> compile_constraint(
      const StructuredOutputSpec& spec) const override {
    if (spec.kind != StructuredOutputSpec::Kind::kJsonObject)
      return Error{ErrorCode::kInvalidArgument, "json_schema at '': uniqueItems: unsupported"};
    ++num_compiled_;
    return std::shared_ptr<const CompiledConstraint>(std::make_shared<FakeConstraint>());
  }
  void drain() override {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

  std::vector<std::vector<int32_t>> prompts() {
    std::lock_guard<std::mutex> lock(mu_);
    return prompts_;
  }
  int num_aborted() {
    std::lock_guard<std::mutex> lock(mu_);
    return num_aborted_;
  }
  std::vector<std::shared_ptr<const CompiledConstraint>> constraints() {
    std::lock_guard<std::mutex> lock(mu_);
    return constraints_;
  }
  int num_compiled() const { return num_compiled_.load(); }

 private:
  void serve(GenerateRequest r, std::atomic<bool>& stop) {
    auto next = std::chrono::steady_clock::now() + ttft_;
    for (int64_t n = 1; n <= r.params.max_tokens; ++n) {
      std::this_thread::sleep_until(next);
      RequestOutput out;
      out.request_id = r.request_id;
      out.num_prompt_tokens = static_cast<int64_t>(r.prompt_token_ids.size());
      if (stop.load()) {
        out.finish_reason = FinishReason::kAbort;
        r.sink(std::move(out));
        return;
      }
      out.token_ids = {static_cast<int32_t>(n)};
      out.num_output_tokens = n;
      if (n == r.params.max_tokens) out.finish_reason = FinishReason::kLength;
      r.sink(std::move(out));
      next += itl_;
    }
  }

  std::chrono::milliseconds ttft_, itl_;
  int refuse_at_;
  ModelInfo info_;
  std::mutex mu_;
  int num_added_ = 0, num_aborted_ = 0;
  std::vector<std::vector<int32_t>> prompts_;
  std::vector<std::shared_ptr<const CompiledConstraint>> constraints_;
  mutable std::atomic<int> num_compiled_{0};
  std::map<std::string, std::shared_ptr<std::atomic<bool>>> stops_;
  std::vector<std::thread> threads_;
};

TEST(InprocBench, BenchRequestsAreGreedyExactLength) {
  SamplingParams p = bench_sampling_params(17);
  EXPECT_EQ(p.max_tokens, 17);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(p.temperature, 0.0f);
}

TEST(InprocBench, LatencyFollowsTheEngineSchedule) {
  FakeEngine engine(std::chrono::milliseconds(40), std::chrono::milliseconds(10));
  LatencyBenchOptions o;
  o.input_len = 8;
  o.output_len = 5;
  o.batch_size = 2;
  o.num_iters = 3;
  o.num_warmup = 1;
  auto r = run_latency_bench(engine, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->ttft_s.size(), 3u);
  EXPECT_EQ(r->min_output_tokens, 5);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(r->ttft_s[i], 0.040, 0.025);
    EXPECT_NEAR(r->tpot_s[i], 0.010, 0.006);
    EXPECT_NEAR(r->latency_s[i], 0.080, 0.035);
  }
  auto prompts = engine.prompts();
  ASSERT_EQ(prompts.size(), 8u);  // (1 warm-up + 3) iterations x batch 2
  for (const auto& p : prompts) {
    ASSERT_EQ(p.size(), 8u);
    for (int32_t id : p) ASSERT_TRUE(id >= 0 && id < 100);
  }
  EXPECT_NE(prompts[0], prompts[2]) << "fresh prompts per iteration (no prefix-cache hits)";
}

TEST(InprocBench, ThroughputCountsEveryToken) {
  FakeEngine engine(std::chrono::milliseconds(5), std::chrono::milliseconds(1));
  ThroughputBenchOptions o;
  o.num_prompts = 6;
  o.input_len = 10;
  o.output_len = 4;
  o.range_ratio = 0.5;
  auto r = run_throughput_bench(engine, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  int64_t prompt_tokens = 0;
  for (const auto& p : engine.prompts()) prompt_tokens += static_cast<int64_t>(p.size());
  EXPECT_EQ(r->num_requests, 6);
  EXPECT_EQ(r->num_prompt_tokens, prompt_tokens);
  EXPECT_GE(r->num_output_tokens, 6 * 2);  // lengths in [2, 6]
  EXPECT_LE(r->num_output_tokens, 6 * 6);
  EXPECT_GT(r->elapsed_s, 0.005);
  auto j = throughput_report(o, *r, "fake", "cpu");
  EXPECT_DOUBLE_EQ(j["output_tok_s"].get<double>(),
                   static_cast<double>(r->num_output_tokens) / r->elapsed_s);
  EXPECT_DOUBLE_EQ(j["total_tok_s"].get<double>(),
                   static_cast<double>(r->num_output_tokens + prompt_tokens) / r->elapsed_s);
}

TEST(InprocBench, ConstraintIsCompiledOnceAndAttachedToEveryRequest) {
  FakeEngine engine(std::chrono::milliseconds(1), std::chrono::milliseconds(1));
  ThroughputBenchOptions o;
  o.num_prompts = 5;
  o.input_len = 4;
  o.output_len = 2;
  o.constraint = StructuredOutputSpec{};  // json_object
  ASSERT_TRUE(run_throughput_bench(engine, o).ok());
  EXPECT_EQ(engine.num_compiled(), 1);
  auto constraints = engine.constraints();
  ASSERT_EQ(constraints.size(), 5u);
  for (const auto& c : constraints) {
    EXPECT_NE(c, nullptr);
    EXPECT_EQ(c, constraints[0]);
  }
  LatencyBenchOptions l;
  l.input_len = 4;
  l.output_len = 2;
  l.num_iters = 1;
  l.num_warmup = 0;
  l.constraint = StructuredOutputSpec{};
  ASSERT_TRUE(run_latency_bench(engine, l).ok());
  EXPECT_EQ(engine.num_compiled(), 2);
  EXPECT_NE(engine.constraints().back(), nullptr);
}

TEST(InprocBench, NoConstraintByDefault) {
  FakeEngine engine(std::chrono::milliseconds(1), std::chrono::milliseconds(1));
  ThroughputBenchOptions o;
  o.num_prompts = 2;
  o.input_len = 4;
  o.output_len = 2;
  ASSERT_TRUE(run_throughput_bench(engine, o).ok());
  EXPECT_EQ(engine.num_compiled(), 0);
  for (const auto& c : engine.constraints()) EXPECT_EQ(c, nullptr);
}

TEST(InprocBench, ConstraintCompileErrorAddsNoRequest) {
  FakeEngine engine(std::chrono::milliseconds(1), std::chrono::milliseconds(1));
  ThroughputBenchOptions o;
  o.num_prompts = 3;
  o.input_len = 4;
  o.output_len = 2;
  o.constraint =
      StructuredOutputSpec{StructuredOutputSpec::Kind::kJsonSchema, R"({"uniqueItems": true})", {}};
  auto r = run_throughput_bench(engine, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("uniqueItems"), std::string::npos) << r.error().message;
  EXPECT_TRUE(engine.prompts().empty());
}

TEST(InprocBench, RefusalAbortsTheRequestsAlreadyAdded) {
  FakeEngine engine(std::chrono::milliseconds(200), std::chrono::milliseconds(1), /*refuse_at=*/2);
  auto r = run_engine_batch(engine, {{1}, {2}, {3}}, {50, 50, 50}, "x-");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(r.error().message.find("request 2 refused"), std::string::npos);
  EXPECT_EQ(engine.num_aborted(), 2);
}

ModelConfig llama31_8b() {
  ModelConfig c;
  c.vocab_size = 128256;
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_layers = 32;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  return c;
}

TEST(ModelCost, PublishedParameterCounts) {
  // Llama-3.1-8B: 8,030,261,248 parameters (16.06 GB in bf16).
  auto llama = model_cost(llama31_8b());
  EXPECT_EQ(llama.num_params, 8030261248);
  EXPECT_EQ(llama.decode_weight_params, 8030261248 - 128256LL * 4096);
  EXPECT_EQ(llama.kv_elems_per_token, 2 * 32 * 8 * 128);
  // Qwen2.5-0.5B (tied embeddings, qkv biases): 494,032,768 parameters.
  ModelConfig q;
  q.vocab_size = 151936;
  q.hidden_size = 896;
  q.intermediate_size = 4864;
  q.num_layers = 24;
  q.num_heads = 14;
  q.num_kv_heads = 2;
  q.head_dim = 64;
  q.attention_bias = true;
  q.tie_word_embeddings = true;
  EXPECT_EQ(model_cost(q).num_params, 494032768);
  EXPECT_EQ(model_cost(q).decode_weight_params, 494032768);  // the tied lm_head is read every step
}

TEST(ModelCost, MixtureOfExpertsCountsTheActiveExperts) {
  // Qwen3-30B-A3B: 30,532,122,624 parameters, 3.3B of them active per token.
  ModelConfig c;
  c.vocab_size = 151936;
  c.hidden_size = 2048;
  c.intermediate_size = 6144;
  c.num_layers = 48;
  c.num_heads = 32;
  c.num_kv_heads = 4;
  c.head_dim = 128;
  c.qk_norm = true;
  c.num_experts = 128;
  c.num_experts_per_tok = 8;
  c.moe_intermediate_size = 768;
  auto m = model_cost(c);
  EXPECT_EQ(m.num_params, 30532122624);
  EXPECT_EQ(m.moe_layers, 48);
  const double expert = 3.0 * 2048 * 768;
  const double fixed = static_cast<double>(m.decode_weight_params);
  EXPECT_DOUBLE_EQ(decode_weight_params_at(m, 1), fixed + 48 * 8 * expert);
  EXPECT_NEAR(decode_weight_params_at(m, 1 << 20), fixed + 48 * 128 * expert, 1.0);
  EXPECT_LT(decode_weight_params_at(m, 16), fixed + 48 * 128 * expert);
  EXPECT_GT(decode_weight_params_at(m, 16), fixed + 48 * 8 * expert * 4);
  // Prefill: attention, router and 8 experts per token.
  EXPECT_DOUBLE_EQ(static_cast<double>(m.layer_matmul_params),
                   48.0 * (2048.0 * 4096 * 2 + 2 * 2048.0 * 512 + 128 * 2048.0 + 8 * expert));
  // Dense models: no experts.
  EXPECT_DOUBLE_EQ(decode_weight_params_at(model_cost(llama31_8b()), 64),
                   static_cast<double>(model_cost(llama31_8b()).decode_weight_params));
}

TEST(ModelCost, SlidingLayersReadOnlyTheirWindow) {
  // Gemma-3-12B's text decoder: 11,766,034,176 parameters (tied embeddings,
  // four norms per layer, q/k norms); 40 of its 48 layers slide over 1024.
  ModelConfig c;
  c.vocab_size = 262208;
  c.hidden_size = 3840;
  c.intermediate_size = 15360;
  c.num_layers = 48;
  c.num_heads = 16;
  c.num_kv_heads = 8;
  c.head_dim = 256;
  c.qk_norm = true;
  c.sandwich_norms = true;
  c.tie_word_embeddings = true;
  c.sliding_window = 1024;
  for (int64_t l = 0; l < 48; ++l) c.sliding_layers.push_back((l + 1) % 6 != 0);
  const auto m = model_cost(c);
  EXPECT_EQ(m.num_params, 11766034176);
  const int64_t per_layer = 2 * 8 * 256;
  EXPECT_EQ(m.kv_elems_per_token, 8 * per_layer);
  EXPECT_EQ(m.sliding_kv_elems_per_token, 40 * per_layer);
  const double weights = static_cast<double>(m.decode_weight_params) * 2.0;
  // Inside the window every layer reads the whole context; past it the
  // sliding layers read 1024 positions.
  EXPECT_DOUBLE_EQ(decode_bytes_per_step(m, 2.0, 2.0, 1, 500.0), weights + 500.0 * 48 * per_layer * 2);
  EXPECT_DOUBLE_EQ(decode_bytes_per_step(m, 2.0, 2.0, 2, 32768.0),
                   weights + 2 * (32768.0 * 8 + 1024.0 * 40) * per_layer * 2);
  EXPECT_DOUBLE_EQ(decode_bytes_per_rank(m, 2.0, 2.0, 2, 32768.0, 2) - decode_bytes_per_rank(m, 2.0, 2.0, 1, 32768.0, 2),
                   (32768.0 * 8 + 1024.0 * 40) * per_layer * 2 / 2);
}

TEST(ModelCost, BytesAndFlops) {
  auto c = model_cost(llama31_8b());
  double weights = static_cast<double>(c.decode_weight_params) * 2.0;
  EXPECT_DOUBLE_EQ(decode_bytes_per_step(c, 2.0, 2.0, 1, 0.0), weights);
  EXPECT_DOUBLE_EQ(decode_bytes_per_step(c, 2.0, 2.0, 4, 1000.0), weights + 4 * 1000.0 * 131072.0);
  // 8192-token prefill: 2 * 6.98e9 * 8192 + lm_head + attention.
  double layer_matmul = 32.0 * (4096.0 * 4096 * 2 + 2 * 4096.0 * 1024 + 3 * 4096.0 * 14336);
  double expected =
      2 * layer_matmul * 8192 + 2 * 128256.0 * 4096 + 2 * 32.0 * 32 * 128 * 8192.0 * 8192;
  EXPECT_DOUBLE_EQ(prefill_flops(c, 8192), expected);
}

TEST(ModelCost, BytesPerTensorParallelRank) {
  auto c = model_cost(llama31_8b());  // 8 kv heads
  const double lm_head = 128256.0 * 4096 * 2;
  const double layers = static_cast<double>(c.decode_weight_params) * 2.0 - lm_head;
  const double kv = 1000.0 * 131072.0;  // 1 sequence at 1000 tokens, bf16 KV of all heads
  EXPECT_DOUBLE_EQ(decode_bytes_per_rank(c, 2.0, 2.0, 1, 1000.0, 1), decode_bytes_per_step(c, 2.0, 2.0, 1, 1000.0));
  // The vocab-parallel head: 128256 / N rows per rank.
  EXPECT_DOUBLE_EQ(decode_bytes_per_rank(c, 2.0, 2.0, 1, 1000.0, 2),
                   layers / 2 + lm_head / 2 + kv / 2);
  EXPECT_DOUBLE_EQ(decode_bytes_per_rank(c, 2.0, 2.0, 1, 1000.0, 8),
                   layers / 8 + lm_head / 8 + kv / 8);
  // 16 ranks over 8 kv heads: each holds one replicated head, 1/8 of the KV.
  EXPECT_DOUBLE_EQ(decode_bytes_per_rank(c, 2.0, 2.0, 1, 1000.0, 16),
                   layers / 16 + lm_head / 16 + kv / 8);
  // A vocab N does not divide: each rank reads its padded block of ceil(V / N) rows.
  ModelConfig odd = llama31_8b();
  odd.vocab_size = 128257;
  const auto co = model_cost(odd);
  const double odd_layers =
      static_cast<double>(co.decode_weight_params) * 2.0 - 128257.0 * 4096 * 2;
  EXPECT_DOUBLE_EQ(decode_bytes_per_rank(co, 2.0, 2.0, 1, 1000.0, 2),
                   odd_layers / 2 + 64129.0 * 4096 * 2 + kv / 2);
}

TEST(InprocReport, ParallelRunsArePerGpu) {
  LatencyReportInputs in;
  in.options.input_len = 1024;
  in.options.output_len = 257;
  in.options.batch_size = 1;
  in.result.ttft_s = {0.1};
  in.result.tpot_s = {0.004};
  in.result.latency_s = {1.1};
  in.cost = model_cost(llama31_8b());
  in.bandwidth = BandwidthCeiling{3.0e12, "test"};
  in.tensor_parallel_size = 2;
  auto j = latency_report(in);
  const double per_rank = decode_bytes_per_rank(in.cost, 2.0, 2.0, 1, 1024.0 + 128.0, 2);
  EXPECT_DOUBLE_EQ(j["decode_bytes_per_rank"].get<double>(), per_rank);
  EXPECT_DOUBLE_EQ(j["decode_bytes_per_step"].get<double>(), decode_bytes_per_step(in.cost, 2.0, 2.0, 1, 1152.0));
  EXPECT_DOUBLE_EQ(j["achieved_gbps"].get<double>(), per_rank / 0.004 / 1e9);
  EXPECT_DOUBLE_EQ(j["speed_of_light_tpot_ms"].get<double>(), per_rank / 3.0e12 * 1000.0);
  EXPECT_EQ(j["tensor_parallel_size"].get<int>(), 2);
  EXPECT_NE(format_latency_report(j).find("2 x 1"), std::string::npos);
  in.tensor_parallel_size = 1;
  EXPECT_FALSE(latency_report(in).contains("decode_bytes_per_rank"));
}

TEST(InprocReport, SpeedOfLightRatios) {
  LatencyReportInputs in;
  in.options.input_len = 1024;
  in.options.output_len = 256;
  in.options.batch_size = 1;
  in.result.ttft_s = {0.1, 0.1};
  in.result.tpot_s = {0.008, 0.008};
  in.result.latency_s = {2.14, 2.14};
  in.result.min_output_tokens = 256;
  in.cost = model_cost(llama31_8b());
  in.bandwidth = BandwidthCeiling{3.0e12, "test"};
  in.matrix_flops_per_s = 800e12;
  in.device = "gpu";
  in.model = "m";
  auto j = latency_report(in);
  double bytes = static_cast<double>(in.cost.decode_weight_params) * 2 + (1024 + 127.5) * 131072.0;
  EXPECT_DOUBLE_EQ(j["decode_bytes_per_step"].get<double>(), bytes);
  EXPECT_NEAR(j["achieved_gbps"].get<double>(), bytes / 0.008 / 1e9, 1e-6);
  EXPECT_NEAR(j["speed_of_light_tpot_ms"].get<double>(), bytes / 3.0e12 * 1000, 1e-9);
  EXPECT_NEAR(j["pct_of_speed_of_light"].get<double>(), 100 * bytes / 3.0e12 / 0.008, 1e-9);
  EXPECT_NEAR(j["decode_tok_s"].get<double>(), 125.0, 1e-9);
  EXPECT_NEAR(j["prefill_tok_s"].get<double>(), 10240.0, 1e-6);
  EXPECT_NEAR(j["pct_of_matrix_ceiling"].get<double>(),
              100 * prefill_flops(in.cost, 1024) / 0.1 / 800e12, 1e-9);
  std::string text = format_latency_report(j);
  EXPECT_NE(text.find("TPOT vs speed of light (%):"), std::string::npos);
  in.bandwidth.reset();
  EXPECT_NE(format_latency_report(latency_report(in)).find("not measured"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::bench
