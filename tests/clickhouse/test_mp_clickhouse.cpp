// Suite 'clickhouse': `spanring export` into real clickhouse-server processes on loopback
// (tools/export.h, docs/clickhouse.md). One executable, so that its servers are started once
// and shared by the cases; each case writes under its own --host-id, so their rows never mix.
//
// Every count is checked against what the trace file holds, read by `spanring report --json`
// (or by the format's reader for the merged percentiles): records per span name, drops,
// unfinished spans, processes. Queries read with FINAL (docs/clickhouse.md), so a row sent twice
// would show up as a mismatch.
//
// Exits 77 (meson: SKIP) with a message when clickhouse-server is not installed.
#include "clickhouse_server.h"
#include "mp_util.h"

#include "format/convert_io.h"
#include "format/event_spelling.h"
#include "format/trace_reader.h"

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using nlohmann::json;
using spanring_test::ClickHouseServer;
using spanring_test::RunResult;
using spanring_test::TempDir;
using spanring_test::exe_from_env;
using spanring_test::run_process;

namespace {

constexpr const char* kCluster = "spanring_test";

// Three servers for the whole executable: `a` and `b` are the two shards of kCluster (each
// names both in its remote_servers) and hold only the two-shard case's hosts; `c` serves the
// other cases (the kill test kills and restarts it).
struct Servers {
  TempDir dir;
  std::unique_ptr<ClickHouseServer> a, b, c;
  Servers() {
    const ClickHouseServer::Ports pa{spanring_test::free_port(), spanring_test::free_port()};
    const ClickHouseServer::Ports pb{spanring_test::free_port(), spanring_test::free_port()};
    const ClickHouseServer::Ports pc{spanring_test::free_port(), spanring_test::free_port()};
    for (const char* d : {"/a", "/b", "/c"}) ::mkdir((dir.path() + d).c_str(), 0755);
    a = std::make_unique<ClickHouseServer>(dir.path() + "/a", pa, kCluster,
                                           std::vector<ClickHouseServer::Ports>{pa, pb});
    b = std::make_unique<ClickHouseServer>(dir.path() + "/b", pb, kCluster,
                                           std::vector<ClickHouseServer::Ports>{pa, pb});
    c = std::make_unique<ClickHouseServer>(dir.path() + "/c", pc, "",
                                           std::vector<ClickHouseServer::Ports>{});
    a->start();
    b->start();
    c->start();
  }
};
Servers& servers() {
  static Servers s;
  return s;
}

uint64_t u64(const json& v) {
  // ClickHouse quotes 64-bit integers in JSON output (output_format_json_quote_64bit_integers).
  return v.is_string() ? std::stoull(v.get<std::string>()) : v.get<uint64_t>();
}

std::vector<json> rows(ClickHouseServer& s, const std::string& sql) {
  const std::string body = s.query(sql + " FORMAT JSONEachRow");
  std::vector<json> out;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

uint64_t scalar(ClickHouseServer& s, const std::string& sql) {
  const std::vector<json> r = rows(s, sql);
  REQUIRE_MESSAGE(r.size() == 1, sql);
  return u64(r[0].begin().value());
}

json report(const std::string& file) {
  const RunResult r = run_process({exe_from_env("SPANRING_EXE"), "report", "--json", file});
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  return json::parse(r.out);
}

// Where the whole blocks of binary trace `file` end: its size when `spanring report` reads it
// complete, the start of the block it is cut in when it ends inside one.
uint64_t whole_blocks_end(const std::string& file) {
  const json r = report(file);
  if (r["status"] == "complete") return r["bytes"].get<uint64_t>();
  REQUIRE_MESSAGE(r["status"] == "cut", r.dump());
  const std::string problem = r["problem"].get<std::string>();
  static const std::regex block_start("(?:starts|starting) at byte ([0-9]+)");
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_search(problem, m, block_start), problem);
  return std::stoull(m[1].str());
}

// `spanring export ARGS...`, to its end.
RunResult export_(const std::vector<std::string>& args, int timeout_s = 120) {
  std::vector<std::string> argv = {exe_from_env("SPANRING_EXE"), "export"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, timeout_s);
}

// The summary line's `key=N`.
uint64_t summary_field(const std::string& err, const std::string& key) {
  const auto lines = spanring_test::lines_starting(err, "spanring: export summary:");
  REQUIRE_MESSAGE(lines.size() == 1, err);
  const size_t at = lines[0].find(" " + key + "=");
  REQUIRE_MESSAGE(at != std::string::npos, lines[0]);
  return std::stoull(lines[0].substr(at + key.size() + 2));
}

// Checks that the rows of `host` in `db`.<table><suffix> are exactly what `file` holds.
void check_rows_equal_file(ClickHouseServer& s, const std::string& host, const std::string& file,
                           const std::string& suffix = "") {
  const json rep = report(file);
  REQUIRE(rep["status"] == "complete");
  const std::string where = " FINAL WHERE host = '" + host + "'";
  std::map<std::string, uint64_t> want, got;
  for (const json& n : rep["names"]) want[n["name"]] = n["count"];
  for (const json& r : rows(s, "SELECT name, count() AS c FROM spanring.spans" + suffix + where +
                                   " GROUP BY name"))
    got[r["name"]] = u64(r["c"]);
  CHECK(got == want);
  CHECK(scalar(s, "SELECT count() FROM spanring.spans" + suffix + where) ==
        rep["records"].get<uint64_t>());
  CHECK(scalar(s, "SELECT sum(dropped) FROM spanring.drops" + suffix + where) ==
        rep["dropped"].get<uint64_t>());
  CHECK(scalar(s, "SELECT count() FROM spanring.drops" + suffix + where) == rep["drops"].size());
  CHECK(scalar(s, "SELECT sum(if(undescribed = 0, 1, undescribed)) FROM spanring.unfinished" +
                      suffix + where) == rep["unfinished"].get<uint64_t>());
  uint64_t anchored = 0;
  for (const json& p : rep["by_process"]) anchored += p["anchor"].is_null() ? 0 : 1;
  CHECK(scalar(s, "SELECT count() FROM spanring.processes" + suffix + where) == anchored);
  // Wall clock: every host span at or after its process' anchor has one, which is
  // anchor wall + (ts - anchor mono).
  CHECK(scalar(s, "SELECT count() FROM spanring.spans" + suffix + where +
                      " AND device = 0 AND wall_ns = 0 AND ts >= 1000000000000") == 0);
}

// A process in the background, its stdout and stderr to files.
struct Background {
  pid_t pid = -1;
  std::string err_path;
  Background(const std::vector<std::string>& argv, const std::string& err_file)
      : err_path(err_file) {
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::setpgid(0, 0);
      ::unsetenv("SPANRING_SEGMENT");
      const int fd = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 1);
      ::dup2(fd, 2);
      std::vector<char*> a;
      for (const std::string& s : argv) a.push_back(const_cast<char*>(s.c_str()));
      a.push_back(nullptr);
      ::execv(a[0], a.data());
      ::_exit(127);
    }
    // Also here: the child's own setpgid may not have run yet when the parent kills the group.
    ::setpgid(pid, pid);
  }
  // Waits for the exit (up to `timeout_s`, then SIGKILL); its exit status, -1 when killed.
  int wait(int timeout_s = 120) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    int st = 0;
    while (::waitpid(pid, &st, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > until) {
        ::kill(-pid, SIGKILL);
        ::waitpid(pid, &st, 0);
        FAIL("timed out: " << spanring_test::read_file(err_path));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pid = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
  void kill9() {
    ::kill(pid, SIGKILL);
    int st;
    ::waitpid(pid, &st, 0);
    pid = -1;
  }
  ~Background() {
    if (pid > 0) {
      ::kill(-pid, SIGKILL);
      int st;
      ::waitpid(pid, &st, 0);
    }
  }
  std::string err() const { return spanring_test::read_file(err_path); }
};

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

void wait_for_file(const std::string& path, Background& still_running) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!exists(path)) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < until, "no " << path);
    int st;
    REQUIRE_MESSAGE(::waitpid(still_running.pid, &st, WNOHANG) == 0,
                    "exited before " << path << " appeared: " << still_running.err());
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// `spanring run --format binary -o FILE -- det_emitter` in the background: a workload that
// runs for a few seconds (records paced), with drops (records the producer refuses). `holds`
// are det_emitter's --hold N:FILE: the workload waits before record N until the test creates
// FILE, so that what the test needs to happen while it runs does not race its pace.
std::unique_ptr<Background> paced_run(const TempDir& tmp, const std::string& file,
                                      const std::string& count, const std::string& pace_us,
                                      const std::vector<std::string>& holds = {}) {
  std::vector<std::string> argv = {exe_from_env("SPANRING_EXE"), "run", "--format", "binary",
                                   "-o", file, "--", exe_from_env("FAULT_DET_EMITTER"), "--out",
                                   tmp.file("det.json"), "--count", count, "--pace-us", pace_us};
  for (const std::string& h : holds) {
    argv.push_back("--hold");
    argv.push_back(h);
  }
  return std::make_unique<Background>(argv, tmp.file("run.err"));
}

void create_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  REQUIRE_MESSAGE(fd >= 0, "cannot create " << path);
  ::close(fd);
}

// Waits (up to 60 s) until `b`'s stderr holds `text`, while it runs.
void wait_for_err(Background& b, const std::string& text) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  // The child creates its stderr file after the fork: not there yet reads as nothing said.
  while ((exists(b.err_path) ? b.err() : std::string()).find(text) == std::string::npos) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < until,
                    "never said '" << text << "': " << b.err());
    int st;
    REQUIRE_MESSAGE(::waitpid(b.pid, &st, WNOHANG) == 0,
                    "exited before saying '" << text << "': " << b.err());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// The docs' queries (docs/clickhouse.md): each must appear there verbatim, and runs here.
std::string doc_text() {
  const char* path = std::getenv("SPANRING_CLICKHOUSE_DOC");
  REQUIRE_MESSAGE(path != nullptr,
                  "SPANRING_CLICKHOUSE_DOC is not set (tests/clickhouse/meson.build sets it)");
  return spanring_test::read_file(path);
}
void check_in_doc(const std::string& sql) {
  static const std::string doc = doc_text();
  CHECK_MESSAGE(doc.find(sql) != std::string::npos, "docs/clickhouse.md lacks the query:\n" << sql);
}

const std::string kPerName =
    "SELECT name, count() AS spans,\n"
    "       arrayElement(arraySort(groupArray(dur)), intDiv(count() * 50 + 99, 100)) AS p50_ns,\n"
    "       arrayElement(arraySort(groupArray(dur)), intDiv(count() * 99 + 99, 100)) AS p99_ns,\n"
    "       max(dur) AS max_ns, sum(dur) AS total_ns\n"
    "FROM spanring.spans_all FINAL\n"
    "GROUP BY name\n"
    "ORDER BY total_ns DESC";
const std::string kSlowest =
    "SELECT host, pid, tid, thread, name, inv, dur\n"
    "FROM spanring.spans_all FINAL\n"
    "WHERE depth = 0 AND device = 0\n"
    "ORDER BY dur DESC\n"
    "LIMIT 3 BY host";
const std::string kLosses =
    "SELECT host, reason, sum(dropped) AS records, count() AS ranges\n"
    "FROM spanring.drops_all FINAL\n"
    "GROUP BY host, reason\n"
    "ORDER BY host, reason";
const std::string kUnfinished =
    "SELECT host, sum(if(undescribed = 0, 1, undescribed)) AS unfinished\n"
    "FROM spanring.unfinished_all FINAL\n"
    "GROUP BY host\n"
    "ORDER BY host";
const std::string kOneTask =
    "SELECT host, pid, tid, thread, name, depth, wall_ns, dur\n"
    "FROM spanring.spans_all FINAL\n"
    "WHERE (attr_values[indexOf(attr_keys, 'run_id')] = '1'\n"
    "       AND attr_values[indexOf(attr_keys, 'task_slot')] = '3')\n"
    "   OR (host, session, pid, inv) GLOBAL IN (\n"
    "        SELECT host, session, pid, inv FROM spanring.spans_all FINAL\n"
    "        WHERE name = 'chip.run' AND inv != 0\n"
    "          AND attr_values[indexOf(attr_keys, 'run_id')] = '1'\n"
    "          AND attr_values[indexOf(attr_keys, 'task_slot')] = '3')\n"
    "ORDER BY host, wall_ns";

// Every span duration per encoded name, read from the files with the format's reader.
std::map<std::string, std::vector<uint64_t>> durations(const std::vector<std::string>& files) {
  struct V : spanring::EventVisitor {
    std::map<std::string, std::vector<uint64_t>> by_name;
    spanring::EventSpelling sp;
    void span(const spanring::SpanEvent& e) override {
      by_name[std::string(sp.span(e).name)].push_back(e.dur_ns);
    }
  } v;
  for (const std::string& f : files) {
    spanring::TraceInput in = spanring::TraceInput::open(f);
    REQUIRE(spanring::read_trace(in, v).status == spanring::ReadResult::Status::kComplete);
  }
  return std::move(v.by_name);
}

uint64_t nearest_rank(std::vector<uint64_t> v, uint64_t p) {
  std::sort(v.begin(), v.end());
  return v[(p * v.size() + 99) / 100 - 1];
}

}  // namespace

TEST_CASE("a binary trace of the l3 demo exports to exactly the rows the file holds, twice over") {
  Servers& s = servers();
  TempDir tmp;
  const std::string file = tmp.file("demo.sptrace");
  const RunResult run = run_process({exe_from_env("SPANRING_EXE"), "run", "--format", "binary",
                                     "-o", file, "--", exe_from_env("L3_DEMO")});
  REQUIRE_MESSAGE(run.exit_code == 0, run.describe());
  const uint64_t records = report(file)["records"];
  REQUIRE(records > 0);
  for (int pass = 0; pass < 2; ++pass) {
    CAPTURE(pass);
    const RunResult e = export_({file, "--clickhouse", s.c->url(), "--host-id", "bin-demo"});
    REQUIRE_MESSAGE(e.exit_code == 0, e.describe());
    // Each pass sends every row; the second one's are merged with the first's.
    CHECK(summary_field(e.err, "spans") == records);
    CHECK(summary_field(e.err, "undelivered") == 0);
    check_rows_equal_file(*s.c, "bin-demo", file);
  }
  // Thread names and attributes arrive as parallel arrays.
  CHECK(scalar(*s.c, "SELECT count() FROM spanring.spans FINAL WHERE host = 'bin-demo' AND "
                     "thread = 'l3-sched' AND name = 'node.dispatch'") > 0);
  CHECK(scalar(*s.c, "SELECT count() FROM spanring.spans FINAL WHERE host = 'bin-demo' AND "
                     "length(attr_keys) != length(attr_values)") == 0);
  CHECK(scalar(*s.c, "SELECT count() FROM spanring.spans FINAL WHERE host = 'bin-demo' AND "
                     "name = 'node.dispatch' AND has(attr_keys, 'task_slot')") ==
        scalar(*s.c, "SELECT count() FROM spanring.spans FINAL WHERE host = 'bin-demo' AND "
                     "name = 'node.dispatch'"));
}

TEST_CASE("a [STRACE] text trace with escapes, cut names and drops exports to what it holds") {
  Servers& s = servers();
  TempDir tmp;
  const std::string file = tmp.file("det.strace");
  const RunResult run = run_process({exe_from_env("SPANRING_EXE"), "run", "-o", file, "--",
                                     exe_from_env("FAULT_DET_EMITTER"), "--out",
                                     tmp.file("det.json"), "--count", "3000"});
  REQUIRE_MESSAGE(run.exit_code == 0, run.describe());
  REQUIRE(report(file)["dropped"].get<uint64_t>() > 0);  // the workload's invalid records
  for (int pass = 0; pass < 2; ++pass) {
    const RunResult e = export_({file, "--clickhouse", s.c->url(), "--host-id", "text-det"});
    REQUIRE_MESSAGE(e.exit_code == 0, e.describe());
    check_rows_equal_file(*s.c, "text-det", file);
  }
  // Device spans are flagged and get no wall clock.
  CHECK(scalar(*s.c, "SELECT count() FROM spanring.spans FINAL WHERE host = 'text-det' AND "
                     "device = 1 AND wall_ns != 0") == 0);
  CHECK(scalar(*s.c, "SELECT count() FROM spanring.spans FINAL WHERE host = 'text-det' AND "
                     "device = 1") > 0);
}

TEST_CASE("rows ClickHouse refuses are counted as undelivered, and the exit status says so") {
  Servers& s = servers();
  TempDir tmp;
  const std::string file = tmp.file("det.sptrace");
  const RunResult run = run_process({exe_from_env("SPANRING_EXE"), "run", "--format", "binary",
                                     "-o", file, "--", exe_from_env("FAULT_DET_EMITTER"), "--out",
                                     tmp.file("det.json"), "--count", "500"});
  REQUIRE_MESSAGE(run.exit_code == 0, run.describe());
  // A `spans` table of another shape: every insert into it is refused.
  s.c->query("CREATE DATABASE IF NOT EXISTS refusing");
  s.c->query("CREATE TABLE IF NOT EXISTS refusing.spans (x UInt8) ENGINE = Memory");
  const RunResult e = export_({file, "--clickhouse", s.c->url(), "--database", "refusing",
                               "--host-id", "refused", "--retry-for", "0.5"});
  CHECK_MESSAGE(e.exit_code == 1, e.describe());
  const json rep = report(file);
  const uint64_t rows = rep["records"].get<uint64_t>() + rep["drops"].size() +
                        rep["processes"].get<uint64_t>();
  CHECK(summary_field(e.err, "spans") == 0);
  CHECK(summary_field(e.err, "undelivered") == rows);
  CHECK(e.err.find("spanring: warning: " + std::to_string(rows) + " rows of " + file +
                   " were not delivered") != std::string::npos);
  // No span reached the server: the file is where they are.
  CHECK(scalar(*s.c, "SELECT count() FROM refusing.spans") == 0);
}

TEST_CASE("a follower killed with SIGKILL mid-run and restarted delivers every record once") {
  Servers& s = servers();
  TempDir tmp;
  const std::string file = tmp.file("follow.sptrace");
  const std::string state = tmp.file("follow.state");
  auto run = paced_run(tmp, file, "20000", "100");
  const std::vector<std::string> follow = {
      exe_from_env("SPANRING_EXE"), "export", "--follow", file, "--clickhouse", s.c->url(),
      "--host-id", "follow-kill", "--state", state, "--while-pid", std::to_string(run->pid),
      "--flush-every", "0.2"};
  {
    Background f1(follow, tmp.file("f1.err"));
    wait_for_file(state, f1);  // a batch was acknowledged
    f1.kill9();
  }
  const uint64_t sent_before =
      scalar(*s.c, "SELECT count() FROM spanring.spans FINAL WHERE host = 'follow-kill'");
  CHECK(sent_before > 0);
  Background f2(follow, tmp.file("f2.err"));
  REQUIRE(run->wait() == 0);
  const int status = f2.wait();
  const std::string err = f2.err();
  REQUIRE_MESSAGE(status == 0, err);
  CHECK(err.find("spanring: export: resuming " + file + " at byte ") != std::string::npos);
  check_rows_equal_file(*s.c, "follow-kill", file);
  // The restarted follower sent only what the first had not: fewer spans than the file holds.
  CHECK(summary_field(err, "spans") < report(file)["records"].get<uint64_t>());
}

TEST_CASE("a drainer killed after a write and restarted, which rewrites what a follower read, "
          "still gives every record once") {
  if (!spanring_test::test_points_built()) {
    MESSAGE("skipped: this build has no test points (-Dtest_points=disabled or a release build)");
    return;
  }
  Servers& s = servers();
  TempDir tmp;
  const std::string file = tmp.file("restart.sptrace");
  const std::string state = tmp.file("restart.state");
  // The drainer kills itself at its third buffer that is in the file but not committed: a
  // block the follower can read, which the restarted drainer cuts off and writes again.
  ::setenv("SPANRING_TEST_POINT", "drainer_written_not_committed", 1);
  ::setenv("SPANRING_TEST_POINT_HIT", "3", 1);
  auto run = paced_run(tmp, file, "30000", "100");
  ::unsetenv("SPANRING_TEST_POINT");
  ::unsetenv("SPANRING_TEST_POINT_HIT");
  // Followed until SIGINT (the drainer is replaced, so there is no one pid to wait for).
  Background f({exe_from_env("SPANRING_EXE"), "export", "--follow", file, "--clickhouse",
                s.c->url(), "--host-id", "drainer-restart", "--state", state, "--flush-every",
                "0.1"},
               tmp.file("f.err"));
  REQUIRE(run->wait() == -1);  // SIGKILLed at the test point
  const std::string run_err = run->err();
  const std::string segment = spanring_test::segment_from_stderr(run_err).value_or("");
  REQUIRE_MESSAGE(!segment.empty(), run_err);
  // The killed run cannot remove its segment, and `spanring drain` leaves it to its creator:
  // removed here, whatever happens below.
  struct RemoveSegment {
    std::string name;
    ~RemoveSegment() { ::shm_unlink(("/" + name).c_str()); }
  } remove_segment{segment};
  // Before the restart, the follower has sent every whole block of the file, the uncommitted
  // one included. The file can end inside a block: the drainer keeps several writes in flight,
  // and the kill can fall between the pieces of the next buffer's; the follower waits at that
  // block's start.
  const uint64_t blocks_at_kill = whole_blocks_end(file);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    const std::string st = exists(state) ? spanring_test::read_file(state) : "";
    if (!st.empty() && json::parse(st)["offset"].get<uint64_t>() == blocks_at_kill) break;
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < until, "the follower never caught up");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Background drain({exe_from_env("SPANRING_EXE"), "drain", "--segment", segment, "-o", file},
                   tmp.file("drain.err"));
  // The emitter, orphaned by the killed run, writes its JSON when it is done.
  const auto done_by = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!exists(tmp.file("det.json")) || spanring_test::read_file(tmp.file("det.json")).empty()) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < done_by, "the workload never finished");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // SIGTERM: spanring drain drains everything published, flushes and exits 0.
  ::kill(drain.pid, SIGTERM);
  REQUIRE_MESSAGE(drain.wait() == 0, drain.err());
  CHECK(drain.err().find("resuming") != std::string::npos);
  // SIGINT: the follower reads every complete block and sends it before it exits.
  ::kill(f.pid, SIGINT);
  REQUIRE_MESSAGE(f.wait() == 0, f.err());
  const std::string err = f.err();
  CHECK(err.find("was cut back and rewritten (a restarted drainer)") != std::string::npos);
  check_rows_equal_file(*s.c, "drainer-restart", file);
  // What the follower sent from the cut-off block and again from its rewrite is merged: the
  // spans it sent add up to more than the file holds.
  CHECK(summary_field(err, "spans") > report(file)["records"].get<uint64_t>());
}

TEST_CASE("ClickHouse killed mid-run and restarted gets every record once, the workload "
          "unaffected") {
  Servers& s = servers();
  TempDir tmp;
  const std::string file = tmp.file("kill.sptrace");
  const std::string state = tmp.file("kill.state");
  // The workload stops half-way until the server is killed, and before its end until the
  // server is back: the outage is mid-run, records are written during it, whatever the pace.
  const std::string killed = tmp.file("killed"), restarted = tmp.file("restarted");
  auto run = paced_run(tmp, file, "30000", "100", {"15000:" + killed, "30000:" + restarted});
  Background f({exe_from_env("SPANRING_EXE"), "export", "--follow", file, "--clickhouse",
                s.c->url(), "--host-id", "server-kill", "--state", state, "--while-pid",
                std::to_string(run->pid), "--flush-every", "0.2"},
               tmp.file("f.err"));
  wait_for_file(state, f);
  s.c->kill9();
  create_file(killed);
  // The follower meets the outage with records to send, and retries.
  wait_for_err(f, "; retrying");
  int st;
  CHECK(::waitpid(run->pid, &st, WNOHANG) == 0);  // held: the outage is mid-run
  s.c->start();
  create_file(restarted);
  REQUIRE(run->wait() == 0);
  const int status = f.wait();
  const std::string err = f.err();
  REQUIRE_MESSAGE(status == 0, err);
  CHECK(err.find("; retrying") != std::string::npos);
  CHECK(err.find("answers again") != std::string::npos);
  CHECK(summary_field(err, "retries") > 0);
  CHECK(summary_field(err, "undelivered") == 0);
  check_rows_equal_file(*s.c, "server-kill", file);
  // The drainer lost nothing to the outage: the run's own summary.
  const auto summary = spanring_test::parse_summary(run->err());
  REQUIRE(summary);
  CHECK(summary->written == report(file)["records"].get<uint64_t>());
}

TEST_CASE("a follower started while ClickHouse is down waits for it, and sends everything") {
  Servers& s = servers();
  TempDir tmp;
  const std::string file = tmp.file("late.sptrace");
  s.c->kill9();
  // The workload ends only once the server is back (it holds before its end until then).
  const std::string restarted = tmp.file("restarted");
  auto run = paced_run(tmp, file, "30000", "100", {"30000:" + restarted});
  Background f({exe_from_env("SPANRING_EXE"), "export", "--follow", file, "--clickhouse",
                s.c->url(), "--host-id", "server-late", "--state", tmp.file("late.state"),
                "--while-pid", std::to_string(run->pid), "--flush-every", "0.2",
                // Shorter than the outage: --retry-for only counts once the workload has ended.
                "--retry-for", "0.5"},
               tmp.file("f.err"));
  // It has met the outage, and waits (wait_for_err fails if it exits): not given up.
  wait_for_err(f, "; retrying");
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  int st;
  CHECK(::waitpid(f.pid, &st, WNOHANG) == 0);  // still waiting, not given up
  s.c->start();
  create_file(restarted);
  REQUIRE(run->wait() == 0);
  const int status = f.wait();
  const std::string err = f.err();
  REQUIRE_MESSAGE(status == 0, err);
  CHECK(err.find("answers again") != std::string::npos);
  check_rows_equal_file(*s.c, "server-late", file);
}

TEST_CASE("two hosts on two shards of a Distributed table read as one, with exact counts") {
  Servers& s = servers();
  TempDir tmp;
  const RunResult schema = export_({"--create-schema", "--cluster", kCluster, "--clickhouse",
                                    s.a->url()});
  REQUIRE_MESSAGE(schema.exit_code == 0, schema.describe());
  const RunResult schema_b = export_({"--create-schema", "--cluster", kCluster, "--clickhouse",
                                      s.b->url()});
  REQUIRE_MESSAGE(schema_b.exit_code == 0, schema_b.describe());
  const std::string f1 = tmp.file("host1.sptrace"), f2 = tmp.file("host2.sptrace");
  for (const std::string& f : {f1, f2}) {
    const RunResult run = run_process({exe_from_env("SPANRING_EXE"), "run", "--format", "binary",
                                       "-o", f, "--", exe_from_env("L3_DEMO")});
    REQUIRE_MESSAGE(run.exit_code == 0, run.describe());
  }
  // Each host to its own shard.
  RunResult e = export_({f1, "--clickhouse", s.a->url(), "--host-id", "shard-host-1"});
  REQUIRE_MESSAGE(e.exit_code == 0, e.describe());
  e = export_({f2, "--clickhouse", s.b->url(), "--host-id", "shard-host-2"});
  REQUIRE_MESSAGE(e.exit_code == 0, e.describe());
  for (ClickHouseServer* via : {s.a.get(), s.b.get()}) {
    check_rows_equal_file(*via, "shard-host-1", f1, "_all");
    check_rows_equal_file(*via, "shard-host-2", f2, "_all");
  }
  // Each shard holds one host.
  CHECK(scalar(*s.b, "SELECT count() FROM spanring.spans FINAL WHERE host = 'shard-host-1'") == 0);
  CHECK(scalar(*s.a, "SELECT count() FROM spanring.spans FINAL WHERE host = 'shard-host-2'") == 0);

  // Per-name statistics over both hosts: the docs' query equals the files' merged numbers.
  check_in_doc(kPerName);
  const auto want = durations({f1, f2});
  const std::vector<json> per_name = rows(*s.a, kPerName);
  REQUIRE(per_name.size() == want.size());
  for (const json& r : per_name) {
    const std::string name = r["name"];
    CAPTURE(name);
    REQUIRE(want.count(name) == 1);
    const std::vector<uint64_t>& d = want.at(name);
    CHECK(u64(r["spans"]) == d.size());
    CHECK(u64(r["p50_ns"]) == nearest_rank(d, 50));
    CHECK(u64(r["p99_ns"]) == nearest_rank(d, 99));
    CHECK(u64(r["max_ns"]) == *std::max_element(d.begin(), d.end()));
  }
  // The slowest root spans per host: 3 of each, from that host, slowest first.
  check_in_doc(kSlowest);
  const std::vector<json> slowest = rows(*s.a, kSlowest);
  std::map<std::string, uint64_t> per_host;
  for (const json& r : slowest) ++per_host[r["host"]];
  CHECK(per_host == std::map<std::string, uint64_t>{{"shard-host-1", 3}, {"shard-host-2", 3}});
  // Losses per host: equal to each file's report.
  check_in_doc(kLosses);
  check_in_doc(kUnfinished);
  std::map<std::string, uint64_t> dropped, unfinished;
  for (const json& r : rows(*s.a, kLosses)) dropped[r["host"]] += u64(r["records"]);
  for (const json& r : rows(*s.a, kUnfinished)) unfinished[r["host"]] += u64(r["unfinished"]);
  const json r1 = report(f1), r2 = report(f2);
  CHECK(dropped["shard-host-1"] == r1["dropped"].get<uint64_t>());
  CHECK(dropped["shard-host-2"] == r2["dropped"].get<uint64_t>());
  CHECK(unfinished["shard-host-1"] == r1["unfinished"].get<uint64_t>());
  CHECK(unfinished["shard-host-2"] == r2["unfinished"].get<uint64_t>());
  // One task's spans across processes: on each host, its submit, dispatch and complete in the
  // scheduler process and its chip child's chip.run with the spans nested in it (same pid and
  // inv), in wall-clock order.
  check_in_doc(kOneTask);
  const std::vector<json> task = rows(*s.a, kOneTask);
  std::map<std::string, std::set<uint64_t>> pids;
  for (const json& r : task) pids[r["host"]].insert(u64(r["pid"]));
  CHECK(pids.size() == 2);
  for (const auto& [host, p] : pids) CHECK_MESSAGE(p.size() == 2, host);
  std::map<std::string, std::multiset<std::string>> names;
  for (const json& r : task) names[r["host"]].insert(r["name"].get<std::string>());
  const std::multiset<std::string> one_task = {
      "node.submit", "node.dispatch", "node.complete", "chip.run", "chip.run.bind",
      "chip.run.bind.args", "chip.run.runner_run", "chip.run.runner_run.device_wall"};
  CHECK(names["shard-host-1"] == one_task);
  CHECK(names["shard-host-2"] == one_task);
  for (size_t i = 1; i < task.size(); ++i)
    if (task[i]["host"] == task[i - 1]["host"])
      CHECK(u64(task[i]["wall_ns"]) >= u64(task[i - 1]["wall_ns"]));
}

int main(int argc, char** argv) {
  if (spanring_test::clickhouse_server_path().empty()) {
    std::fprintf(stderr,
                 "SKIP: clickhouse-server is not installed (apt-get install clickhouse-server, "
                 "or set CLICKHOUSE_SERVER to its path): the clickhouse suite needs real "
                 "servers\n");
    return 77;
  }
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
