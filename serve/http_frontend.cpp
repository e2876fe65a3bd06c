#include "http_frontend.hpp"

#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "kserve_json.hpp"

namespace loom::serve {

namespace {

int http_status(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kFailedPrecondition: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kResourceExhausted: return 413;
    case StatusCode::kUnimplemented: return 501;
    case StatusCode::kUnavailable:
    case StatusCode::kDeviceLost: return 503;
    case StatusCode::kDeadlineExceeded: return 504;
    default: return 500;
  }
}

void send_error(httplib::Response& res, int status, std::string_view message) {
  res.status = status;
  res.set_content(error_json(message), "application/json");
}

void send_status(httplib::Response& res, const Status& status) {
  send_error(res, http_status(status.code()), status.message());
}

}  // namespace

// Serves connections on a fixed set of threads, with a bounded backlog.
// Connections past the backlog go to one more thread that answers each with
// 503 at once (the pre-routing handler knows it by its thread id), so that
// they are told rather than left waiting. (Outside the anonymous namespace:
// HttpFrontend::State points to one.)
class HttpConnectionPool : public httplib::TaskQueue {
 public:
  HttpConnectionPool(uint32_t threads, uint32_t max_pending) : max_pending_(max_pending) {
    for (uint32_t i = 0; i < threads; ++i) workers_.emplace_back([this] { work(jobs_); });
    overflow_thread_ = std::thread([this] { work(overflow_); });
    overflow_id_ = overflow_thread_.get_id();
  }
  ~HttpConnectionPool() override = default;

  void enqueue(std::function<void()> fn) override {
    {
      std::lock_guard lock(mu_);
      // Connections that idle threads are about to take do not count as
      // waiting: a burst must not overflow while threads are free.
      (jobs_.size() < idle_ + max_pending_ ? jobs_ : overflow_).push_back(std::move(fn));
    }
    cv_.notify_all();
  }

  void shutdown() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();
    overflow_thread_.join();
  }

  std::thread::id overflow_id() const { return overflow_id_; }

 private:
  void work(std::deque<std::function<void()>>& queue) {
    const bool counted = &queue == &jobs_;
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock lock(mu_);
        if (counted) ++idle_;
        cv_.wait(lock, [&] { return stopping_ || !queue.empty(); });
        if (counted) --idle_;
        if (queue.empty()) return;
        fn = std::move(queue.front());
        queue.pop_front();
      }
      fn();
    }
  }

  const size_t max_pending_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::deque<std::function<void()>> overflow_;
  bool stopping_ = false;
  size_t idle_ = 0;  // connection threads waiting for a job
  std::vector<std::thread> workers_;
  std::thread overflow_thread_;
  std::thread::id overflow_id_;
};

struct HttpFrontend::State {
  ModelServer* server = nullptr;
  HttpOptions options;
  httplib::Server http;
  HttpConnectionPool* pool = nullptr;  // owned by `http`
  std::thread listener;
  int port = 0;
  bool stopped = false;
};

namespace {

// The model and version of a /v2/models/{m}[/versions/{v}]... match.
std::pair<std::string, std::string> model_and_version(const httplib::Request& req) {
  return {req.matches[1].str(), req.matches.size() > 2 ? req.matches[2].str() : std::string()};
}

void handle_infer(ModelServer& server, const HttpOptions& options, const httplib::Request& req,
                  httplib::Response& res) {
  auto [model, version] = model_and_version(req);
  std::optional<uint64_t> header_length;
  if (req.has_header("Inference-Header-Content-Length")) {
    const std::string text = req.get_header_value("Inference-Header-Content-Length");
    char* end = nullptr;
    errno = 0;
    const unsigned long long n = std::strtoull(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || errno != 0 || text[0] == '-') {
      server.count_rejected("http", model);
      send_error(res, 400, "Inference-Header-Content-Length '" + text + "' is not a byte count");
      return;
    }
    header_length = n;
  }
  auto request = parse_infer_request(req.body, header_length, options.max_body_bytes);
  if (!request.ok()) {
    server.count_rejected("http", model);
    send_status(res, request.status());
    return;
  }
  request->model = model;
  request->version = version;
  auto response = server.infer(std::move(*request));
  if (!response.ok()) {
    send_status(res, response.status());
    return;
  }
  EncodedResponse encoded = encode_infer_response(*response);
  res.status = 200;
  if (encoded.json_length.has_value()) {
    res.set_header("Inference-Header-Content-Length", std::to_string(*encoded.json_length));
    res.set_content(encoded.body, "application/octet-stream");
  } else {
    res.set_content(encoded.body, "application/json");
  }
}

void add_routes(HttpFrontend::State& s) {
  ModelServer& server = *s.server;
  httplib::Server& http = s.http;
  const std::thread::id overflow = s.pool->overflow_id();
  http.set_pre_routing_handler([overflow](const httplib::Request&, httplib::Response& res) {
    if (std::this_thread::get_id() != overflow) return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("Connection", "close");
    send_error(res, 503, "too many connections are waiting; retry later");
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message;
    switch (res.status) {
      case 404: message = "no endpoint " + req.method + " " + req.path; break;
      case 413: message = "the request body is larger than this server takes (--max-request-bytes)"; break;
      case 400: message = "the request is malformed"; break;
      default: message = "HTTP " + std::to_string(res.status);
    }
    res.set_content(error_json(message), "application/json");
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    send_error(res, 500, "internal error while serving the request");
  });

  http.Get("/v2/health/live", [&server](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string("{\"live\":") + (server.live() ? "true" : "false") + "}", "application/json");
  });
  http.Get("/v2/health/ready", [&server](const httplib::Request&, httplib::Response& res) {
    const bool ready = server.ready();
    res.status = ready ? 200 : 503;
    res.set_content(std::string("{\"ready\":") + (ready ? "true" : "false") + "}", "application/json");
  });
  http.Get("/v2", [&server](const httplib::Request&, httplib::Response& res) {
    res.set_content(server_metadata_json(server.server_metadata()), "application/json");
  });
  auto metadata = [&server](const httplib::Request& req, httplib::Response& res) {
    auto [model, version] = model_and_version(req);
    auto m = server.model_metadata(model, version);
    if (!m.ok()) return send_status(res, m.status());
    res.set_content(model_metadata_json(*m), "application/json");
  };
  http.Get(R"(/v2/models/([^/]+))", metadata);
  http.Get(R"(/v2/models/([^/]+)/versions/([^/]+))", metadata);
  auto model_ready = [&server](const httplib::Request& req, httplib::Response& res) {
    auto [model, version] = model_and_version(req);
    auto ready = server.model_ready(model, version);
    if (!ready.ok()) return send_status(res, ready.status());
    res.status = *ready ? 200 : 503;
    nlohmann::json body = {{"name", model}, {"ready", *ready}};
    res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), "application/json");
  };
  http.Get(R"(/v2/models/([^/]+)/ready)", model_ready);
  http.Get(R"(/v2/models/([^/]+)/versions/([^/]+)/ready)", model_ready);
  auto infer = [&server, &s](const httplib::Request& req, httplib::Response& res) {
    handle_infer(server, s.options, req, res);
  };
  http.Post(R"(/v2/models/([^/]+)/infer)", infer);
  http.Post(R"(/v2/models/([^/]+)/versions/([^/]+)/infer)", infer);
  http.Get("/metrics", [&server](const httplib::Request&, httplib::Response& res) {
    res.set_content(server.metrics_text(), "text/plain; version=0.0.4");
  });
  http.Get("/v2/loom/trace", [&server](const httplib::Request& req, httplib::Response& res) {
    const std::string text = req.has_param("ms") ? req.get_param_value("ms") : "1000";
    char* end = nullptr;
    const long ms = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0') return send_error(res, 400, "ms '" + text + "' is not a whole number");
    auto trace = server.record_trace(std::chrono::milliseconds(ms));
    if (!trace.ok()) return send_status(res, trace.status());
    res.set_content(*trace, "application/json");
  });
}

}  // namespace

Result<std::unique_ptr<HttpFrontend>> HttpFrontend::start(ModelServer* server, const HttpOptions& options) {
  if (options.threads == 0) return invalid_argument("--http-threads must be at least 1");
  auto state = std::make_unique<State>();
  state->server = server;
  state->options = options;
  State* s = state.get();
  s->http.new_task_queue = [s] {
    s->pool = new HttpConnectionPool(s->options.threads, s->options.max_pending_connections);
    return s->pool;
  };
  // The task queue is made when listening starts; routes need its overflow
  // thread's id, so make it now and hand the same one over.
  httplib::TaskQueue* pool = s->http.new_task_queue();
  s->http.new_task_queue = [pool] { return pool; };
  add_routes(*s);
  s->http.set_payload_max_length(options.max_body_bytes + (1u << 20));
  s->http.set_read_timeout(options.read_timeout_s, 0);
  s->http.set_write_timeout(options.read_timeout_s, 0);
  s->http.set_keep_alive_timeout(options.keep_alive_timeout_s);
  // httplib closes a kept-alive connection after 5 requests by default: a
  // client would reconnect every 5th request. The idle timeout above is
  // what ends a kept-alive connection.
  s->http.set_keep_alive_max_count(1u << 30);
  s->http.set_tcp_nodelay(true);
  if (options.port == 0) {
    s->port = s->http.bind_to_any_port(options.host);
    if (s->port <= 0) {
      pool->shutdown();
      delete pool;
      return unavailable("cannot bind an HTTP port on " + options.host);
    }
  } else {
    if (!s->http.bind_to_port(options.host, options.port)) {
      pool->shutdown();
      delete pool;
      return unavailable("cannot bind HTTP port " + std::to_string(options.port) + " on " + options.host +
                         " (in use? --http-port 0 picks a free one)");
    }
    s->port = options.port;
  }
  s->listener = std::thread([s] { s->http.listen_after_bind(); });
  // stop() does nothing until the listener runs: wait for it, so that a
  // shutdown right after start cannot miss it.
  for (int i = 0; i < 5000 && !s->http.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::unique_ptr<HttpFrontend>(new HttpFrontend(std::move(state)));
}

HttpFrontend::HttpFrontend(std::unique_ptr<State> state) : state_(std::move(state)) {}

HttpFrontend::~HttpFrontend() { shutdown(); }

int HttpFrontend::port() const { return state_->port; }

void HttpFrontend::shutdown() {
  if (state_->stopped) return;
  state_->stopped = true;
  state_->http.stop();
  if (state_->listener.joinable()) state_->listener.join();
}

}  // namespace loom::serve
