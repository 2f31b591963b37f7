// POST /v1/chat/completions: plan on a worker, fan out through a
// GenerationJob, assemble chat.completion objects (or chat.completion.chunk
// SSE events), splitting the reasoning off the answer when the server has a
// reasoning parser, and parsing tool calls out of the answer when tools were
// offered.
#include <fmt/format.h>

#include <optional>
#include <utility>
#include <vector>

#include "http/extra_headers_responder.h"
#include "openai/chat_plan.h"
#include "openai/generation_job.h"
#include "openai/json_response.h"
#include "openai/logprobs_format.h"
#include "openai/request_log.h"
#include "openai/service_context.h"
#include "openai/sse.h"
#include "openai/wire/ids.h"
#include "openai/wire/json_util.h"

namespace pagoda::openai {

namespace {

// A response header saying what pagoda could not do as asked, while still
// answering (OpenAI clients ignore unknown headers).
constexpr std::string_view kWarningHeader = "X-Pagoda-Warning";

struct ChatChoice {
  std::string text;  // whole output (non-streaming)
  Json logprobs = Json::array();
  Json token_ids = Json::array();  // return_token_ids, non-streaming: every generated id
  std::optional<ReasoningStream> reasoning_stream;  // streaming with a reasoning parser
  std::unique_ptr<ToolCallStream> tool_stream;      // streaming with tool parsing
  bool role_sent = false;
  bool called_tool = false;
  Json finish_reason = nullptr;
  Json stop_reason = nullptr;
};

Json tool_call_json(const ToolCall& call) {
  return {{"id", call.id},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

Json tool_delta_json(const ToolCallDelta& delta) {
  Json fn = {{"arguments", delta.arguments}};
  Json out = {{"index", delta.index}};
  if (!delta.id.empty()) {
    out["id"] = delta.id;
    out["type"] = "function";
    fn["name"] = delta.name;
  }
  out["function"] = std::move(fn);
  return out;
}

// The tool_calls arrays of the chunks that carry `calls`, as vLLM streams
// them: a call's first chunk holds only its id, type and name (arguments ""),
// its argument text follows in the next.
std::vector<Json> tool_call_chunks(const std::vector<ToolCallDelta>& calls) {
  std::vector<Json> chunks;
  Json pending = Json::array();
  for (const auto& call : calls) {
    if (call.id.empty()) {
      pending.push_back(tool_delta_json(call));
      continue;
    }
    if (!pending.empty()) chunks.push_back(std::exchange(pending, Json::array()));
    chunks.push_back(Json::array({tool_delta_json({call.index, call.id, call.name, ""})}));
    if (!call.arguments.empty())
      pending.push_back(tool_delta_json({call.index, "", "", call.arguments}));
  }
  if (!pending.empty()) chunks.push_back(std::move(pending));
  return chunks;
}

// Builds the response on the job strand.
class ChatAssembler {
 public:
  ChatAssembler(const ServiceContext& ctx, ChatPlan plan, std::string id, int num_choices,
                std::shared_ptr<http::Responder> responder)
      : ctx_(ctx),
        plan_(std::move(plan)),
        id_(std::move(id)),
        choices_(num_choices),
        responder_(std::move(responder)) {
    if (plan_.request.stream && plan_.parse_tool_calls) {
      for (auto& choice : choices_)
        choice.tool_stream = tool_parser().start(plan_.prompt.tools.tools);
    }
    if (plan_.request.stream && ctx_.reasoning_parser) {
      for (auto& choice : choices_)
        choice.reasoning_stream = ctx_.reasoning_parser->start(plan_.prompt_think);
    }
  }

  const ChatPlan& plan() const { return plan_; }

  // The parser of this chat's tool calls (when plan_.parse_tool_calls).
  const ToolParser& tool_parser() const {
    return plan_.forced_tool_parser ? *plan_.forced_tool_parser : *ctx_.tool_parser;
  }

  // finish_reason "tool_calls" for a choice that called a tool, except under
  // a named tool_choice, where OpenAI and vLLM keep "stop" (or "length").
  Json finish_reason_of(const ChatChoice& choice) const {
    const bool named = plan_.prompt.tools.mode == ToolChoiceMode::kNamed;
    return choice.called_tool && !named ? Json("tool_calls") : choice.finish_reason;
  }

  void on_event(int index, int, RequestOutput& out, bool last, const Usage& usage) {
    ChatChoice& choice = choices_[index];
    if (!out.prompt_logprobs.empty()) prompt_logprobs_ = std::move(out.prompt_logprobs);
    Json entries = Json::array();
    if (const auto& k = plan_.request.params.logprobs) {
      for (const auto& lp : out.logprobs) {
        entries.push_back(chat_logprob_entry(ctx_.engine.tokenizer(), lp, *k));
      }
    }
    if (out.finish_reason) {
      choice.finish_reason = finish_reason_name(*out.finish_reason);
      choice.stop_reason = stop_reason_json(out);
    }
    if (plan_.request.stream) {
      stream_event(index, choice, out, std::move(entries));
      if (last) finish_stream(usage);
      return;
    }
    choice.text += out.text;
    for (auto& entry : entries) choice.logprobs.push_back(std::move(entry));
    if (plan_.return_token_ids) {
      for (int32_t id : out.token_ids) choice.token_ids.push_back(id);
    }
    if (last) send_response(usage);
  }

 private:
  Json envelope(const char* object) const {
    return {{"id", id_},
            {"object", object},
            {"created", created_},
            {"model", ctx_.model_name},
            {"system_fingerprint", ctx_.system_fingerprint}};
  }

  // `token_ids`: the choice's ids since the last chunk (null: not asked for);
  // `prompt_token_ids`: the chunk's (null: none).
  void write_chunk(int index, Json delta, Json logprobs, const Json& finish_reason,
                   const Json& stop_reason, Json token_ids = nullptr,
                   Json prompt_token_ids = nullptr) {
    Json choice = {{"index", index},
                   {"delta", std::move(delta)},
                   {"logprobs", std::move(logprobs)},
                   {"finish_reason", finish_reason}};
    if (!finish_reason.is_null()) choice["stop_reason"] = stop_reason;
    if (!token_ids.is_null()) choice["token_ids"] = std::move(token_ids);
    Json chunk = envelope("chat.completion.chunk");
    chunk["choices"] = Json::array({std::move(choice)});
    if (!prompt_token_ids.is_null()) chunk["prompt_token_ids"] = std::move(prompt_token_ids);
    if (plan_.request.include_usage) chunk["usage"] = nullptr;
    responder_->write(sse_event(chunk));
  }

  // return_token_ids: each choice's first (role) chunk carries the
  // response's prompt_token_ids, and every later chunk the choice's new ids
  // (vLLM's stream shape).
  void stream_event(int index, ChatChoice& choice, const RequestOutput& out, Json entries) {
    if (!choice.role_sent) {
      choice.role_sent = true;
      write_chunk(index, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr, nullptr,
                  nullptr, plan_.return_token_ids ? Json(plan_.prompt.token_ids) : Json());
    }
    Json ids = plan_.return_token_ids ? Json(out.token_ids) : Json();
    // The reasoning is split off first; tool calls are parsed from the answer.
    ReasoningDelta split;
    if (choice.reasoning_stream) {
      split = choice.reasoning_stream->feed(out.text);
      if (out.finish_reason) {
        ReasoningDelta last = choice.reasoning_stream->finish();
        split.reasoning += last.reasoning;
        split.content += last.content;
      }
      if (!plan_.include_reasoning) split.reasoning.clear();
    } else {
      split.content = out.text;
    }
    ToolStreamDelta delta;
    if (choice.tool_stream) {
      delta = choice.tool_stream->feed(split.content);
      if (out.finish_reason) delta.append(choice.tool_stream->finish());
      if (!plan_.parallel_tool_calls) {
        std::erase_if(delta.calls, [](const ToolCallDelta& call) { return call.index > 0; });
      }
    } else {
      delta.content = std::move(split.content);
    }
    std::vector<Json> tool_chunks = tool_call_chunks(delta.calls);
    if (!tool_chunks.empty()) choice.called_tool = true;
    const bool has_delta = !delta.content.empty() || !split.reasoning.empty() ||
                           !tool_chunks.empty() || !entries.empty();
    // New ids with no text yet (a stop string held back) still get a chunk.
    if (has_delta || (!out.finish_reason && !out.token_ids.empty() && !ids.is_null())) {
      Json d = Json::object();
      if (!split.reasoning.empty()) {
        d["reasoning_content"] = split.reasoning;  // vLLM's older name
        d["reasoning"] = std::move(split.reasoning);
      }
      if (!delta.content.empty()) d["content"] = delta.content;
      if (!tool_chunks.empty()) d["tool_calls"] = std::move(tool_chunks.front());
      Json logprobs = entries.empty() ? Json() : Json{{"content", std::move(entries)}};
      write_chunk(index, std::move(d), std::move(logprobs), nullptr, nullptr,
                  std::exchange(ids, ids.is_null() ? Json() : Json::array()));
    }
    for (size_t i = 1; i < tool_chunks.size(); ++i) {
      write_chunk(index, {{"tool_calls", std::move(tool_chunks[i])}}, nullptr, nullptr, nullptr);
    }
    if (out.finish_reason) {
      write_chunk(index, Json::object(), nullptr, finish_reason_of(choice), choice.stop_reason,
                  std::move(ids));
    }
  }

  void finish_stream(const Usage& usage) {
    if (plan_.request.include_usage) {
      Json chunk = envelope("chat.completion.chunk");
      chunk["choices"] = Json::array();
      chunk["usage"] = usage_json(usage);
      responder_->write(sse_event(chunk));
    }
    responder_->write(sse_done());
    responder_->end_stream();
  }

  // With a reasoning parser the message carries reasoning_content and
  // reasoning (vLLM's older and newer names; null when the output had none)
  // and content is the answer after it: null when empty after reasoning.
  Json choice_json(size_t index, ChatChoice& choice) const {
    Json message = {{"role", "assistant"}, {"content", choice.text}, {"refusal", nullptr}};
    std::string answer = choice.text;
    if (ctx_.reasoning_parser) {
      ParsedReasoning split =
          parse_reasoning(*ctx_.reasoning_parser, plan_.prompt_think, choice.text);
      answer = std::move(split.content);
      message["content"] = split.reasoning && answer.empty() ? Json() : Json(answer);
      Json reasoning = split.reasoning && plan_.include_reasoning ? Json(*split.reasoning) : Json();
      message["reasoning_content"] = reasoning;
      message["reasoning"] = std::move(reasoning);
    }
    Json finish_reason = choice.finish_reason;
    if (plan_.parse_tool_calls) {
      ParsedToolOutput parsed =
          parse_tool_output(tool_parser(), answer, plan_.prompt.tools.tools);
      if (!plan_.parallel_tool_calls && parsed.tool_calls.size() > 1) parsed.tool_calls.resize(1);
      if (!parsed.tool_calls.empty()) {
        message["content"] = parsed.content.empty() ? Json() : Json(parsed.content);
        message["tool_calls"] = Json::array();
        for (const auto& call : parsed.tool_calls)
          message["tool_calls"].push_back(tool_call_json(call));
        choice.called_tool = true;
        finish_reason = finish_reason_of(choice);
      }
    }
    Json logprobs = nullptr;
    if (plan_.request.params.logprobs)
      logprobs = {{"content", std::move(choice.logprobs)}, {"refusal", nullptr}};
    Json out = {{"index", index},
                {"message", std::move(message)},
                {"logprobs", std::move(logprobs)},
                {"finish_reason", std::move(finish_reason)},
                {"stop_reason", choice.stop_reason}};
    if (plan_.return_token_ids) out["token_ids"] = std::move(choice.token_ids);
    return out;
  }

  void send_response(const Usage& usage) {
    Json response = envelope("chat.completion");
    Json choices = Json::array();
    for (size_t i = 0; i < choices_.size(); ++i) choices.push_back(choice_json(i, choices_[i]));
    response["choices"] = std::move(choices);
    response["usage"] = usage_json(usage);
    // vLLM puts the prompt's logprobs and token ids on the response.
    if (plan_.prompt_logprobs) {
      response["prompt_logprobs"] =
          prompt_logprobs_json(ctx_.engine.tokenizer(), prompt_logprobs_, *plan_.prompt_logprobs);
    }
    if (plan_.return_token_ids) response["prompt_token_ids"] = plan_.prompt.token_ids;
    responder_->send(json_response(200, response));
  }

  const ServiceContext& ctx_;
  ChatPlan plan_;
  std::string id_;
  int64_t created_ = unix_seconds();
  std::vector<ChatChoice> choices_;
  std::shared_ptr<http::Responder> responder_;
  std::vector<std::optional<TokenLogprob>> prompt_logprobs_;  // from the first event
};

void start_chat(ServiceContext& ctx, ChatPlan plan, std::shared_ptr<http::Responder> responder) {
  if (!plan.tools_warning.empty()) {
    responder = http::with_extra_headers(std::move(responder),
                                         {{std::string(kWarningHeader), plan.tools_warning}});
  }
  if (ctx.draining) return responder->send(error_response(shutting_down_error()));
  auto job =
      std::make_shared<GenerationJob>(ctx.engine, ctx.io, ctx.io_gate, random_id("chatcmpl-"));
  const int num_choices = 1 * plan.request.params.n;
  auto assembler =
      std::make_shared<ChatAssembler>(ctx, std::move(plan), job->id(), num_choices, responder);
  const ChatPlan& a = assembler->plan();
  log_request(ctx.options.request_log, job->id() + "-0", a.prompt.text, a.prompt.token_ids,
              a.request.params);
  launch_generation(
      job, {a.prompt.token_ids}, a.request, ctx.draining, responder,
      [assembler](int index, int prompt_index, RequestOutput& out, bool last, const Usage& usage) {
        assembler->on_event(index, prompt_index, out, last, usage);
      });
}

}  // namespace

void handle_chat_completions(ServiceContext& ctx, const http::HttpRequest& request,
                             std::shared_ptr<http::Responder> responder) {
  ctx.run_on_worker(responder, request, [&ctx, request, responder] {
    auto body = parse_json_object(request.body);
    if (!body.ok()) return responder->send(error_response(api_error_from(body.error())));
    if (auto error = ctx.check_model(body.value())) return responder->send(error_response(*error));
    auto plan = plan_chat(ctx, body.value());
    if (!plan.ok()) return responder->send(error_response(plan.error()));
    start_chat(ctx, std::move(plan.value()), responder);
  });
}

}  // namespace pagoda::openai
