#include "openai/server.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "core/log.h"
#include "http/http_listener.h"
#include "openai/json_response.h"
#include "openai/loading_answer.h"
#include "openai/openai_service.h"

namespace pagoda::openai {

namespace net = boost::asio;

namespace {

int default_threads(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
}

}  // namespace

Server::Server(ServerOptions options)
    : options_(std::move(options)),
      workers_(default_threads(options_.num_worker_threads)),
      heavy_workers_(options_.num_heavy_threads > 0
                         ? options_.num_heavy_threads
                         : std::max(1, default_threads(options_.num_worker_threads) / 2)),
      stats_(std::make_shared<http::ConnectionStats>()) {}

Result<std::unique_ptr<Server>> Server::start(ServerOptions options) {
  std::signal(SIGPIPE, SIG_IGN);
  auto server = std::make_unique<Server>(std::move(options));
  Server& s = *server;
  // The handler is the service's dispatch once attached; the transport's own
  // errors are worded as the API's.
  PAGODA_ASSIGN_OR_RETURN(
      s.listener_,
      http::HttpListener::open(
          s.ioc_, s.options_.host, s.options_.port, s.options_.limits,
          [&s](http::HttpRequest request, std::shared_ptr<http::Responder> responder) {
            s.handle(std::move(request), std::move(responder));
          },
          s.stats_, s.io_gate_,
          [](const http::TransportError& error) { return failed_answer(api_error_from(error)); },
          std::make_shared<const http::CorsPolicy>(s.options_.cors)));
  log_info("connections: at most {} ({} per client address), header timeout {} s, keep-alive {} s",
           s.listener_->limits().max_connections, s.listener_->limits().max_connections_per_peer,
           s.listener_->limits().header_timeout.count(),
           s.listener_->limits().keep_alive_timeout.count());
  s.work_.emplace(s.ioc_.get_executor());
  const int num_io = default_threads(s.options_.num_io_threads);
  for (int i = 0; i < num_io; ++i) s.io_threads_.emplace_back([&s] { s.run_io(); });
  // From here on SIGINT/SIGTERM are queued for run_load() and
  // wait_for_signal() instead of killing the process, even before they run.
  if (s.options_.handle_signals)
    s.signals_ = std::make_unique<net::signal_set>(s.signal_ioc_, SIGINT, SIGTERM);
  s.listener_->start();
  return server;
}

Result<std::unique_ptr<Server>> Server::start(Engine& engine, ServerOptions options) {
  PAGODA_ASSIGN_OR_RETURN(auto server, start(std::move(options)));
  PAGODA_RETURN_IF_ERROR(server->attach(engine));
  return server;
}

Status Server::attach(Engine& engine, std::optional<std::string> chat_template_text) {
  if (chat_template_text) options_.service.chat_template_text = std::move(*chat_template_text);
  PAGODA_ASSIGN_OR_RETURN(
      auto context,
      ServiceContext::create(engine, options_.service, ioc_.get_executor(), workers_.get_executor(),
                             heavy_workers_.get_executor(), io_gate_));
  if (!context->tool_parser) {
    log_info("tool calls: not parsed (no parser for this chat template; see --tool-call-parser)");
  } else {
    log_info("tool calls: parsed with the {} parser{}", context->tool_parser->name(),
             context->options.auto_tool_choice
                 ? ""
                 : " (tool_choice \"auto\" refused: --no-enable-auto-tool-choice)");
  }
  if (context->template_ignores_tools) {
    log_warn(
        "the chat template of '{}' ignores tools (it renders the same prompt with and without "
        "them): requests with tools are {}; pass --chat-template FILE naming a template that "
        "renders tools",
        context->model_name,
        context->options.strict_tools ? "refused with 400 (--strict-tools)"
                                      : "answered with an X-Pagoda-Warning header");
  }
  engine_ = &engine;
  service_ = std::make_unique<OpenAiService>(std::move(context));
  attached_.store(service_.get(), std::memory_order_release);
  return Status::Ok();
}

void Server::handle(http::HttpRequest request, std::shared_ptr<http::Responder> responder) {
  if (OpenAiService* service = attached_.load(std::memory_order_acquire)) {
    return service->handle(request, std::move(responder));
  }
  responder->send(loading_response(request, options_.service.api_key));
}

Server::~Server() {
  stop_threads(/*bounded=*/false);
}

void Server::run_io() {
  // Handlers catch what they can answer; anything else is logged and the
  // thread goes on serving the other connections.
  for (;;) {
    try {
      ioc_.run();
      return;
    } catch (const std::exception& e) {
      log_error("I/O thread: unhandled exception: {}", e.what());
    }
  }
}

uint16_t Server::port() const {
  return listener_->port();
}

std::string Server::url() const {
  const bool v6 = options_.host.find(':') != std::string::npos;
  return v6 ? fmt::format("http://[{}]:{}", options_.host, port())
            : fmt::format("http://{}:{}", options_.host, port());
}

void Server::run_load(const std::function<void()>& load) {
  if (!signals_) return load();
  std::thread loader([&] {
    load();
    net::post(signal_ioc_, [this] { signals_->cancel(); });
  });
  int received = 0;
  signals_->async_wait([&](const boost::system::error_code& ec, int signo) {
    if (!ec) received = signo;
  });
  signal_ioc_.run();
  if (received != 0) {
    log_info("received {} while loading the model; exiting",
             received == SIGINT ? "SIGINT" : "SIGTERM");
    std::fflush(nullptr);
    std::_Exit(0);
  }
  loader.join();
  signal_ioc_.restart();
}

void Server::wait_for_signal() {
  if (!signals_) signals_ = std::make_unique<net::signal_set>(signal_ioc_, SIGINT, SIGTERM);
  int received = 0;
  signals_->async_wait([&](const boost::system::error_code& ec, int signo) {
    if (!ec) received = signo;
  });
  signal_ioc_.run();
  log_info("received {}; draining in-flight requests (send it again to exit now)",
           received == SIGINT ? "SIGINT" : "SIGTERM");
  // A second signal during the drain exits at once.
  std::thread watchdog([this] {
    signal_ioc_.restart();
    signals_->async_wait([](const boost::system::error_code& ec, int) {
      if (!ec) {
        log_warn("second signal: exiting without finishing the drain");
        std::_Exit(1);
      }
    });
    signal_ioc_.run();
  });
  shutdown();
  net::post(signal_ioc_, [this] { signals_->cancel(); });
  watchdog.join();
}

void Server::shutdown() {
  if (stopped_) return;
  listener_->stop();
  if (!service_) {  // nothing reached an engine
    stop_threads(/*bounded=*/false);
    log_info("server stopped");
    return;
  }
  service_->set_draining();
  engine_->drain();
  // Answers being generated or written get flush_timeout; requests still on a
  // worker lane (answered 503 when they reach the engine) get worker_timeout.
  const std::atomic<int64_t>& on_lanes = service_->context().num_on_lanes;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const int64_t active = stats_->num_active_requests;
    const auto waited = std::chrono::steady_clock::now() - start;
    const bool writing = active > on_lanes;
    if (active <= 0 || waited >= (writing ? options_.flush_timeout : options_.worker_timeout)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (stats_->num_active_requests > on_lanes) {
    log_warn("{} responses were still being written after {} s; closing",
             stats_->num_active_requests - on_lanes, options_.flush_timeout.count());
  }
  stop_threads(/*bounded=*/true);
  log_info("server stopped");
}

void Server::stop_threads(bool bounded) {
  if (stopped_) return;
  stopped_ = true;
  io_gate_->close();
  work_.reset();
  ioc_.stop();
  for (auto& t : io_threads_) t.join();
  workers_.stop();
  heavy_workers_.stop();
  // A request still being parsed or tokenized cannot be interrupted (it
  // would only be answered 503); shutdown() waited worker_timeout for it.
  if (bounded && service_ && service_->context().num_on_lanes > 0) {
    log_warn("{} requests were still being parsed or tokenized {} s after the drain; exiting without them",
             service_->context().num_on_lanes.load(), options_.worker_timeout.count());
    std::_Exit(0);
  }
  workers_.join();
  heavy_workers_.join();
}

}  // namespace pagoda::openai
