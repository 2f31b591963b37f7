// pagoda generate: one prompt streamed to stdout, or a JSONL batch of
// prompts run through the engine together -- pagoda's own line format, or
// OpenAI's batch format (custom_id, method, url, body), as `vllm run-batch`.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/progress.h"
#include "engine/engine_api.h"
#include "engine/request_fit.h"
#include "openai/bad_words.h"
#include "openai/batch_line.h"
#include "openai/batch_runner.h"
#include "pagoda/model_flags.h"
#include "openai/field_reader.h"
#include "openai/sampling_request.h"
#include "pagoda/command.h"
#include "pagoda/engine_flags.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::app {
namespace {

// Ordered like the server's JSON so field readers see the same type.
using json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// Collects the events of one request; wait() returns when every index ended.
class Collector {
 public:
  explicit Collector(int n, bool stream) : outputs_(static_cast<size_t>(n)), stream_(stream) {}

  OutputSink sink() {
    return [this](RequestOutput&& ev) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!first_token_ && !ev.token_ids.empty()) first_token_ = Clock::now();
      if (stream_ && ev.index == 0 && !ev.text.empty()) {
        std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
        std::fflush(stdout);
      }
      Output& o = outputs_.at(static_cast<size_t>(ev.index));
      o.text += ev.text;
      o.token_ids.insert(o.token_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
      o.logprobs.insert(o.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
      if (!ev.prompt_logprobs.empty()) o.prompt_logprobs = std::move(ev.prompt_logprobs);
      o.num_prompt_tokens = ev.num_prompt_tokens;
      o.num_cached_tokens = ev.num_cached_prompt_tokens;
      if (!ev.error.empty()) o.error = ev.error;
      if (ev.finish_reason) {
        o.finish_reason = finish_reason_name(*ev.finish_reason);
        if (auto* s = std::get_if<std::string>(&ev.stop_reason)) o.stop_reason = *s;
        if (auto* t = std::get_if<int32_t>(&ev.stop_reason)) o.stop_reason = *t;
        ++num_done_;
        cv_.notify_all();
      }
    };
  }

  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return num_done_ == outputs_.size(); });
  }

  struct Output {
    std::string text;
    std::vector<int32_t> token_ids;
    std::vector<TokenLogprob> logprobs;
    std::vector<std::optional<TokenLogprob>> prompt_logprobs;
    std::string finish_reason;
    json stop_reason;
    std::string error;
    int64_t num_prompt_tokens = 0;
    int64_t num_cached_tokens = 0;
  };
  const std::vector<Output>& outputs() const { return outputs_; }
  std::optional<Clock::time_point> first_token() const { return first_token_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Output> outputs_;
  size_t num_done_ = 0;
  bool stream_;
  std::optional<Clock::time_point> first_token_;
};

// The prompt ids of one JSONL item: "prompt" (text or ids) or "messages".
Result<std::vector<int32_t>> prompt_ids(Engine& engine, const json& item, bool chat) {
  const Tokenizer& tok = engine.tokenizer();
  if (item.contains("messages")) {
    ChatTemplateInputs in;
    in.messages = item["messages"];
    in.add_generation_prompt = true;
    if (item.contains("tools")) in.tools = item["tools"];
    if (item.contains("chat_template_kwargs")) in.extra = item["chat_template_kwargs"];
    PAGODA_ASSIGN_OR_RETURN(std::string text, engine.apply_chat_template(in));
    return tok.encode_prompt(text);
  }
  if (!item.contains("prompt")) return make_error(ErrorCode::kInvalidArgument, "needs \"prompt\" or \"messages\"");
  const json& p = item["prompt"];
  if (p.is_array()) {
    std::vector<int32_t> ids;
    for (const json& v : p) {
      if (!v.is_number_integer()) return make_error(ErrorCode::kInvalidArgument, "\"prompt\" ids must be integers");
      ids.push_back(v.get<int32_t>());
    }
    return ids;
  }
  if (!p.is_string()) return make_error(ErrorCode::kInvalidArgument, "\"prompt\" must be a string or token ids");
  if (chat) {
    ChatTemplateInputs in;
    in.messages = nlohmann::json::array({{{"role", "user"}, {"content", p.get<std::string>()}}});
    in.add_generation_prompt = true;
    PAGODA_ASSIGN_OR_RETURN(std::string text, engine.apply_chat_template(in));
    return tok.encode_prompt(text);
  }
  return tok.encode(p.get<std::string>(), true, false);
}

// SamplingParams from the item's OpenAI-style fields (the server's reader).
Result<GenerateRequest> make_request(Engine& engine, const json& item, bool chat, const std::string& id) {
  GenerateRequest req;
  req.request_id = id;
  PAGODA_ASSIGN_OR_RETURN(req.prompt_token_ids, prompt_ids(engine, item, chat));
  openai::FieldReader reader(item);
  openai::SamplingRequest sampling = openai::read_sampling_request(reader, engine.info().vocab_size);
  sampling.params.logprobs = openai::read_logprob_count(reader, "logprobs");
  sampling.params.prompt_logprobs = openai::read_logprob_count(reader, "prompt_logprobs");
  openai::read_bad_words(reader, engine.tokenizer(), sampling.params);
  if (reader.error()) return make_error(ErrorCode::kInvalidArgument, reader.error()->message);
  auto max_tokens = fit_context(engine.info(), {.num_prompt_tokens = static_cast<int64_t>(req.prompt_token_ids.size()),
                                                .max_tokens = sampling.max_tokens,
                                                .prompt_name = item.contains("messages") ? "messages" : "prompt"});
  if (!max_tokens.ok()) return make_error(ErrorCode::kInvalidArgument, max_tokens.error().message);
  // add_request checks the rest: min_tokens against this max_tokens, the seats, the KV pool.
  sampling.params.max_tokens = static_cast<int32_t>(max_tokens.value());
  req.params = std::move(sampling.params);
  req.priority = sampling.priority;
  return req;
}

json logprob_json(const TokenLogprob& t) {
  json top = json::array();
  for (const TopLogprob& x : t.top) top.push_back({{"token_id", x.token_id}, {"logprob", x.logprob}});
  return {{"token_id", t.token_id}, {"logprob", t.logprob}, {"rank", t.rank}, {"top_logprobs", std::move(top)}};
}

// One sample's fields: text, token_ids, finish_reason, stop_reason (when a
// stop string or token ended it), logprobs (when requested), error.
void add_sample_fields(const Collector::Output& o, bool with_logprobs, json& out) {
  out["text"] = o.text;
  out["token_ids"] = o.token_ids;
  out["finish_reason"] = o.finish_reason;
  if (!o.stop_reason.is_null()) out["stop_reason"] = o.stop_reason;
  if (with_logprobs) {
    out["logprobs"] = json::array();
    for (const TokenLogprob& t : o.logprobs) out["logprobs"].push_back(logprob_json(t));
  }
  if (!o.error.empty()) out["error"] = o.error;
}

// The output line of one item: its prompt (or messages), index 0's sample
// fields, "choices" with every sample when n > 1, "prompt_logprobs" when
// requested (null for the first prompt token), and "usage".
json output_json(const json& item, const GenerateRequest& request, const Collector& c) {
  const auto& outs = c.outputs();
  const bool with_logprobs = request.params.logprobs.has_value();
  json line;
  if (item.contains("messages")) line["messages"] = item["messages"];
  else line["prompt"] = item["prompt"];
  add_sample_fields(outs[0], with_logprobs, line);
  int64_t completion = 0;
  for (const auto& o : outs) completion += static_cast<int64_t>(o.token_ids.size());
  if (outs.size() > 1) {
    line["choices"] = json::array();
    for (size_t i = 0; i < outs.size(); ++i) {
      json choice = {{"index", i}};
      add_sample_fields(outs[i], with_logprobs, choice);
      line["choices"].push_back(std::move(choice));
    }
  }
  if (request.params.prompt_logprobs) {
    line["prompt_logprobs"] = json::array();
    for (const auto& t : outs[0].prompt_logprobs) line["prompt_logprobs"].push_back(t ? logprob_json(*t) : json());
  }
  line["usage"] = {{"prompt_tokens", outs[0].num_prompt_tokens},
                   {"completion_tokens", completion},
                   {"total_tokens", outs[0].num_prompt_tokens + completion},
                   {"cached_tokens", outs[0].num_cached_tokens}};
  return line;
}

void print_cache_stats(const Engine& engine) {
  EngineMetrics m = engine.metrics();
  double rate = m.prefix_cache_queries ? 100.0 * static_cast<double>(m.prefix_cache_hits) /
                                             static_cast<double>(m.prefix_cache_queries)
                                       : 0.0;
  std::fprintf(stderr, "prefix cache: %llu of %llu prompt tokens hit (%.1f%%); preemptions: %llu\n",
               static_cast<unsigned long long>(m.prefix_cache_hits),
               static_cast<unsigned long long>(m.prefix_cache_queries), rate,
               static_cast<unsigned long long>(m.num_preemptions));
}

struct InputLine {
  int number = 0;  // in the file, from 1
  std::string text;
};

// The non-blank lines of a JSONL file.
Result<std::vector<InputLine>> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(ErrorCode::kNotFound, "cannot read --input " + path);
  std::vector<InputLine> lines;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back({number, std::move(line)});
  }
  return lines;
}

// A file is in OpenAI's batch format when its first line is a JSON object
// with "custom_id" and "body".
bool is_batch_file(const std::vector<InputLine>& lines) {
  return !lines.empty() && openai::is_batch_line(json::parse(lines[0].text, nullptr, false));
}

// The JSON objects of pagoda's own format.
Result<std::vector<json>> parse_items(const std::vector<InputLine>& lines, const std::string& path) {
  std::vector<json> items;
  for (const InputLine& line : lines) {
    json item = json::parse(line.text, nullptr, false);
    if (item.is_discarded() || !item.is_object()) {
      return make_error(ErrorCode::kInvalidArgument, fmt::format("{}:{}: not a JSON object", path, line.number));
    }
    items.push_back(std::move(item));
  }
  return items;
}

// Every item's request, built before any is submitted so that a bad item
// fails the batch before anything runs. Errors name the item (1-based).
Result<std::vector<GenerateRequest>> make_requests(Engine& engine, const std::vector<json>& items, bool chat,
                                                   const std::string& input) {
  std::vector<GenerateRequest> requests;
  for (size_t i = 0; i < items.size(); ++i) {
    Result<GenerateRequest> req = make_request(engine, items[i], chat, "batch-" + std::to_string(i));
    if (!req.ok()) {
      return make_error(req.error().code, fmt::format("{}: item {}: {}", input, i + 1, req.error().message));
    }
    requests.push_back(std::move(req.value()));
  }
  return requests;
}

// Submits every request, each with its own collector, in one add_requests:
// all or none, and the engine takes them into its first step together, so
// the batch's steps (and so its numerics) do not depend on submission
// timing. A refusal names the item.
Status submit_all(Engine& engine, const std::vector<GenerateRequest>& requests, const std::string& input,
                  std::vector<std::unique_ptr<Collector>>* collectors) {
  std::vector<GenerateRequest> batch;
  batch.reserve(requests.size());
  for (const GenerateRequest& r : requests) {
    collectors->push_back(std::make_unique<Collector>(r.params.n, false));
    batch.push_back(r);
    batch.back().sink = collectors->back()->sink();
  }
  size_t failed = 0;
  Status st = engine.add_requests(std::move(batch), &failed);
  if (!st.ok()) {
    return make_error(st.error().code, fmt::format("{}: item {}: {}", input, failed + 1, st.error().message));
  }
  return Status::Ok();
}

int fail(const Error& e) {
  std::fprintf(stderr, "pagoda generate: %s\n", e.message.c_str());
  return 1;
}

// The closing summary on stderr, after the engine drained.
void print_batch_stats(Engine& engine, size_t num_requests, int64_t tokens, Clock::time_point start) {
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  engine.drain();  // the metrics below then include the last step
  std::fprintf(stderr, "%zu requests, %lld generated tokens in %.2f s (%.1f tok/s)\n", num_requests,
               static_cast<long long>(tokens), secs, static_cast<double>(tokens) / secs);
  print_cache_stats(engine);
}

// pagoda's own format: every item is checked before any runs, and a bad one
// fails the whole batch.
int run_items(Engine& engine, const std::vector<InputLine>& lines, const std::string& input, std::ostream& out,
              bool chat) {
  Result<std::vector<json>> items = parse_items(lines, input);
  if (!items.ok()) return fail(items.error());
  Result<std::vector<GenerateRequest>> requests = make_requests(engine, *items, chat, input);
  if (!requests.ok()) return fail(requests.error());
  const auto start = Clock::now();
  std::vector<std::unique_ptr<Collector>> collectors;
  Status submitted = submit_all(engine, *requests, input, &collectors);
  if (!submitted.ok()) return fail(submitted.error());
  Progress progress("batch", items->size());
  int64_t tokens = 0;
  for (size_t i = 0; i < items->size(); ++i) {
    collectors[i]->wait();
    for (const auto& o : collectors[i]->outputs()) tokens += static_cast<int64_t>(o.token_ids.size());
    out << output_json((*items)[i], (*requests)[i], *collectors[i]).dump(-1, ' ', false, json::error_handler_t::replace)
        << "\n";
    progress.update(i + 1, fmt::format("{}/{} requests", i + 1, items->size()));
  }
  out.flush();
  progress.finish();
  print_batch_stats(engine, items->size(), tokens, start);
  return 0;
}

// OpenAI's batch format: each line is answered as the server answers its
// body, a bad line gets an error line, and the output keeps the input order.
// At most 2 x max_num_seqs lines are in flight (as `vllm run-batch`), so the
// engine's waiting queue stays short and the answers held for ordering few.
int run_openai_batch(Engine& engine, const std::vector<InputLine>& lines, std::ostream& out,
                     openai::ServiceOptions options) {
  Result<std::unique_ptr<openai::BatchRunner>> runner = openai::BatchRunner::create(engine, std::move(options));
  if (!runner.ok()) return fail(runner.error());
  const size_t window = static_cast<size_t>(std::max<int64_t>(1, 2 * engine.info().max_num_seqs));
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::optional<json>> answers(lines.size());
  size_t num_answered = 0, num_written = 0, num_failed = 0;
  int64_t tokens = 0;
  Progress progress("batch", lines.size());
  // Writes the answers that are next in input order; holds `lock`.
  auto write_ready = [&](std::unique_lock<std::mutex>&) {
    for (; num_written < answers.size() && answers[num_written]; ++num_written) {
      json& line = *answers[num_written];
      if (!line["error"].is_null()) ++num_failed;
      if (line["response"].is_object() && line["response"]["status_code"] == 200) {
        tokens += line["response"]["body"]["usage"].value("completion_tokens", int64_t{0});
      }
      out << line.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
      answers[num_written].reset();
    }
    progress.update(num_written, fmt::format("{}/{} requests, {} failed", num_written, lines.size(), num_failed));
  };
  const auto start = Clock::now();
  for (size_t i = 0; i < lines.size(); ++i) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return i - num_answered < window; });
      write_ready(lock);
    }
    (*runner)->run(lines[i].text, [&, i](json line) {
      std::lock_guard<std::mutex> lock(mu);
      answers[i] = std::move(line);
      ++num_answered;
      cv.notify_all();
    });
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    while (num_written < lines.size()) {
      cv.wait(lock, [&] { return num_written < answers.size() && answers[num_written]; });
      write_ready(lock);
    }
  }
  out.flush();
  progress.finish();
  runner->reset();
  print_batch_stats(engine, lines.size(), tokens, start);
  if (num_failed) std::fprintf(stderr, "%zu of %zu requests failed (see their \"error\")\n", num_failed, lines.size());
  return 0;
}

// --output: a file, or stdout when empty or "-".
int run_batch(Engine& engine, const EngineOptions& options, const std::string& input, const std::string& output,
              bool chat) {
  Result<std::vector<InputLine>> lines = read_lines(input);
  if (!lines.ok()) return fail(lines.error());
  std::ofstream file;
  const bool to_stdout = output.empty() || output == "-";
  if (!to_stdout) {
    file.open(output);
    if (!file) return fail(make_error(ErrorCode::kInvalidArgument, "cannot write --output " + output));
  }
  std::ostream& out = to_stdout ? std::cout : file;
  if (!is_batch_file(*lines)) return run_items(engine, *lines, input, out, chat);
  openai::ServiceOptions service;
  service.version = PAGODA_VERSION;
  service.chat_template_text = chat_template_text(options, engine);
  return run_openai_batch(engine, *lines, out, std::move(service));
}

int run_one(Engine& engine, const json& item, bool chat) {
  Result<GenerateRequest> req = make_request(engine, item, chat, "generate-0");
  if (!req.ok()) {
    std::fprintf(stderr, "pagoda generate: %s\n", req.error().message.c_str());
    return 1;
  }
  const size_t num_prompt = req->prompt_token_ids.size();
  Collector collector(req->params.n, true);
  req->sink = collector.sink();
  auto start = Clock::now();
  Status st = engine.add_request(std::move(req.value()));
  if (!st.ok()) {
    std::fprintf(stderr, "pagoda generate: %s\n", st.error().message.c_str());
    return 1;
  }
  collector.wait();
  auto end = Clock::now();
  std::printf("\n");
  const auto& o = collector.outputs()[0];
  if (!o.error.empty()) {
    std::fprintf(stderr, "pagoda generate: %s\n", o.error.c_str());
    return 1;
  }
  double total = std::chrono::duration<double>(end - start).count();
  double ttft = collector.first_token() ? std::chrono::duration<double>(*collector.first_token() - start).count() : total;
  size_t n = o.token_ids.size();
  std::fprintf(stderr, "[%zu prompt tokens, %zu generated, finish: %s; TTFT %.1f ms, %.1f tok/s decode]\n", num_prompt,
               n, o.finish_reason.c_str(), ttft * 1e3, n > 1 ? static_cast<double>(n - 1) / (total - ttft) : 0.0);
  return 0;
}

int run_generate(int argc, char** argv) {
  CLI::App app{"Generate text with a model: one prompt streamed to stdout, or a JSONL batch."};
  app.name(argv[0]);
  EngineOptions options;
  std::string prompt, input, output;
  bool chat = false;
  json item = json::object();
  std::optional<int64_t> max_tokens, top_k;
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  app.add_option("model", options.model,
                 std::string("Model: ") + kModelHelp +
                     " (default: SmolLM2-135M-Instruct from the pagoda cache)");
  app.add_option("-p,--prompt", prompt, "Prompt text (completion), or the user message with --chat");
  app.add_flag("--chat", chat, "Render --prompt as a user message through the model's chat template");
  app.add_option("--input", input,
                 "JSONL file of requests, in one of two formats (the first line decides). OpenAI's batch "
                 "format, as `vllm run-batch`: {\"custom_id\", \"method\": \"POST\", \"url\": "
                 "\"/v1/chat/completions\" or \"/v1/completions\", \"body\"}; each body is checked and "
                 "answered as the server would, and each output line is {\"id\", \"custom_id\", \"response\": "
                 "{\"status_code\", \"request_id\", \"body\"}, \"error\"}; a bad line gets an error line and "
                 "the others still run. Or pagoda's own: \"prompt\" (text or token ids) or \"messages\", plus "
                 "OpenAI-style sampling fields (max_tokens, temperature, top_p, top_k, seed, stop, n, best_of, "
                 "use_beam_search, logprobs, prompt_logprobs, allowed_token_ids, bad_words, priority, ...), every line checked before any runs "
                 "and all submitted at once (the engine's first step takes them together, so a rerun schedules the "
                 "same steps); "
                 "it writes prompt (or messages), text, token_ids, finish_reason, stop_reason (when a stop string "
                 "or a stop_token_ids id ended it), usage; plus choices when n > 1 and logprobs / prompt_logprobs when "
                 "requested. Output lines keep the input order. Shows progress and reports the prefix-cache hit "
                 "rate and preemptions on stderr");
  app.add_option("--output", output, "Write the batch results (JSONL) here; - or none: stdout");
  app.add_option("--max-tokens", max_tokens, "Tokens to generate (default: up to the context length)");
  app.add_option("--temperature", temperature, "Sampling temperature; 0 = greedy (default: generation_config, else 1)");
  app.add_option("--top-p", top_p, "Nucleus sampling probability mass (0, 1]");
  app.add_option("--top-k", top_k, "Sample from the k most likely tokens (0 or -1: off)");
  app.add_option("--min-p", min_p, "Drop tokens below min_p x the top probability");
  app.add_option("--repetition-penalty", repetition_penalty, "Penalty (> 0; 1 = off) for tokens already seen");
  app.add_option("--stop", stop, "Stop string (repeatable)");
  app.add_flag("--ignore-eos", ignore_eos, "Do not stop at the end-of-sequence token");
  add_engine_flags(app, options);
  rewrite_engine_aliases(argc, argv);
  CLI11_PARSE(app, argc, argv);

  if (options.model.empty()) options.model = default_model_path();
  if (prompt.empty() == input.empty()) {
    std::fprintf(stderr, "pagoda generate: give exactly one of --prompt or --input (see --help)\n");
    return 2;
  }
  Result<std::unique_ptr<Engine>> engine = create_engine(options);
  if (!engine.ok()) {
    std::fprintf(stderr, "pagoda generate: %s\n", engine.error().message.c_str());
    return 1;
  }
  if (!input.empty()) return run_batch(**engine, options, input, output, chat);
  item["prompt"] = prompt;
  if (max_tokens) item["max_tokens"] = *max_tokens;
  if (temperature) item["temperature"] = *temperature;
  if (top_p) item["top_p"] = *top_p;
  if (top_k) item["top_k"] = *top_k;
  if (min_p) item["min_p"] = *min_p;
  if (repetition_penalty) item["repetition_penalty"] = *repetition_penalty;
  if (options.seed != 0) item["seed"] = options.seed;  // --seed makes this request reproducible
  if (!stop.empty()) item["stop"] = stop;
  if (ignore_eos) item["ignore_eos"] = true;
  return run_one(**engine, item, chat);
}

}  // namespace
}  // namespace pagoda::app

PAGODA_COMMAND(generate, "generate text from a prompt or a JSONL batch of prompts", pagoda::app::run_generate);
