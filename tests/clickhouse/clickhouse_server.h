// A clickhouse-server of the test's own: a generated config.xml/users.xml in a temporary
// directory, its data, tmp and log directories there, HTTP and native ports on 127.0.0.1 picked
// free, started as a child process of the test (killed with the test: PR_SET_PDEATHSIG) and
// stopped at the end. No system service is used or needed.
#pragma once

#include "tools/clickhouse_client.h"

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spanring_test {

// The server binary: $CLICKHOUSE_SERVER, else /usr/sbin/clickhouse-server; empty when missing.
std::string clickhouse_server_path();

// A free TCP port on 127.0.0.1 (bound and released; the test's servers start right after).
uint16_t free_port();

class ClickHouseServer {
 public:
  struct Ports {
    uint16_t http = 0;
    uint16_t tcp = 0;
  };
  // Writes the configuration into `dir` (which must exist). `cluster_name` and `shards`: a
  // remote_servers entry naming one shard per port (the native ports of the cluster's servers,
  // this one included), for Distributed tables; none when empty.
  ClickHouseServer(std::string dir, Ports ports, const std::string& cluster_name,
                   const std::vector<Ports>& shards);
  ~ClickHouseServer();  // kill9()
  ClickHouseServer(const ClickHouseServer&) = delete;
  ClickHouseServer& operator=(const ClickHouseServer&) = delete;

  // Starts the server and waits (up to 60 s) until its HTTP interface answers `/ping`; throws
  // std::runtime_error with its log's tail when it does not. Restarting after kill9() reuses
  // the data directory (what was inserted before is still there).
  void start();
  // SIGKILL, then waits for the process: a server killed mid-run.
  void kill9();
  bool running() const noexcept { return pid_ > 0; }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(ports_.http); }
  const Ports& ports() const noexcept { return ports_; }
  // Runs `sql` and returns the response body; throws std::runtime_error when it fails.
  std::string query(const std::string& sql);

 private:
  std::string dir_;
  Ports ports_;
  pid_t pid_ = -1;
  std::unique_ptr<spanring::ClickHouseClient> client_;
};

}  // namespace spanring_test
