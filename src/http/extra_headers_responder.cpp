#include "http/extra_headers_responder.h"

namespace pagoda::http {

namespace {

class ExtraHeadersResponder : public Responder {
 public:
  ExtraHeadersResponder(std::shared_ptr<Responder> inner, HttpHeaders headers)
      : inner_(std::move(inner)), headers_(std::move(headers)) {}

  void send(HttpResponse response) override {
    add_to(response.headers);
    inner_->send(std::move(response));
  }
  void start_stream(int status, std::string content_type, HttpHeaders headers) override {
    add_to(headers);
    inner_->start_stream(status, std::move(content_type), std::move(headers));
  }
  void write(std::string data) override { inner_->write(std::move(data)); }
  void end_stream() override { inner_->end_stream(); }
  void fail(FailedAnswer answer) override {
    add_to(answer.response.headers);
    inner_->fail(std::move(answer));
  }
  void on_cancel(std::function<void()> fn) override { inner_->on_cancel(std::move(fn)); }

 private:
  void add_to(HttpHeaders& headers) const {
    headers.insert(headers.end(), headers_.begin(), headers_.end());
  }

  std::shared_ptr<Responder> inner_;
  HttpHeaders headers_;
};

}  // namespace

std::shared_ptr<Responder> with_extra_headers(std::shared_ptr<Responder> inner,
                                              HttpHeaders headers) {
  return std::make_shared<ExtraHeadersResponder>(std::move(inner), std::move(headers));
}

}  // namespace pagoda::http
