#include "tools/clickhouse_client.h"

#include <curl/curl.h>

#include <mutex>
#include <stdexcept>

namespace spanring {

namespace {

// curl_global_init is not thread-safe and must run once before any handle exists.
void global_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
      throw std::runtime_error("libcurl: curl_global_init failed");
  });
}

size_t append_body(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

// The URL with `query=<escaped sql>` added to its parameters.
std::string with_query(CURL* curl, const std::string& url, std::string_view sql) {
  char* esc = curl_easy_escape(curl, sql.data(), static_cast<int>(sql.size()));
  if (esc == nullptr) throw std::runtime_error("libcurl: cannot escape a query");
  std::string out = url;
  if (out.find('?') == std::string::npos) {
    // http://host:port needs the path before its parameters.
    const size_t scheme = out.find("://");
    if (out.find('/', scheme == std::string::npos ? 0 : scheme + 3) == std::string::npos)
      out += '/';
    out += '?';
  } else if (out.back() != '?' && out.back() != '&') {
    out += '&';
  }
  out += "query=";
  out += esc;
  curl_free(esc);
  return out;
}

}  // namespace

ClickHouseClient::ClickHouseClient(std::string url, std::chrono::milliseconds timeout)
    : url_(std::move(url)), timeout_(timeout) {
  global_init();
  curl_ = curl_easy_init();
  if (curl_ == nullptr) throw std::runtime_error("libcurl: curl_easy_init failed");
}

ClickHouseClient::~ClickHouseClient() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

ClickHouseReply ClickHouseClient::query(std::string_view sql) { return post(url_, sql); }

ClickHouseReply ClickHouseClient::insert(std::string_view insert, std::string_view rows) {
  return post(with_query(static_cast<CURL*>(curl_), url_, insert), rows);
}

ClickHouseReply ClickHouseClient::post(const std::string& url, std::string_view body) {
  CURL* c = static_cast<CURL*>(curl_);
  ClickHouseReply r;
  char errbuf[CURL_ERROR_SIZE] = {};
  curl_easy_reset(c);  // keeps the connection cache: the next request reuses the connection
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  // No signals from libcurl (its DNS timeout uses SIGALRM otherwise): the exporter owns its
  // signal handlers.
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(timeout_.count()));
  // 2 s: a loopback or LAN server that has not accepted by then is down; the caller backs off.
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
  // Without this, curl sends `Expect: 100-continue` for bodies over 1 KiB and waits up to 1 s
  // for an answer that ClickHouse does send, but one round trip later.
  struct curl_slist* headers = curl_slist_append(nullptr, "Expect:");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  const CURLcode rc = curl_easy_perform(c);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    r.kind = ClickHouseReply::Kind::kUnreachable;
    r.error = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc);
    return r;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.http_status);
  if (r.http_status == 200) {
    r.kind = ClickHouseReply::Kind::kOk;
    return r;
  }
  r.kind = ClickHouseReply::Kind::kRefused;
  const std::string first_line = r.body.substr(0, r.body.find('\n'));
  r.error = "HTTP " + std::to_string(r.http_status) + ": " + first_line;
  return r;
}

}  // namespace spanring
