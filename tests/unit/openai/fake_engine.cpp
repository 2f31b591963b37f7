#include "fake_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "engine/histogram.h"
#include "engine/request_fit.h"

namespace pagoda::testing {

namespace {

using Clock = std::chrono::steady_clock;

uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t hash_tokens(const std::vector<int32_t>& ids) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t id : ids) h = mix(h ^ static_cast<uint64_t>(id));
  return h;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Longest suffix of `text` that is a proper prefix of one of `stops`.
size_t held_suffix(const std::string& text, const std::vector<std::string>& stops) {
  size_t best = 0;
  for (const auto& stop : stops) {
    for (size_t len = std::min(text.size(), stop.size() - 1); len > best; --len) {
      if (text.compare(text.size() - len, len, stop, 0, len) == 0) {
        best = len;
        break;
      }
    }
  }
  return best;
}

}  // namespace

struct Sample {
  int index = 0;
  uint64_t seed = 0;
  int eos_after = 0;  // words before EOS (without a script)
  std::vector<int32_t> output;
  std::string pending;  // detokenized text held back (could start a stop string)
  std::unique_ptr<IncrementalDetokenizer> detok;
  bool finished = false;
  Clock::time_point last_token;
};

struct FakeEngine::Live {
  GenerateRequest request;
  std::vector<int32_t> script;  // the "SAY:" answer, if any
  std::string failure;          // the "FAIL:" message, if any
  std::vector<std::unique_ptr<Sample>> samples;
  Clock::time_point arrival = Clock::now();
  int64_t cached = 0;
  bool admitted = false;
  bool prompt_logprobs_sent = false;
  int num_finished = 0;
};

FakeEngine::FakeEngine(const FakeEngineOptions& options, std::unique_ptr<Tokenizer> tokenizer,
                       std::optional<ChatTemplate> chat_template)
    : options_(options),
      tokenizer_(std::move(tokenizer)),
      chat_template_(std::move(chat_template)) {
  info_.served_model_name = options.served_model_name;
  info_.architecture = "FakeForTesting";
  info_.max_model_len = options.max_model_len;
  info_.vocab_size = tokenizer_->vocab_size();
  info_.block_size = 16;
  info_.num_kv_blocks = options.max_num_seqs * ((options.max_model_len + 15) / 16);
  info_.kv_capacity_tokens = info_.num_kv_blocks * info_.block_size;
  info_.max_num_seqs = options.max_num_seqs;
  info_.device = "fake";
  auto vocab = grammar::GrammarVocabulary::from_tokenizer(*tokenizer_, tokenizer_->eos_ids(),
                                                          static_cast<int32_t>(info_.vocab_size));
  if (vocab.ok()) grammar_compiler_ = std::make_unique<grammar::GrammarCompiler>(std::move(vocab.value()));
  for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
    const std::string piece = tokenizer_->id_to_token(id);
    // Plain words: "▁" followed by 2+ ASCII letters.
    if (piece.size() < 5 || piece.compare(0, 3, "\xE2\x96\x81") != 0) continue;
    if (std::all_of(piece.begin() + 3, piece.end(),
                    [](char c) { return std::isalpha(static_cast<unsigned char>(c)); })) {
      word_ids_.push_back(id);
    }
  }
  metrics_ = make_engine_metrics(options.max_model_len);
  thread_ = std::thread([this] { loop(); });
}

Result<std::unique_ptr<FakeEngine>> FakeEngine::create(const FakeEngineOptions& options) {
  PAGODA_ASSIGN_OR_RETURN(auto tokenizer, Tokenizer::load(options.tokenizer_path));
  std::optional<ChatTemplate> chat_template;
  if (!options.chat_template_file.empty()) {
    std::ifstream in(options.chat_template_file, std::ios::binary);
    if (!in) return make_error(ErrorCode::kNotFound, "cannot open " + options.chat_template_file);
    std::stringstream text;
    text << in.rdbuf();
    PAGODA_ASSIGN_OR_RETURN(auto parsed, ChatTemplate::parse(text.str()));
    chat_template.emplace(std::move(parsed));
  }
  auto engine =
      std::make_unique<FakeEngine>(options, std::move(tokenizer), std::move(chat_template));
  if (engine->word_ids_.empty())
    return make_error(ErrorCode::kUnsupported, "tokenizer has no plain-word tokens");
  return engine;
}

FakeEngine::~FakeEngine() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Result<std::string> FakeEngine::apply_chat_template(const ChatTemplateInputs& inputs) const {
  if (!chat_template_) return make_error(ErrorCode::kInvalidArgument, "no chat template");
  return chat_template_->render(inputs);
}

Status FakeEngine::add_request(GenerateRequest request) {
  const auto& prompt = request.prompt_token_ids;
  if (prompt.empty()) return make_error(ErrorCode::kInvalidArgument, "prompt is empty");
  // The engine's limits, as LlmEngine checks them.
  auto fits = fit_request(info_, {.num_prompt_tokens = static_cast<int64_t>(prompt.size()),
                                  .max_tokens = request.params.max_tokens,
                                  .num_seqs = request.params.num_seqs()});
  if (!fits.ok()) return make_error(ErrorCode::kInvalidArgument, fits.error().message);
  for (int32_t id : prompt) {
    if (id < 0 || id >= tokenizer_->vocab_size()) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("prompt token id {} is outside the vocabulary", id));
    }
  }
  auto live = std::make_shared<Live>();
  const std::string text = tokenizer_->decode(prompt, false);
  if (size_t at = text.rfind("SAY:"); at != std::string::npos) {
    const size_t end = text.find('\n', at);
    std::string script =
        text.substr(at + 4, end == std::string::npos ? std::string::npos : end - at - 4);
    script.erase(0, script.find_first_not_of(' '));
    live->script = tokenizer_->encode(script, false, false);
  }
  if (text.find(kShowConstraint) != std::string::npos) {
    live->script = tokenizer_->encode(describe_constraint(request), false, false);
  }
  if (size_t at = text.rfind("FAIL:"); options_.scripted_failures && at != std::string::npos) {
    const size_t end = text.find('\n', at);
    live->failure = text.substr(at + 5, end == std::string::npos ? std::string::npos : end - at - 5);
    if (live->failure.empty()) live->failure = "fake engine failure";
  }
  const SamplingParams& p = request.params;
  const bool greedy = p.is_greedy();
  const uint64_t base_seed = greedy ? 0 : (p.seed ? *p.seed : std::random_device{}());
  for (int i = 0; i < std::max<int>(p.n, 1); ++i) {
    auto sample = std::make_unique<Sample>();
    sample->index = i;
    sample->seed = greedy ? 0 : mix(base_seed + static_cast<uint64_t>(i));
    sample->eos_after = 6 + static_cast<int>(mix(hash_tokens(prompt) ^ sample->seed) % 8);
    sample->detok = std::make_unique<IncrementalDetokenizer>(*tokenizer_, p.skip_special_tokens);
    live->samples.push_back(std::move(sample));
  }
  live->request = std::move(request);
  {
    std::lock_guard lock(mu_);
    if (draining_) return make_error(ErrorCode::kResourceExhausted, "the engine is draining");
    if (static_cast<int64_t>(waiting_.size()) >= options_.max_waiting) {
      return make_error(
          ErrorCode::kResourceExhausted,
          fmt::format("the waiting queue is full ({} requests)", options_.max_waiting));
    }
    waiting_.push_back(std::move(live));
  }
  cv_.notify_all();
  return Status::Ok();
}

void FakeEngine::abort(const std::string& request_id) {
  {
    std::lock_guard lock(mu_);
    pending_aborts_.push_back(request_id);
  }
  cv_.notify_all();
}

std::vector<std::string> FakeEngine::aborted_ids() const {
  std::lock_guard lock(mu_);
  return aborted_;
}

int64_t FakeEngine::num_live() const {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(waiting_.size() + running_.size());
}

namespace {

// Allows every token and never finishes: the fake does not enforce constraints.
class AnyToken : public TokenConstraint {
 public:
  void fill_next_mask(std::span<uint32_t> words) const override {
    std::fill(words.begin(), words.end(), ~0u);
  }
  bool accept(int32_t) override { return true; }
  bool is_finished() const override { return false; }
  std::unique_ptr<TokenConstraint> clone() const override { return std::make_unique<AnyToken>(); }
};

}  // namespace

// What compile_constraint returns: the spec it was compiled from.
class FakeCompiledConstraint : public CompiledConstraint {
 public:
  explicit FakeCompiledConstraint(StructuredOutputSpec spec) : spec_(std::move(spec)) {}
  std::unique_ptr<TokenConstraint> start() const override { return std::make_unique<AnyToken>(); }
  const StructuredOutputSpec& spec() const { return spec_; }

 private:
  StructuredOutputSpec spec_;
};

Result<std::shared_ptr<const CompiledConstraint>> FakeEngine::compile_constraint(
    const StructuredOutputSpec& spec) const {
  {
    std::lock_guard lock(mu_);
    compiled_specs_.push_back(spec);
  }
  std::string all = spec.text;
  for (const auto& choice : spec.choices) all += choice;
  if (size_t at = all.find(kRefusedConstraintMarker); at != std::string::npos) {
    return make_error(
        ErrorCode::kInvalidArgument,
        fmt::format("{} at position {}: the fake compiler refuses {}",
                    structured_output_kind_name(spec.kind), at, kRefusedConstraintMarker));
  }
  if (grammar_compiler_ == nullptr) {
    return make_error(ErrorCode::kInternal, "the fake engine's vocabulary has no grammar compiler");
  }
  if (auto compiled = grammar_compiler_->compile(spec); !compiled.ok()) return compiled.error();
  return std::shared_ptr<const CompiledConstraint>(std::make_shared<FakeCompiledConstraint>(spec));
}

std::vector<StructuredOutputSpec> FakeEngine::compiled_specs() const {
  std::lock_guard lock(mu_);
  return compiled_specs_;
}

std::string describe_constraint(const GenerateRequest& request) {
  const auto* fake = dynamic_cast<const FakeCompiledConstraint*>(request.constraint.get());
  if (!fake) return request.constraint ? "{\"kind\": \"unknown\"}" : "{\"kind\": null}";
  nlohmann::ordered_json out = {{"kind", structured_output_kind_name(fake->spec().kind)},
                                {"text", fake->spec().text}};
  if (!fake->spec().choices.empty()) out["choices"] = fake->spec().choices;
  return out.dump();
}

EngineMetrics FakeEngine::metrics() const {
  std::lock_guard lock(mu_);
  EngineMetrics m = metrics_;
  m.num_running = static_cast<int64_t>(running_.size());
  m.num_waiting = static_cast<int64_t>(waiting_.size());
  m.kv_usage = static_cast<double>(running_.size()) / static_cast<double>(options_.max_num_seqs);
  return m;
}

void FakeEngine::drain() {
  {
    std::unique_lock lock(mu_);
    draining_ = true;
    cv_.wait(lock, [this] { return waiting_.empty() && running_.empty(); });
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace pagoda::testing

namespace pagoda::testing {

void FakeEngine::loop() {
  for (;;) {
    std::vector<Event> events;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] {
        return stop_ || !waiting_.empty() || !running_.empty() || !pending_aborts_.empty();
      });
      if (stop_) return;
      process_aborts_locked(events);
      admit_locked();
      step_locked(events);
    }
    for (auto& [live, out] : events) live->request.sink(std::move(out));
    cv_.notify_all();
    std::this_thread::sleep_for(options_.step_time);
  }
}

void FakeEngine::process_aborts_locked(std::vector<Event>& events) {
  for (const auto& id : pending_aborts_) {
    auto matches = [&](const std::shared_ptr<Live>& l) { return l->request.request_id == id; };
    std::shared_ptr<Live> live;
    if (auto it = std::find_if(running_.begin(), running_.end(), matches); it != running_.end()) {
      live = *it;
      running_.erase(it);
    } else if (auto wit = std::find_if(waiting_.begin(), waiting_.end(), matches);
               wit != waiting_.end()) {
      live = *wit;
      waiting_.erase(wit);
    }
    if (!live) continue;
    aborted_.push_back(id);
    ++metrics_.finished_abort;
    for (auto& sample : live->samples) {
      if (sample->finished) continue;
      RequestOutput out;
      out.request_id = id;
      out.index = sample->index;
      out.finish_reason = FinishReason::kAbort;
      out.num_prompt_tokens = static_cast<int64_t>(live->request.prompt_token_ids.size());
      out.num_output_tokens = static_cast<int64_t>(sample->output.size());
      events.emplace_back(live, std::move(out));
    }
  }
  pending_aborts_.clear();
}

void FakeEngine::admit_locked() {
  while (!waiting_.empty() && static_cast<int64_t>(running_.size()) < options_.max_num_seqs) {
    std::shared_ptr<Live> live = waiting_.front();
    waiting_.pop_front();
    const auto& prompt = live->request.prompt_token_ids;
    observe(metrics_.queue_time, seconds_since(live->arrival));
    metrics_.prompt_tokens += prompt.size();
    // Cached tokens: the longest full-block prefix shared with a recent prompt.
    size_t best = 0;
    for (const auto& other : recent_prompts_) {
      size_t common = 0;
      while (common < other.size() && common < prompt.size() && other[common] == prompt[common])
        ++common;
      best = std::max(best, common);
    }
    live->cached = static_cast<int64_t>(std::min(best, prompt.size() - 1) / 16 * 16);
    metrics_.prefix_cache_queries += prompt.size();
    metrics_.prefix_cache_hits += static_cast<uint64_t>(live->cached);
    if (recent_prompts_.size() >= 64) recent_prompts_.erase(recent_prompts_.begin());
    recent_prompts_.push_back(prompt);
    running_.push_back(std::move(live));
  }
}

void FakeEngine::step_locked(std::vector<Event>& events) {
  for (const auto& live : running_) {
    if (!live->failure.empty()) {
      fail_locked(*live, events, live);
      continue;
    }
    for (auto& sample : live->samples) {
      if (!sample->finished) advance_locked(*live, *sample, events, live);
    }
  }
  std::erase_if(running_, [](const std::shared_ptr<Live>& l) {
    return l->num_finished == static_cast<int>(l->samples.size());
  });
}

void FakeEngine::fail_locked(Live& live, std::vector<Event>& events,
                             const std::shared_ptr<Live>& owner) {
  for (auto& sample : live.samples) {
    RequestOutput out;
    out.request_id = live.request.request_id;
    out.index = sample->index;
    out.finish_reason = FinishReason::kAbort;
    out.error = live.failure;
    out.num_prompt_tokens = static_cast<int64_t>(live.request.prompt_token_ids.size());
    sample->finished = true;
    events.emplace_back(owner, std::move(out));
  }
  live.num_finished = static_cast<int>(live.samples.size());
  ++metrics_.finished_abort;
}

int32_t FakeEngine::next_token(const Live& live, const Sample& sample) const {
  const SamplingParams& p = live.request.params;
  const size_t k = sample.output.size();
  const bool eos_allowed =
      !p.ignore_eos && static_cast<int64_t>(k) >= p.min_tokens && tokenizer_->eos_id();
  const bool script_done = !live.script.empty() && k >= live.script.size();
  if (!live.script.empty() && !script_done) return live.script[k];
  if (eos_allowed && (script_done || static_cast<int>(k) >= sample.eos_after))
    return *tokenizer_->eos_id();
  const uint64_t h = mix(hash_tokens(live.request.prompt_token_ids) ^ sample.seed ^ mix(k + 1));
  return word_ids_[h % word_ids_.size()];
}

TokenLogprob FakeEngine::fake_logprob(int32_t token, uint64_t salt, int num_top) const {
  TokenLogprob lp;
  lp.token_id = token;
  lp.logprob = -0.05f - 0.1f * static_cast<float>(mix(salt ^ static_cast<uint64_t>(token)) % 10);
  lp.rank = 1;
  if (num_top > 0) lp.top.push_back({token, lp.logprob});
  for (int j = 0; static_cast<int>(lp.top.size()) < num_top; ++j) {
    const int32_t alt =
        word_ids_[(static_cast<size_t>(token) * 7 + static_cast<size_t>(j)) % word_ids_.size()];
    if (alt != token) lp.top.push_back({alt, lp.logprob - 1.0f - static_cast<float>(j)});
  }
  return lp;
}

void FakeEngine::advance_locked(Live& live, Sample& sample, std::vector<Event>& events,
                                const std::shared_ptr<Live>& owner) {
  const SamplingParams& p = live.request.params;
  const size_t k = sample.output.size();
  const int32_t token = next_token(live, sample);
  sample.output.push_back(token);
  ++metrics_.generation_tokens;
  observe(k == 0 ? metrics_.time_to_first_token : metrics_.inter_token_latency,
          k == 0 ? seconds_since(live.arrival) : seconds_since(sample.last_token));
  sample.last_token = Clock::now();

  RequestOutput out;
  out.request_id = live.request.request_id;
  out.index = sample.index;
  out.token_ids = {token};
  out.num_prompt_tokens = static_cast<int64_t>(live.request.prompt_token_ids.size());
  out.num_cached_prompt_tokens = live.cached;
  if (p.logprobs) out.logprobs.push_back(fake_logprob(token, sample.seed + k, *p.logprobs));
  if (p.prompt_logprobs && sample.index == 0 && !live.prompt_logprobs_sent) {
    live.prompt_logprobs_sent = true;
    out.prompt_logprobs.push_back(std::nullopt);
    const auto& prompt = live.request.prompt_token_ids;
    for (size_t i = 1; i < prompt.size(); ++i)
      out.prompt_logprobs.push_back(fake_logprob(prompt[i], i, *p.prompt_logprobs));
  }

  const bool is_eos = tokenizer_->eos_id() && token == *tokenizer_->eos_id() && !p.ignore_eos;
  const bool is_stop_id =
      static_cast<int64_t>(k) >= p.min_tokens &&
      std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end();
  if (is_eos || is_stop_id) {
    out.finish_reason = FinishReason::kStop;
    if (is_stop_id && !is_eos) out.stop_reason = token;
  } else {
    sample.pending += sample.detok->feed(token);
  }
  const int64_t max_tokens = p.max_tokens.value_or(
      options_.max_model_len - static_cast<int64_t>(live.request.prompt_token_ids.size()));
  if (!out.finish_reason && static_cast<int64_t>(sample.output.size()) >= max_tokens) {
    out.finish_reason = FinishReason::kLength;
  }
  if (out.finish_reason) sample.pending += sample.detok->flush();

  // Stop strings: the earliest match ends the output; text that may still
  // become a match is held back.
  size_t best = std::string::npos;
  std::string matched;
  for (const auto& stop : p.stop) {
    const size_t at = sample.pending.find(stop);
    if (at < best) best = at, matched = stop;
  }
  if (best != std::string::npos && static_cast<int64_t>(sample.output.size()) > p.min_tokens) {
    out.text = sample.pending.substr(0, best + (p.include_stop_str_in_output ? matched.size() : 0));
    out.finish_reason = FinishReason::kStop;
    out.stop_reason = matched;
    sample.pending.clear();
  } else if (out.finish_reason) {
    out.text = std::move(sample.pending);
    sample.pending.clear();
  } else {
    const size_t keep = held_suffix(sample.pending, p.stop);
    out.text = sample.pending.substr(0, sample.pending.size() - keep);
    sample.pending.erase(0, sample.pending.size() - keep);
  }
  out.num_output_tokens = static_cast<int64_t>(sample.output.size());
  if (out.finish_reason) {
    sample.finished = true;
    if (++live.num_finished == static_cast<int>(live.samples.size())) {
      (*out.finish_reason == FinishReason::kStop ? metrics_.finished_stop
                                                 : metrics_.finished_length)++;
      observe(metrics_.e2e_latency, seconds_since(live.arrival));
    }
  }
  events.emplace_back(owner, std::move(out));
}

}  // namespace pagoda::testing
