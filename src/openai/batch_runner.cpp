#include "openai/batch_runner.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "openai/batch_line.h"
#include "openai/wire/ids.h"

namespace pagoda::openai {

namespace {

// Turns the one answer of a request into its output line. The service never
// streams here (run() refuses "stream": true), so a streamed answer is
// reported as an internal error rather than written.
class LineResponder : public http::Responder {
 public:
  LineResponder(std::string custom_id, std::string request_id, BatchRunner::Done done)
      : custom_id_(std::move(custom_id)),
        request_id_(std::move(request_id)),
        done_(std::move(done)) {}

  void send(http::HttpResponse response) override { answer(response); }
  void start_stream(int, std::string, http::HttpHeaders) override {}
  void write(std::string) override {}
  void end_stream() override {
    answer(http::HttpResponse{
        500, "application/json", dump_json(api_error_json(internal_error(request_id_))), {}});
  }
  void fail(http::FailedAnswer failed) override { answer(failed.response); }
  void on_cancel(std::function<void()>) override {}  // a batch line is never abandoned

 private:
  void answer(const http::HttpResponse& response) {
    if (answered_.exchange(true)) return;
    Result<Json> body = parse_json_object(response.body);
    done_(batch_response_line(custom_id_, request_id_, response.status,
                              body.ok() ? std::move(body.value()) : Json(response.body)));
  }

  std::string custom_id_, request_id_;
  BatchRunner::Done done_;
  std::atomic<bool> answered_{false};
};

int num_worker_threads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
}

}  // namespace

BatchRunner::BatchRunner()
    : work_(boost::asio::make_work_guard(io_)), workers_(num_worker_threads()) {}

Result<std::unique_ptr<BatchRunner>> BatchRunner::create(Engine& engine, ServiceOptions options) {
  auto runner = std::make_unique<BatchRunner>();
  PAGODA_ASSIGN_OR_RETURN(
      auto context, ServiceContext::create(engine, std::move(options), runner->io_.get_executor(),
                                           runner->workers_.get_executor()));
  runner->service_ = std::make_unique<OpenAiService>(std::move(context));
  runner->io_thread_ = std::thread([r = runner.get()] { r->io_.run(); });
  return runner;
}

BatchRunner::~BatchRunner() {
  work_.reset();
  workers_.join();
  if (io_thread_.joinable()) io_thread_.join();
}

void BatchRunner::run(std::string_view line, Done done) {
  Result<BatchRequestLine, BatchLineError> request = parse_batch_line(line);
  if (!request.ok()) return done(batch_error_line(request.error()));
  const std::string request_id = random_id("batch-");
  if (auto stream = request->body.find("stream");
      stream != request->body.end() && *stream == true) {
    ApiError error = invalid_field("stream", "\"stream\": true is not supported in a batch file");
    return done(
        batch_response_line(request->custom_id, request_id, error.status, api_error_json(error)));
  }
  http::HttpRequest http{"POST", request->url, "", {}, dump_json(request->body), request_id};
  service_->handle(
      http, std::make_shared<LineResponder>(request->custom_id, request_id, std::move(done)));
}

}  // namespace pagoda::openai
