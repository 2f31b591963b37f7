#include "engine_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <thread>

#include "backend/cpu/cpu_backend.h"
#include "core/log.h"
#include "engine/backend_factory.h"
#include "io/model_files.h"
#include "sample/sampling_rows.h"

namespace pagoda::test {

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : std::string(fallback);
}

bool valid_device(const std::string& d) {
  return d == "cpu" || d == "cuda";
}

// Checks PAGODA_TEST_DEVICE once before any test: an invalid value, or cuda
// without a usable CUDA backend, fails the binary with one clear message
// instead of every test.
class DeviceEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string& d = test_device();
    ASSERT_TRUE(valid_device(d)) << "PAGODA_TEST_DEVICE must be cpu or cuda, got '" << d << "'";
    if (d == "cuda") {
      set_log_level(LogLevel::kError);
      Result<std::unique_ptr<Backend>> backend = create_backend("cuda", ModelConfig{});
      ASSERT_TRUE(backend.ok()) << "PAGODA_TEST_DEVICE=cuda: " << backend.error().message;
    }
    std::printf(
        "[  DEVICE  ] engine on %s (PAGODA_TEST_DEVICE), reference f32 on the CPU; "
        "inputs %s, %s\n",
        d.c_str(), shared_dir().c_str(), test_data_dir().c_str());
    std::fflush(stdout);
  }
};

[[maybe_unused]] ::testing::Environment* const kDeviceEnvironment =
    ::testing::AddGlobalTestEnvironment(new DeviceEnvironment);

}  // namespace

const std::string& test_device() {
  static const std::string device = env_or("PAGODA_TEST_DEVICE", "cpu");
  return device;
}

bool on_cuda() {
  return test_device() == "cuda";
}

std::string shared_dir() {
  return env_or("PAGODA_SHARED_DIR", PAGODA_SHARED_DIR);
}

std::string test_data_dir() {
  return env_or("PAGODA_TEST_DATA", PAGODA_TEST_DATA);
}

std::string stories_dir() {
  return shared_dir() + "/models/stories260K";
}

std::string tiny_model_dir(const std::string& name) {
  return test_data_dir() + "/models/" + name;
}

SamplingParams greedy_params(int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = max_tokens;
  return p;
}

SamplingParams seeded_params(uint64_t seed, int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.9f;
  p.top_k = 40;
  p.seed = seed;
  p.max_tokens = max_tokens;
  return p;
}

std::unique_ptr<LlmEngine> start_engine(const EngineSetup& setup) {
  set_log_level(LogLevel::kError);
  if (!valid_device(test_device())) {
    ADD_FAILURE() << "PAGODA_TEST_DEVICE must be cpu or cuda, got '" << test_device() << "'";
    return nullptr;
  }
  EngineOptions o;
  o.model = setup.model;
  o.device = test_device();
  o.block_size = setup.block_size;
  o.num_kv_blocks = setup.num_kv_blocks;
  o.kv_cache_memory_bytes = setup.kv_cache_memory_bytes;
  o.disable_hybrid_kv_cache_manager = !setup.hybrid_kv_cache;
  o.max_num_seqs = setup.max_num_seqs;
  o.max_num_batched_tokens = setup.max_num_batched_tokens;
  o.enable_prefix_caching = setup.prefix_caching;
  o.async_scheduling = setup.async_scheduling;
  o.jump_forward = setup.jump_forward;
  o.max_waiting_requests = setup.max_waiting_requests;
  o.tensor_parallel_size = setup.tensor_parallel_size;
  o.pipeline_parallel_size = setup.pipeline_parallel_size;
  o.seed = 12345;
  o.speculative = setup.speculative;
  Result<EngineParts> parts = load_engine_parts(o, setup.tokenizer);
  if (!parts.ok()) {
    ADD_FAILURE() << "load_engine_parts(" << setup.model << "): " << parts.error().message;
    return nullptr;
  }
  parts->scheduler_config.max_chunk_tokens = setup.max_chunk_tokens;
  parts->check_invariants = true;
  if (setup.proposer) parts->proposer = setup.proposer();
  parts->acceptance_rule = setup.acceptance_rule;
  parts->run_ahead = setup.run_ahead;
  parts->run_ahead_clock = setup.run_ahead_clock;
  parts->spec_cost_clock = setup.spec_cost_clock;
  if (setup.wrap_runner) parts->runner = setup.wrap_runner(std::move(parts->runner));
  Result<std::unique_ptr<LlmEngine>> engine = LlmEngine::start(std::move(parts.value()));
  if (!engine.ok()) {
    ADD_FAILURE() << "LlmEngine::start: " << engine.error().message;
    return nullptr;
  }
  return std::move(engine.value());
}

bool RequestLog::done() const {
  std::lock_guard<std::mutex> lock(mu);
  for (const SampleLog& s : samples) {
    if (s.num_finals == 0) return false;
  }
  return true;
}

namespace {

void record(RequestLog& log, RequestOutput& ev) {
  std::lock_guard<std::mutex> lock(log.mu);
  auto problem = [&](const std::string& what) { log.problems.push_back(log.id + ": " + what); };
  if (ev.request_id != log.id) problem("event for request '" + ev.request_id + "'");
  if (ev.index < 0 || ev.index >= log.n) {
    problem("index " + std::to_string(ev.index) + " out of range");
    return;
  }
  SampleLog& s = log.samples[static_cast<size_t>(ev.index)];
  if (s.num_finals > 0) problem("event after the final one, index " + std::to_string(ev.index));
  if (!ev.logprobs.empty() && ev.logprobs.size() != ev.token_ids.size())
    problem("logprobs/token_ids sizes differ");
  s.tokens.insert(s.tokens.end(), ev.token_ids.begin(), ev.token_ids.end());
  s.text += ev.text;
  s.deltas.push_back(ev.text);
  s.logprobs.insert(s.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
  if (ev.num_output_tokens != 0 && ev.num_output_tokens != static_cast<int64_t>(s.tokens.size())) {
    problem("num_output_tokens " + std::to_string(ev.num_output_tokens) + " but " +
            std::to_string(s.tokens.size()) + " tokens received");
  }
  log.num_prompt_tokens = ev.num_prompt_tokens;
  if (!ev.prompt_logprobs.empty()) {
    log.prompt_logprobs = std::move(ev.prompt_logprobs);
    ++log.num_prompt_logprob_events;
  }
  if (ev.num_cached_prompt_tokens != 0) log.num_cached_prompt_tokens = ev.num_cached_prompt_tokens;
  if (!ev.error.empty()) s.error = ev.error;
  if (ev.finish_reason) {
    s.finish = ev.finish_reason;
    s.stop_reason = ev.stop_reason;
    ++s.num_finals;
  }
}

}  // namespace

namespace {

// `r` as a GenerateRequest whose sink records into `log` (then calls hook).
GenerateRequest generate_request(const TestRequest& r, const std::shared_ptr<RequestLog>& log,
                                 EventHook hook) {
  log->id = r.id;
  log->n = r.params.n;
  log->samples.resize(static_cast<size_t>(r.params.n));
  GenerateRequest g;
  g.request_id = r.id;
  g.prompt_token_ids = r.prompt;
  g.params = r.params;
  g.priority = r.priority;
  g.constraint = r.constraint;
  g.speculative = r.speculative;
  g.sink = [log, hook](RequestOutput&& ev) {
    record(*log, ev);
    if (hook) hook(ev);
  };
  return g;
}

}  // namespace

Result<std::shared_ptr<RequestLog>> submit(Engine& engine, const TestRequest& r, EventHook hook) {
  auto log = std::make_shared<RequestLog>();
  PAGODA_RETURN_IF_ERROR(engine.add_request(generate_request(r, log, std::move(hook))));
  return log;
}

Result<std::vector<std::shared_ptr<RequestLog>>> submit_batch(Engine& engine,
                                                              const std::vector<TestRequest>& rs,
                                                              size_t* failed) {
  std::vector<std::shared_ptr<RequestLog>> logs;
  std::vector<GenerateRequest> batch;
  for (const TestRequest& r : rs) {
    logs.push_back(std::make_shared<RequestLog>());
    batch.push_back(generate_request(r, logs.back(), {}));
  }
  PAGODA_RETURN_IF_ERROR(engine.add_requests(std::move(batch), failed));
  return logs;
}

void expect_complete(const RequestLog& log) {
  std::lock_guard<std::mutex> lock(log.mu);
  for (const std::string& p : log.problems) ADD_FAILURE() << p;
  for (size_t k = 0; k < log.samples.size(); ++k) {
    EXPECT_EQ(log.samples[k].num_finals, 1) << log.id << " index " << k;
  }
}

void expect_idle_and_empty(LlmEngine& engine) {
  // Generous: the sanitizer build is slow. A stuck request fails here
  // instead of hanging the test.
  constexpr std::chrono::seconds kTimeout(120);
  const bool idle = engine.wait_idle_for(kTimeout);
  EngineMetrics m = engine.metrics();
  ASSERT_TRUE(idle) << "requests still live after " << kTimeout.count() << " s: " << m.num_running
                    << " running, " << m.num_waiting << " waiting, kv usage " << m.kv_usage;
  EXPECT_EQ(m.num_running, 0);
  EXPECT_EQ(m.num_waiting, 0);
  EXPECT_EQ(m.kv_usage, 0.0) << "KV blocks still in use after every request ended";
  EXPECT_EQ(engine.invariant_error(), "");
  expect_consistent_metrics(m);
}

void expect_consistent_metrics(const EngineMetrics& m) {
  // Every ended request is observed once in each per-request histogram.
  const uint64_t finished = m.finished_stop + m.finished_length + m.finished_abort;
  for (const Histogram* h :
       {&m.e2e_latency, &m.queue_time, &m.prefill_time, &m.decode_time, &m.inference_time,
        &m.request_time_per_output_token, &m.request_prompt_tokens, &m.request_generation_tokens,
        &m.request_max_generation_tokens, &m.request_prefill_computed_tokens, &m.request_params_n,
        &m.request_params_max_tokens}) {
    EXPECT_EQ(h->count, finished);
  }
  // Only requests that got a first token have a time to first token and
  // count their prompt.
  EXPECT_LE(m.time_to_first_token.count, finished);
  EXPECT_LE(static_cast<double>(m.prompt_tokens), m.request_prompt_tokens.sum);
  EXPECT_EQ(static_cast<double>(m.generation_tokens), m.request_generation_tokens.sum);
  EXPECT_LE(m.request_max_generation_tokens.sum, m.request_generation_tokens.sum);
  // Phases within the request's life; inference = prefill + decode.
  EXPECT_LE(m.queue_time.sum + m.prefill_time.sum + m.decode_time.sum,
            m.e2e_latency.sum * (1 + 1e-9) + 1e-9);
  EXPECT_NEAR(m.inference_time.sum, m.prefill_time.sum + m.decode_time.sum,
              1e-6 * (1 + m.e2e_latency.sum));
  // Every launched step is counted once; the last may not be collected yet
  // (an ahead step whose requests had all ended).
  EXPECT_GE(m.iteration_tokens.count, m.steps.steps);
  EXPECT_LE(m.iteration_tokens.count, m.steps.steps + 1);
  // Speculative decoding: accepted within drafted, position j accepted only
  // after position j - 1, and the positions' counts add up.
  EXPECT_LE(m.spec_num_accepted_tokens, m.spec_num_draft_tokens);
  EXPECT_LE(m.spec_num_drafts, m.spec_num_draft_tokens);
  uint64_t per_position = 0;
  for (size_t j = 0; j < m.spec_accepted_per_position.size(); ++j) {
    if (j > 0) {
      EXPECT_LE(m.spec_accepted_per_position[j], m.spec_accepted_per_position[j - 1]);
    }
    EXPECT_LE(m.spec_accepted_per_position[j], m.spec_num_drafts);
    per_position += m.spec_accepted_per_position[j];
  }
  EXPECT_EQ(per_position, m.spec_num_accepted_tokens);
}

std::vector<std::shared_ptr<RequestLog>> run_all(LlmEngine& engine,
                                                 const std::vector<TestRequest>& requests) {
  // Several requests are made to arrive together, whatever the scheduling of
  // this thread: a one-token "gate" request holds the engine thread in its
  // only event, and only then are the requests queued, so that none joins
  // the gate's step or a step planned ahead of its event: the engine takes
  // them all in one command batch, and its steps are the same run to run.
  std::atomic<bool> held{false}, all_in{false};
  std::shared_ptr<RequestLog> gate;
  if (requests.size() > 1) {
    SamplingParams one;
    one.temperature = 0.0f;
    one.max_tokens = 1;
    auto hold = [&held, &all_in](const RequestOutput&) {
      held = true;
      while (!all_in.load()) std::this_thread::yield();
    };
    Result<std::shared_ptr<RequestLog>> g = submit(engine, {"gate", {1}, one}, hold);
    if (!g.ok()) ADD_FAILURE() << "gate: " << g.error().message;
    if (g.ok()) {
      gate = std::move(g.value());
      while (!held.load() && !gate->done()) std::this_thread::yield();
    }
  }
  std::vector<std::shared_ptr<RequestLog>> logs;
  for (const TestRequest& r : requests) {
    Result<std::shared_ptr<RequestLog>> log = submit(engine, r);
    if (!log.ok()) {
      ADD_FAILURE() << "add_request(" << r.id << "): " << log.error().message;
      continue;
    }
    logs.push_back(std::move(log.value()));
  }
  all_in = true;
  expect_idle_and_empty(engine);
  if (gate) expect_complete(*gate);
  for (const auto& log : logs) expect_complete(*log);
  return logs;
}

std::unique_ptr<ReferenceModel> ReferenceModel::load(const std::string& model_dir) {
  set_log_level(LogLevel::kError);
  Result<ModelLocation> location = resolve_model(model_dir);
  if (!location.ok()) {
    ADD_FAILURE() << location.error().message;
    return nullptr;
  }
  Result<OpenedModel> opened = open_model(*location);
  if (!opened.ok()) {
    ADD_FAILURE() << opened.error().message;
    return nullptr;
  }
  std::unique_ptr<ReferenceModel> ref(new ReferenceModel());
  ref->backend_ = create_cpu_backend();
  RunnerOptions ro;
  ro.block_size = 16;
  ro.num_kv_blocks = 40;  // 640 tokens: one sequence up to max_model_len 512
  ro.max_num_batched_tokens = 640;
  ro.max_num_seqs = 64;
  Result<std::unique_ptr<ModelRunner>> runner =
      ModelRunner::create(*ref->backend_, opened->config, *opened->weights, ro);
  if (!runner.ok()) {
    ADD_FAILURE() << runner.error().message;
    return nullptr;
  }
  ref->runner_ = std::move(runner.value());
  return ref;
}

std::vector<float> ReferenceModel::logits(std::span<const int32_t> tokens) {
  const auto n = static_cast<int32_t>(tokens.size());
  const int32_t bs = runner_->block_size();
  StepBatch in;
  in.max_blocks_per_seq = (n + bs - 1) / bs;
  for (int32_t p = 0; p < n; ++p) {
    in.token_ids.push_back(tokens[static_cast<size_t>(p)]);
    in.positions.push_back(p);
    in.slot_mapping.push_back(p);  // blocks 0, 1, 2, ... in order
    in.logits_rows.push_back(p);
  }
  in.query_start_loc = {0, n};
  in.seq_lens = {n};
  for (int32_t b = 0; b < in.max_blocks_per_seq; ++b) in.block_tables.push_back(b);
  std::vector<float> out;
  Status st = runner_->execute_logits(in, &out);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  return out;
}

std::vector<float> ReferenceModel::next_logits(std::span<const int32_t> tokens) {
  std::vector<float> all = logits(tokens);
  const auto v = static_cast<size_t>(vocab_size());
  if (all.size() < v) return std::vector<float>(v, 0.0f);
  return std::vector<float>(all.end() - static_cast<std::ptrdiff_t>(v), all.end());
}

int32_t ReferenceModel::draw(std::span<const float> logits, float temperature, int32_t top_k,
                             float top_p, uint64_t seed, uint64_t step) {
  SamplingBatch batch;
  SamplingRow row;
  row.temperature = temperature;
  row.top_k = top_k;
  row.top_p = top_p;
  row.seed = seed;
  row.step = step;
  batch.rows.push_back(row);
  std::vector<float> copy(logits.begin(), logits.end());
  SampleOutput out;
  backend_->sample(Tensor(copy.data(), DType::kF32, {1, vocab_size()}), batch, out);
  return out.token_ids.at(0);
}

namespace {

// Bans the stop ids (stop_token_ids, and EOS unless ignore_eos) before
// min_tokens, as the engine does.
void ban_stops(const RefSample& s, size_t step, std::vector<float>& x) {
  if (static_cast<int64_t>(step) >= s.params.min_tokens) return;
  auto ban = [&x](int32_t t) {
    if (t >= 0 && static_cast<size_t>(t) < x.size())
      x[static_cast<size_t>(t)] = -std::numeric_limits<float>::infinity();
  };
  for (int32_t t : s.params.stop_token_ids) ban(t);
  if (!s.params.ignore_eos)
    for (int32_t t : s.eos) ban(t);
}

}  // namespace

bool RefSample::stops_on(int32_t token) const {
  auto in = [token](std::span<const int32_t> ids) {
    return std::find(ids.begin(), ids.end(), token) != ids.end();
  };
  return in(params.stop_token_ids) || (!params.ignore_eos && in(eos));
}

RefSample RefSample::prefix(size_t n) const {
  RefSample s = *this;
  s.tokens.resize(std::min(n, tokens.size()));
  s.max_tokens = static_cast<int32_t>(s.tokens.size());
  s.first_near_tie = std::min(first_near_tie, s.tokens.size());
  return s;
}

std::vector<float> ReferenceModel::sampler_input(const RefSample& s,
                                                 std::span<const int32_t> context, size_t step) {
  std::vector<float> x = next_logits(context);
  ban_stops(s, step, x);
  return x;
}

RefSample ReferenceModel::sample(std::span<const int32_t> prompt, const SamplingParams& params,
                                 std::span<const int32_t> eos_ids, uint64_t seed,
                                 int32_t max_tokens) {
  RefSample s;
  s.prompt.assign(prompt.begin(), prompt.end());
  s.params = params;
  s.eos.assign(eos_ids.begin(), eos_ids.end());
  s.seed = seed;
  s.max_tokens = max_tokens;
  s.first_near_tie = std::numeric_limits<size_t>::max();
  std::vector<int32_t> context = s.prompt;
  while (static_cast<int32_t>(s.tokens.size()) < max_tokens) {
    const size_t step = s.tokens.size();
    std::vector<float> x = next_logits(context);
    const std::vector<double> lp = log_softmax(x);
    ban_stops(s, step, x);
    const int32_t token = choose(x, params, seed, step);
    if (s.first_near_tie > step) {
      const std::vector<char> ties = near_tie_tokens(x, params, seed, step, tol::kLogprob, token);
      if (std::find(ties.begin(), ties.end(), 1) != ties.end()) s.first_near_tie = step;
    }
    s.cumulative += lp[static_cast<size_t>(token)];
    s.tokens.push_back(token);
    context.push_back(token);
    const bool may_stop = static_cast<int32_t>(s.tokens.size()) >= params.min_tokens;
    if (may_stop && s.stops_on(token)) break;
  }
  s.first_near_tie = std::min(s.first_near_tie, s.tokens.size());
  return s;
}

std::vector<int32_t> ReferenceModel::generate(std::span<const int32_t> prompt,
                                              const SamplingParams& params,
                                              std::span<const int32_t> eos_ids, uint64_t seed,
                                              int32_t max_tokens, double* cumulative) {
  RefSample s = sample(prompt, params, eos_ids, seed, max_tokens);
  if (cumulative) *cumulative = s.cumulative;
  return std::move(s.tokens);
}

int32_t ReferenceModel::choose(std::span<const float> x, const SamplingParams& params,
                               uint64_t seed, uint64_t step) {
  if (params.is_greedy()) return argmax(x);
  return draw(x, params.effective_temperature(), std::max(0, params.top_k.value_or(0)),
              params.top_p.value_or(1.0f), seed, step);
}

double ReferenceModel::cumulative_logprob(std::span<const int32_t> prompt,
                                          std::span<const int32_t> tokens) {
  if (tokens.empty()) return 0.0;
  std::vector<int32_t> all(prompt.begin(), prompt.end());
  all.insert(all.end(), tokens.begin(), tokens.end());
  const std::vector<float> rows = logits(all);
  const auto v = static_cast<size_t>(vocab_size());
  if (rows.size() < all.size() * v) return -std::numeric_limits<double>::infinity();
  double sum = 0.0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const size_t row = prompt.size() - 1 + i;  // predicts token i
    const std::vector<double> lp = log_softmax(std::span<const float>(rows.data() + row * v, v));
    sum += lp[static_cast<size_t>(tokens[i])];
  }
  return sum;
}

std::vector<double> log_softmax(std::span<const float> row) {
  double m = -std::numeric_limits<double>::infinity();
  for (float x : row) m = std::max(m, static_cast<double>(x));
  double s = 0.0;
  for (float x : row) s += std::exp(static_cast<double>(x) - m);
  const double lse = m + std::log(s);
  std::vector<double> out;
  out.reserve(row.size());
  for (float x : row) out.push_back(static_cast<double>(x) - lse);
  return out;
}

int32_t argmax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

int32_t rank_of(std::span<const double> lp, int32_t token) {
  int32_t r = 1;
  for (double x : lp) r += x > lp[static_cast<size_t>(token)];
  return r;
}

}  // namespace pagoda::test
