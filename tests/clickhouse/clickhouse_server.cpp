#include "clickhouse_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace spanring_test {

std::string clickhouse_server_path() {
  const char* env = std::getenv("CLICKHOUSE_SERVER");
  const std::string p = env != nullptr && env[0] != '\0' ? env : "/usr/sbin/clickhouse-server";
  return ::access(p.c_str(), X_OK) == 0 ? p : "";
}

uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket failed");
  sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot find a free port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

namespace {

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  if (!f) throw std::runtime_error("cannot write " + path);
}

std::string tail_of(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string s = ss.str();
  return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
}

}  // namespace

ClickHouseServer::ClickHouseServer(std::string dir, Ports ports, const std::string& cluster_name,
                                   const std::vector<Ports>& shards)
    : dir_(std::move(dir)), ports_(ports) {
  std::string remote;
  if (!cluster_name.empty()) {
    remote = "  <remote_servers>\n    <" + cluster_name + ">\n";
    for (const Ports& s : shards) {
      remote += "      <shard><replica><host>127.0.0.1</host><port>" + std::to_string(s.tcp) +
                "</port></replica></shard>\n";
    }
    remote += "    </" + cluster_name + ">\n  </remote_servers>\n";
  }
  // The smallest configuration 18.16 starts with: loopback only, caches small (several
  // servers share the machine), logs to files in dir.
  write_text(dir_ + "/config.xml",
             "<?xml version=\"1.0\"?>\n<yandex>\n"
             "  <logger><level>information</level><log>" + dir_ + "/log/server.log</log>"
             "<errorlog>" + dir_ + "/log/error.log</errorlog><console>0</console></logger>\n"
             "  <listen_host>127.0.0.1</listen_host>\n"
             "  <http_port>" + std::to_string(ports_.http) + "</http_port>\n"
             "  <tcp_port>" + std::to_string(ports_.tcp) + "</tcp_port>\n"
             "  <path>" + dir_ + "/data/</path>\n"
             "  <tmp_path>" + dir_ + "/tmp/</tmp_path>\n"
             "  <user_files_path>" + dir_ + "/user_files/</user_files_path>\n"
             "  <format_schema_path>" + dir_ + "/format_schemas/</format_schema_path>\n"
             "  <users_config>" + dir_ + "/users.xml</users_config>\n"
             "  <default_profile>default</default_profile>\n"
             "  <default_database>default</default_database>\n"
             "  <mark_cache_size>67108864</mark_cache_size>\n"
             "  <uncompressed_cache_size>0</uncompressed_cache_size>\n"
             "  <max_concurrent_queries>50</max_concurrent_queries>\n" +
             remote + "</yandex>\n");
  write_text(dir_ + "/users.xml",
             "<?xml version=\"1.0\"?>\n<yandex>\n"
             "  <profiles><default></default></profiles>\n"
             "  <users><default><password></password><networks><ip>127.0.0.1</ip></networks>"
             "<profile>default</profile><quota>default</quota></default></users>\n"
             "  <quotas><default></default></quotas>\n</yandex>\n");
  ::mkdir((dir_ + "/log").c_str(), 0755);
  client_ = std::make_unique<spanring::ClickHouseClient>(url(), std::chrono::seconds(60));
}

ClickHouseServer::~ClickHouseServer() { kill9(); }

void ClickHouseServer::start() {
  const std::string exe = clickhouse_server_path();
  if (exe.empty()) throw std::runtime_error("clickhouse-server not found");
  const std::string out = dir_ + "/log/stdout.log";
  const std::string config = "--config-file=" + dir_ + "/config.xml";
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    // The server dies with the test, whatever kills the test.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execl(exe.c_str(), exe.c_str(), config.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  spanring::ClickHouseClient ping(url(), std::chrono::seconds(2));
  while (std::chrono::steady_clock::now() < until) {
    int st;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("clickhouse-server exited at start; its log:\n" +
                               tail_of(dir_ + "/log/error.log") + tail_of(out));
    }
    if (ping.query("SELECT 1").ok()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  kill9();
  throw std::runtime_error("clickhouse-server did not answer within 60 s; its log:\n" +
                           tail_of(dir_ + "/log/error.log"));
}

void ClickHouseServer::kill9() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int st;
  ::waitpid(pid_, &st, 0);
  pid_ = -1;
}

std::string ClickHouseServer::query(const std::string& sql) {
  const spanring::ClickHouseReply r = client_->query(sql);
  if (!r.ok()) throw std::runtime_error("query failed: " + sql + ": " + r.error);
  return r.body;
}

}  // namespace spanring_test
