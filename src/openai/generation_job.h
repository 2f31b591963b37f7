// One HTTP generation request fanned out to one engine request per prompt
// (each with SamplingParams::n samples). Engine events leave the engine thread
// at once: the sink only posts them to the job's strand, where they are
// numbered as OpenAI choices (choice = prompt_index * n + sample index) and
// counted for `usage`.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine_api.h"
#include "http/http_types.h"
#include "http/post_gate.h"
#include "openai/sampling_request.h"
#include "openai/wire/json_util.h"

namespace pagoda::openai {

struct Usage {
  int64_t prompt_tokens = 0;      // summed over prompts (once per prompt, not per sample)
  int64_t completion_tokens = 0;  // summed over choices
  int64_t cached_tokens = 0;      // prompt tokens served from the prefix cache
};
Json usage_json(const Usage& usage);

// The matched stop string, stop token id, or null.
Json stop_reason_json(const RequestOutput& output);

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  // Runs on the job strand for every event, in order per choice. `last` is
  // true for the final event of the last unfinished choice; `usage` holds the
  // totals so far (complete when `last`).
  using EventFn = std::function<void(int choice, int prompt_index, RequestOutput& output, bool last,
                                     const Usage& usage)>;

  GenerationJob(Engine& engine, boost::asio::any_io_executor executor,
                std::shared_ptr<http::PostGate> gate, std::string id);

  // Queues one engine request per prompt (ids "<id>-<prompt index>") with
  // request's params (params.n samples each), priority, constraint (null:
  // none) and speculative opt-out. On the first error the requests already
  // queued are aborted and the error returned. Events are held until start().
  Status submit(const std::vector<std::vector<int32_t>>& prompts, const SamplingRequest& request);
  // Delivers the held events, then every later one, to `on_event`. Anything
  // posted to another strand before start() is thus ordered before the events.
  void start(EventFn on_event);

  // Aborts every live engine request of the job and drops later events.
  // Thread-safe; idempotent.
  void cancel();

  const std::string& id() const { return id_; }
  int num_choices() const { return num_choices_; }

 private:
  void on_output(int prompt_index, RequestOutput&& output);
  void deliver(int prompt_index, RequestOutput& output);

  Engine& engine_;
  boost::asio::strand<boost::asio::any_io_executor> strand_;
  std::shared_ptr<http::PostGate> gate_;
  std::string id_;
  std::atomic<int> num_prompts_submitted_{0};
  int num_samples_ = 1;
  int num_choices_ = 0;
  EventFn on_event_;
  std::atomic<bool> cancelled_{false};
  // Strand state.
  bool started_ = false;
  std::vector<std::pair<int, RequestOutput>> held_;  // events before start()
  Usage usage_;
  std::vector<bool> prompt_seen_;
  int num_finished_ = 0;
};

// Runs `job` for an HTTP request: submits the prompts (GenerationJob::submit); if the engine
// refuses, answers its error (429 for a full queue, 400 for a bad request; 503 once `draining`: the
// server began shutting down after the handler checked). Otherwise cancels the job when the client
// goes away, opens the SSE stream when request.stream, and delivers the events to `on_event` --
// except an event with a non-empty RequestOutput::error (the engine failed the request): that one
// cancels the job and answers 500 (an SSE error event once streaming), so no
// handler ever turns a failed request into a 200.
void launch_generation(const std::shared_ptr<GenerationJob>& job,
                       const std::vector<std::vector<int32_t>>& prompts,
                       const SamplingRequest& request, const std::atomic<bool>& draining,
                       const std::shared_ptr<http::Responder>& responder,
                       GenerationJob::EventFn on_event);

}  // namespace pagoda::openai
