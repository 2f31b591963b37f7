// POST /v1/completions: plan on a worker, fan out through a GenerationJob,
// assemble OpenAI text_completion objects (streamed as SSE chunks, or one
// response when every choice has finished).
#include <fmt/format.h>

#include <utility>

#include "openai/completion_plan.h"
#include "openai/generation_job.h"
#include "openai/json_response.h"
#include "openai/logprobs_format.h"
#include "openai/request_log.h"
#include "openai/service_context.h"
#include "openai/sse.h"
#include "openai/wire/ids.h"
#include "openai/wire/json_util.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::openai {

namespace {

struct CompletionChoice {
  std::string text;
  CompletionLogprobs logprobs;
  // return_token_ids: the generated ids (streamed: those since the last chunk).
  Json token_ids = Json::array();
  bool started = false;  // echo and prompt logprobs were added
  bool prompt_ids_sent = false;  // a stream's first chunk of the choice carried prompt_token_ids
  Json finish_reason = nullptr;
  Json stop_reason = nullptr;
  explicit CompletionChoice(const Tokenizer& tokenizer) : logprobs(tokenizer) {}
};

// Builds the response on the job strand.
class CompletionAssembler {
 public:
  CompletionAssembler(const ServiceContext& ctx, CompletionPlan plan, std::string id,
                      int num_choices, std::shared_ptr<http::Responder> responder)
      : ctx_(ctx), plan_(std::move(plan)), id_(std::move(id)), responder_(std::move(responder)) {
    choices_.reserve(num_choices);
    for (int i = 0; i < num_choices; ++i) choices_.emplace_back(ctx.engine.tokenizer());
    prompt_logprobs_.resize(plan_.prompts.size());
  }

  const CompletionPlan& plan() const { return plan_; }

  void on_event(int index, int prompt_index, RequestOutput& out, bool last, const Usage& usage) {
    CompletionChoice& choice = choices_[index];
    const size_t text_start = choice.text.size();
    if (!out.prompt_logprobs.empty())
      prompt_logprobs_[prompt_index] = std::move(out.prompt_logprobs);
    if (!choice.started) begin_choice(choice, prompt_index);
    if (plan_.echo_only) {
      // The one sampled token is not part of the answer.
      if (out.finish_reason) choice.finish_reason = "length";
    } else {
      choice.text += out.text;
      if (plan_.return_token_ids) {
        for (int32_t id : out.token_ids) choice.token_ids.push_back(id);
      }
      if (const auto& k = plan_.request.params.logprobs) {
        for (const auto& lp : out.logprobs) choice.logprobs.add(lp, *k);
      }
      if (out.finish_reason) {
        choice.finish_reason = finish_reason_name(*out.finish_reason);
        choice.stop_reason = stop_reason_json(out);
      }
    }
    Usage counted = usage;
    if (plan_.echo_only) counted.completion_tokens = 0;
    if (plan_.request.stream) {
      stream_chunk(index, prompt_index, choice, text_start);
      if (last) finish_stream(counted);
    } else if (last) {
      send_response(counted);
    }
  }

 private:
  // Echo: the prompt text (and its logprobs) come first.
  void begin_choice(CompletionChoice& choice, int prompt_index) {
    choice.started = true;
    if (!plan_.echo) return;
    choice.text = plan_.prompt_texts[prompt_index];
    const auto& k = plan_.request.params.logprobs;
    if (!k) return;
    const auto& prompt = plan_.prompts[prompt_index];
    const auto& scored = prompt_logprobs_[prompt_index];
    for (size_t i = 0; i < prompt.size(); ++i) {
      if (i < scored.size() && scored[i]) {
        choice.logprobs.add(*scored[i], *k);
      } else {
        choice.logprobs.add_unscored(prompt[i]);
      }
    }
  }

  Json envelope() const {
    return {{"id", id_},
            {"object", "text_completion"},
            {"created", created_},
            {"model", ctx_.model_name},
            {"system_fingerprint", ctx_.system_fingerprint}};
  }

  Json logprobs_json(CompletionChoice& choice) const {
    return plan_.request.params.logprobs ? choice.logprobs.take() : Json();
  }

  // return_token_ids: the first chunk of a choice carries prompt_token_ids,
  // every chunk the ids generated since the last one (vLLM's stream shape).
  void stream_chunk(int index, int prompt_index, CompletionChoice& choice, size_t text_start) {
    const bool has_text = choice.text.size() > text_start;
    if (!has_text && choice.finish_reason.is_null() && choice.logprobs.empty() &&
        choice.token_ids.empty())
      return;
    Json out = {{"index", index},
                {"text", choice.text.substr(text_start)},
                {"logprobs", logprobs_json(choice)},
                {"finish_reason", choice.finish_reason},
                {"stop_reason", choice.stop_reason}};
    if (plan_.return_token_ids) {
      if (!choice.prompt_ids_sent) out["prompt_token_ids"] = plan_.prompts[prompt_index];
      choice.prompt_ids_sent = true;
      out["token_ids"] = std::exchange(choice.token_ids, Json::array());
    }
    Json chunk = envelope();
    chunk["choices"] = Json::array({std::move(out)});
    if (plan_.request.include_usage) chunk["usage"] = nullptr;
    responder_->write(sse_event(chunk));
    choice.text.clear();  // streamed text need not be kept
  }

  void finish_stream(const Usage& usage) {
    if (plan_.request.include_usage) {
      Json chunk = envelope();
      chunk["choices"] = Json::array();
      chunk["usage"] = usage_json(usage);
      responder_->write(sse_event(chunk));
    }
    responder_->write(sse_done());
    responder_->end_stream();
  }

  // vLLM puts the prompt's token ids and logprobs on each of its choices.
  void add_prompt_fields(Json& choice, size_t prompt_index) const {
    if (plan_.prompt_logprobs) {
      choice["prompt_logprobs"] = prompt_logprobs_json(
          ctx_.engine.tokenizer(), prompt_logprobs_[prompt_index], *plan_.prompt_logprobs);
    }
    if (plan_.return_token_ids) choice["prompt_token_ids"] = plan_.prompts[prompt_index];
  }

  void send_response(const Usage& usage) {
    Json response = envelope();
    Json choices = Json::array();
    const size_t n = static_cast<size_t>(plan_.request.params.n);
    for (size_t i = 0; i < choices_.size(); ++i) {
      Json choice = {{"index", i},
                     {"text", choices_[i].text},
                     {"logprobs", logprobs_json(choices_[i])},
                     {"finish_reason", choices_[i].finish_reason},
                     {"stop_reason", choices_[i].stop_reason}};
      if (plan_.return_token_ids) choice["token_ids"] = std::move(choices_[i].token_ids);
      add_prompt_fields(choice, i / n);
      choices.push_back(std::move(choice));
    }
    response["choices"] = std::move(choices);
    response["usage"] = usage_json(usage);
    responder_->send(json_response(200, response));
  }

  const ServiceContext& ctx_;
  CompletionPlan plan_;
  std::string id_;
  int64_t created_ = unix_seconds();
  std::shared_ptr<http::Responder> responder_;
  std::vector<CompletionChoice> choices_;
  std::vector<std::vector<std::optional<TokenLogprob>>> prompt_logprobs_;  // per prompt
};

void start_completion(ServiceContext& ctx, CompletionPlan plan,
                      const std::shared_ptr<http::Responder>& responder) {
  if (ctx.draining) return responder->send(error_response(shutting_down_error()));
  auto job = std::make_shared<GenerationJob>(ctx.engine, ctx.io, ctx.io_gate, random_id("cmpl-"));
  const int num_choices = static_cast<int>(plan.prompts.size()) * plan.request.params.n;
  auto assembler = std::make_shared<CompletionAssembler>(ctx, std::move(plan), job->id(),
                                                         num_choices, responder);
  const CompletionPlan& a = assembler->plan();
  for (size_t p = 0; p < a.prompts.size(); ++p) {
    log_request(ctx.options.request_log, fmt::format("{}-{}", job->id(), p), a.prompt_texts[p],
                a.prompts[p], a.request.params);
  }
  launch_generation(
      job, a.prompts, a.request, ctx.draining, responder,
      [assembler](int index, int prompt_index, RequestOutput& out, bool last, const Usage& usage) {
        assembler->on_event(index, prompt_index, out, last, usage);
      });
}

}  // namespace

void handle_completions(ServiceContext& ctx, const http::HttpRequest& request,
                        std::shared_ptr<http::Responder> responder) {
  ctx.run_on_worker(responder, request, [&ctx, request, responder] {
    auto body = parse_json_object(request.body);
    if (!body.ok()) return responder->send(error_response(api_error_from(body.error())));
    if (auto error = ctx.check_model(body.value())) return responder->send(error_response(*error));
    auto plan = plan_completion(ctx, body.value());
    if (!plan.ok()) return responder->send(error_response(plan.error()));
    start_completion(ctx, std::move(plan.value()), responder);
  });
}

}  // namespace pagoda::openai
