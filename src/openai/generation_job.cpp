#include "openai/generation_job.h"

#include <fmt/format.h>

#include <boost/asio/post.hpp>

#include "core/log.h"
#include "openai/json_response.h"
#include "openai/sse.h"

namespace pagoda::openai {

namespace net = boost::asio;

Json usage_json(const Usage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", usage.cached_tokens}}}};
}

Json stop_reason_json(const RequestOutput& output) {
  if (const auto* s = std::get_if<std::string>(&output.stop_reason)) return *s;
  if (const auto* t = std::get_if<int32_t>(&output.stop_reason)) return *t;
  return nullptr;
}

GenerationJob::GenerationJob(Engine& engine, net::any_io_executor executor,
                             std::shared_ptr<http::PostGate> gate, std::string id)
    : engine_(engine),
      strand_(net::make_strand(std::move(executor))),
      gate_(std::move(gate)),
      id_(std::move(id)) {}

Status GenerationJob::submit(const std::vector<std::vector<int32_t>>& prompts,
                             const SamplingRequest& sampling) {
  num_samples_ = sampling.params.n;
  num_choices_ = static_cast<int>(prompts.size()) * num_samples_;
  prompt_seen_.assign(prompts.size(), false);
  for (size_t p = 0; p < prompts.size(); ++p) {
    GenerateRequest request;
    request.request_id = fmt::format("{}-{}", id_, p);
    request.prompt_token_ids = prompts[p];
    request.params = sampling.params;
    request.priority = sampling.priority;
    request.constraint = sampling.constraint;
    request.speculative = sampling.speculative;
    request.sink = [self = shared_from_this(), p](RequestOutput&& output) {
      self->gate_->post(self->strand_, [self, p, out = std::move(output)]() mutable {
        self->on_output(static_cast<int>(p), std::move(out));
      });
    };
    Status status = engine_.add_request(std::move(request));
    if (!status.ok()) {
      cancel();
      return status;
    }
    num_prompts_submitted_ = static_cast<int>(p) + 1;
  }
  return Status::Ok();
}

void GenerationJob::cancel() {
  if (cancelled_.exchange(true)) return;
  for (int p = 0; p < num_prompts_submitted_; ++p) engine_.abort(fmt::format("{}-{}", id_, p));
}

void GenerationJob::start(EventFn on_event) {
  net::post(strand_, [self = shared_from_this(), fn = std::move(on_event)]() mutable {
    self->on_event_ = std::move(fn);
    self->started_ = true;
    for (auto& [prompt_index, output] : self->held_) {
      if (self->cancelled_ || !self->on_event_) break;
      self->deliver(prompt_index, output);
    }
    self->held_.clear();
  });
}

void GenerationJob::on_output(int prompt_index, RequestOutput&& output) {
  if (cancelled_) return;
  if (!started_) {
    held_.emplace_back(prompt_index, std::move(output));
    return;
  }
  if (on_event_) deliver(prompt_index, output);
}

void GenerationJob::deliver(int prompt_index, RequestOutput& output) {
  if (output.index < 0 || output.index >= num_samples_) return;  // not a sample of this request
  if (!prompt_seen_[prompt_index]) {
    prompt_seen_[prompt_index] = true;
    usage_.prompt_tokens += output.num_prompt_tokens;
    usage_.cached_tokens += output.num_cached_prompt_tokens;
  }
  bool last = false;
  if (output.finish_reason) {
    usage_.completion_tokens += output.num_output_tokens;
    last = ++num_finished_ == num_choices_;
  }
  const int choice = prompt_index * num_samples_ + output.index;
  on_event_(choice, prompt_index, output, last, usage_);
  if (last) on_event_ = nullptr;  // releases the responder it holds
}

void launch_generation(const std::shared_ptr<GenerationJob>& job,
                       const std::vector<std::vector<int32_t>>& prompts,
                       const SamplingRequest& request, const std::atomic<bool>& draining,
                       const std::shared_ptr<http::Responder>& responder,
                       GenerationJob::EventFn on_event) {
  Status status = job->submit(prompts, request);
  if (!status.ok()) {
    log_debug("{}: engine refused: {}", job->id(), status.error().message);
    responder->send(
        error_response(draining ? shutting_down_error() : api_error_from(status.error())));
    return;
  }
  responder->on_cancel([job] { job->cancel(); });
  if (request.stream) responder->start_stream(200, kSseContentType, {});
  // The job owns this callback, so the raw pointer stays valid inside it.
  job->start([self = job.get(), responder, fn = std::move(on_event)](
                 int index, int prompt_index, RequestOutput& out, bool last, const Usage& usage) {
    // A request that failed inside the engine is never a success: the client
    // gets a 500 (non-streaming) or an SSE error event, whatever the handler.
    if (!out.error.empty()) {
      log_error("{}: the engine failed the request: {}", self->id(), out.error);
      self->cancel();
      responder->fail(failed_answer(internal_error(self->id())));
      return;
    }
    try {
      fn(index, prompt_index, out, last, usage);
    } catch (const std::exception& e) {
      log_error("{}: internal error while answering: {}", self->id(), e.what());
      self->cancel();
      responder->fail(failed_answer(internal_error(self->id())));
    }
  });
}

}  // namespace pagoda::openai
