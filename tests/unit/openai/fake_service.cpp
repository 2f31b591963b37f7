#include "fake_service.h"

namespace pagoda::testing {

void RecordingResponder::send(http::HttpResponse r) {
  std::lock_guard lock(mu_);
  status = r.status;
  body = std::move(r.body);
  headers = std::move(r.headers);
  done_locked();
}

void RecordingResponder::start_stream(int s, std::string, http::HttpHeaders h) {
  std::lock_guard lock(mu_);
  status = s;
  headers = std::move(h);
  streaming = true;
}

void RecordingResponder::write(std::string data) {
  std::lock_guard lock(mu_);
  body += data;
}

void RecordingResponder::end_stream() {
  std::lock_guard lock(mu_);
  done_locked();
}

void RecordingResponder::fail(http::FailedAnswer answer) {
  std::lock_guard lock(mu_);
  failed = true;
  if (streaming) {
    body += answer.stream_tail;
  } else {
    status = answer.response.status;
    body = std::move(answer.response.body);
  }
  done_locked();
}

void RecordingResponder::on_cancel(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  cancel_ = std::move(fn);
}

bool RecordingResponder::cancel() {
  std::function<void()> fn;
  {
    std::lock_guard lock(mu_);
    fn = cancel_;
  }
  if (!fn) return false;
  fn();
  return true;
}

bool RecordingResponder::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [this] { return done_; });
}

std::vector<std::string> RecordingResponder::events() const {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < body.size()) {
    const size_t end = body.find("\n\n", start);
    if (end == std::string::npos) break;
    out.push_back(body.substr(start + 6, end - start - 6));
    start = end + 2;
  }
  return out;
}

void RecordingResponder::done_locked() {
  ++num_answers;
  done_ = true;
  cv_.notify_all();
}

Result<std::unique_ptr<FakeService>> FakeService::create(const FakeEngineOptions& engine_options,
                                                         openai::ServiceOptions service_options,
                                                         int num_workers) {
  auto out = std::make_unique<FakeService>();
  PAGODA_ASSIGN_OR_RETURN(out->engine_, FakeEngine::create(engine_options));
  out->workers_ = std::make_unique<boost::asio::thread_pool>(num_workers);
  PAGODA_ASSIGN_OR_RETURN(auto context,
                          openai::ServiceContext::create(*out->engine_, std::move(service_options),
                                                         out->io_.get_executor(),
                                                         out->workers_->get_executor()));
  out->service_ = std::make_unique<openai::OpenAiService>(std::move(context));
  out->io_thread_ = std::thread([s = out.get()] { s->io_.run(); });
  return out;
}

FakeService::~FakeService() {
  work_.reset();
  if (workers_) workers_->join();
  if (io_thread_.joinable()) io_thread_.join();
}

std::shared_ptr<RecordingResponder> FakeService::call(http::HttpRequest request,
                                                      std::chrono::milliseconds timeout) {
  auto responder = std::make_shared<RecordingResponder>();
  service_->handle(request, responder);
  responder->wait(timeout);
  return responder;
}

std::shared_ptr<RecordingResponder> FakeService::post(const std::string& path, std::string body) {
  return call(http::HttpRequest{"POST", path, "", {}, std::move(body), "req-test"});
}

}  // namespace pagoda::testing
