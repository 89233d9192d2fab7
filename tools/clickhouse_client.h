// A ClickHouse server's HTTP interface (https://clickhouse.com/docs/en/interfaces/http), through
// libcurl: queries in the POST body, inserts with the INSERT statement in the URL and the rows in
// the body. Used by `spanring export` (tools/export.h); cold path.
//
// One client per thread: it keeps one libcurl easy handle (and so one keep-alive connection).
// Nothing here retries: a reply says what happened and the caller (the exporter's shipper)
// decides whether to back off and send again.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

namespace spanring {

// What became of one request.
struct ClickHouseReply {
  enum class Kind : uint8_t {
    kOk,           // HTTP 200: the server executed the statement (an INSERT: every row is in)
    kUnreachable,  // no HTTP answer: connection refused or reset, timeout, DNS (server down)
    kRefused,      // an HTTP answer other than 200: the server refused the statement (`body`
                   // holds its `Code: N, e.displayText() = ...` text)
  };
  Kind kind = Kind::kUnreachable;
  long http_status = 0;  // 0 when kUnreachable
  std::string body;      // the response body (query results in the query's FORMAT)
  std::string error;     // kUnreachable: libcurl's message; kRefused: status and body's first line
  bool ok() const noexcept { return kind == Kind::kOk; }
};

class ClickHouseClient {
 public:
  // `url`: the server's HTTP interface, `http://HOST:PORT` (a path, `?` parameters and
  // `user:password@` are allowed; e.g. `http://127.0.0.1:8123/?user=u`). `timeout`: a whole
  // request, connection and transfer (a server that accepts but hangs is kUnreachable after it);
  // connecting alone is given at most 2 s. Throws std::runtime_error when libcurl cannot be
  // initialised.
  ClickHouseClient(std::string url, std::chrono::milliseconds timeout);
  ~ClickHouseClient();
  ClickHouseClient(const ClickHouseClient&) = delete;
  ClickHouseClient& operator=(const ClickHouseClient&) = delete;

  // Runs one SQL statement (sent as the POST body). Never throws for the server's sake.
  ClickHouseReply query(std::string_view sql);
  // Runs `insert` (an `INSERT INTO t (cols) FORMAT F` statement, sent as the URL's `query`
  // parameter) with `rows` (data in format F) as the POST body.
  ClickHouseReply insert(std::string_view insert, std::string_view rows);

  const std::string& url() const noexcept { return url_; }

 private:
  ClickHouseReply post(const std::string& url, std::string_view body);

  std::string url_;
  std::chrono::milliseconds timeout_;
  void* curl_ = nullptr;  // CURL*; void* keeps <curl/curl.h> out of this header
};

}  // namespace spanring
