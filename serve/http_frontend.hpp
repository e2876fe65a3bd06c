// The REST front end of `loom serve`: the Open Inference Protocol's HTTP
// endpoints (KServe v2) over a ModelServer, on cpp-httplib.
//
//   GET  /v2/health/live, /v2/health/ready
//   GET  /v2                                   server metadata
//   GET  /v2/models/{m}[/versions/{v}]         model metadata
//   GET  /v2/models/{m}[/versions/{v}]/ready
//   POST /v2/models/{m}[/versions/{v}]/infer   JSON, or JSON + binary data
//   GET  /metrics                              Prometheus text
//   GET  /v2/loom/trace?ms=N                   a Chrome trace of N ms of runs
//
// Errors are {"error": "..."} with the status the protocol's codes map to
// (400 bad request, 404 unknown model or version, 413 too large, 503
// draining or overloaded, 504 deadline, 500 otherwise).
#pragma once

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>

#include "model_server.hpp"

namespace loom::serve {

struct HttpOptions {
  std::string host = "0.0.0.0";
  int port = 8000;  // 0: the system picks one (port() tells which)
  // Threads that serve connections; a connection holds one while it sends a
  // request or waits, kept alive, for the next.
  uint32_t threads = 32;
  // Connections waiting for a thread beyond which new ones are answered at
  // once with 503 and closed, so that a flood cannot queue without bound.
  uint32_t max_pending_connections = 256;
  // Bodies larger than this get 413 before they are read.
  uint64_t max_body_bytes = 64ull << 20;
  // A client that sends nothing for this long is dropped (a body that stops
  // mid-way, a slow client).
  time_t read_timeout_s = 10;
  time_t keep_alive_timeout_s = 5;
};

class HttpFrontend {
 public:
  // Binds and starts serving on a thread of its own. UNAVAILABLE when the
  // address cannot be bound.
  static Result<std::unique_ptr<HttpFrontend>> start(ModelServer* server, const HttpOptions& options);
  ~HttpFrontend();  // shutdown()
  HttpFrontend(const HttpFrontend&) = delete;
  HttpFrontend& operator=(const HttpFrontend&) = delete;

  int port() const;
  // Stops accepting connections and returns once the requests being served
  // are answered.
  void shutdown();

  struct State;  // private

 private:
  explicit HttpFrontend(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace loom::serve
