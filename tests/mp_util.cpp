#include "mp_util.h"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace spanring_test {

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/spanring-test-XXXXXX";
  REQUIRE_MESSAGE(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp(", tmpl,
                  "): ", std::string(std::strerror(errno)));
  path_ = tmpl;
}

TempDir::~TempDir() {
  if (const char* keep = std::getenv("SPANRING_KEEP_TMP"); keep != nullptr && *keep != '\0') {
    std::fprintf(stderr, "kept %s\n", path_.c_str());
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string RunResult::describe() const {
  std::string s;
  if (timed_out) s += "timed out and was killed (" + cleanup + "); ";
  if (exit_code >= 0) {
    s += "exit status " + std::to_string(exit_code);
  } else if (term_signal != 0) {
    s += "killed by signal " + std::to_string(term_signal) + " (" + strsignal(term_signal) + ")";
  }
  s += "\n--- stderr ---\n" + err;
  if (!out.empty()) s += "--- stdout (first 2000 bytes) ---\n" + out.substr(0, 2000);
  return s;
}

std::vector<std::string> exec_wrapper() {
  std::vector<std::string> words;
  const char* w = std::getenv("SPANRING_TEST_EXEC_WRAPPER");
  std::istringstream in(w != nullptr ? w : "");
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

std::vector<std::string> exec_argv(const std::vector<std::string>& argv) {
  const std::vector<std::string> wrapper = exec_wrapper();
  if (wrapper.empty() || argv.empty()) return argv;
  // An ELF of this build's machine (e_machine, bytes 18-19, little-endian): the emulated one.
#if defined(__aarch64__)
  constexpr unsigned kOwnMachine = 183;  // EM_AARCH64
#elif defined(__x86_64__)
  constexpr unsigned kOwnMachine = 62;   // EM_X86_64
#else
  constexpr unsigned kOwnMachine = 0;
#endif
  unsigned char head[20] = {};
  std::ifstream f(argv[0], std::ios::binary);
  f.read(reinterpret_cast<char*>(head), sizeof head);
  const bool own_elf = f.gcount() == sizeof head && std::memcmp(head, "\x7f" "ELF", 4) == 0 &&
                       (head[18] | head[19] << 8) == kOwnMachine;
  if (!own_elf) return argv;
  std::vector<std::string> out = wrapper;
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

RunResult run_process(const std::vector<std::string>& argv_in, int timeout_s) {
  RunResult result;
  REQUIRE(!argv_in.empty());
  const std::vector<std::string> argv = exec_argv(argv_in);

  int out_pipe[2];
  int err_pipe[2];
  REQUIRE(::pipe2(out_pipe, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(err_pipe, O_CLOEXEC) == 0);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own process group: a timeout kills the program and every descendant it left behind, and
  // nothing else.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);

  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "SPANRING_SEGMENT=", 17) != 0) env_storage.emplace_back(*e);
  }
  std::vector<char*> envp;
  for (auto& s : env_storage) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_storage(argv);
  std::vector<char*> args;
  for (auto& s : argv_storage) args.push_back(s.data());
  args.push_back(nullptr);

  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, args[0], &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    FAIL("posix_spawn(", argv[0], "): ", std::string(std::strerror(rc)));
  }

  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  bool exited = false;
  int status = 0;
  while (open_fds > 0 || !exited) {
    if (!exited) {
      const pid_t w = ::waitpid(pid, &status, WNOHANG);
      if (w == pid) exited = true;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline && !result.timed_out) {
      result.timed_out = true;
      ::kill(-pid, SIGKILL);  // the process group we created above
    }
    if (open_fds == 0) {
      // Only the process is left to reap (it closed its pipes early).
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      continue;
    }
    const int wait_ms = result.timed_out ? 100 : 50;
    const int n = ::poll(fds, 2, wait_ms);
    if (n < 0 && errno != EINTR) FAIL("poll: ", std::string(std::strerror(errno)));
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[65536];
      const ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        sinks[i]->append(buf, static_cast<size_t>(got));
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
    // After a kill, descendants in another process group could hold the pipes open forever.
    if (result.timed_out && exited &&
        std::chrono::steady_clock::now() > deadline + std::chrono::seconds(5)) {
      break;
    }
  }
  for (auto& fd : fds) {
    if (fd.fd >= 0) ::close(fd.fd);
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
  if (result.timed_out) {
    const std::string prefix = "spanring-" + std::to_string(pid) + "-";
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind(prefix, 0) == 0 && std::filesystem::remove(entry.path(), ec)) {
        result.cleanup += "removed /dev/shm/" + name + " ";
      }
    }
    if (result.cleanup.empty()) result.cleanup = "no segment of it left in /dev/shm";
  }
  return result;
}

bool stress() {
  const char* s = std::getenv("SPANRING_STRESS");
  return s != nullptr && std::string(s) == "1";
}

bool test_points_built() {
  const char* v = std::getenv("SPANRING_TEST_POINTS_BUILT");
  return v != nullptr && std::string(v) == "1";
}

void skip_without_test_points() {
  if (test_points_built()) return;
  std::fprintf(stderr, "SKIP: this build has no test points (-Dtest_points=disabled or a "
                       "release build)\n");
  std::exit(77);
}

std::string exe_from_env(const char* var) {
  const char* p = std::getenv(var);
  REQUIRE_MESSAGE((p != nullptr && *p != '\0'), std::string(var),
                  " is not set: run this test through `meson test` (tests/meson.build sets it)");
  REQUIRE_MESSAGE(::access(p, X_OK) == 0, std::string(var), "=", std::string(p),
                  " is not an executable file");
  return p;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REQUIRE_MESSAGE(f.good(), "cannot open ", path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

namespace {

// Parses `key=<decimal>` at `pos` in `s` and advances pos past it.
bool read_kv(const std::string& s, size_t& pos, const std::string& key, uint64_t* out) {
  if (s.compare(pos, key.size() + 1, key + "=") != 0) return false;
  pos += key.size() + 1;
  const size_t start = pos;
  uint64_t v = 0;
  while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') v = v * 10 + (s[pos++] - '0');
  *out = v;
  return pos > start;
}

}  // namespace

std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
  std::vector<std::string> found;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) found.push_back(line);
  }
  return found;
}

std::optional<Summary> parse_summary(const std::string& stderr_text) {
  const auto lines = lines_starting(stderr_text, "spanring: summary: ");
  if (lines.size() != 1) {
    FAIL_CHECK("expected exactly one 'spanring: summary:' line on stderr, found ", lines.size(),
               "\n--- stderr ---\n", stderr_text);
    return std::nullopt;
  }
  const std::string& l = lines[0];
  Summary s;
  size_t pos = std::strlen("spanring: summary: ");
  const bool ok = read_kv(l, pos, "written", &s.written) && l.compare(pos, 1, " ") == 0 &&
                  read_kv(l, ++pos, "dropped", &s.dropped) && l.compare(pos, 1, " ") == 0 &&
                  read_kv(l, ++pos, "unfinished", &s.unfinished) && l.compare(pos, 1, " ") == 0 &&
                  read_kv(l, ++pos, "processes", &s.processes) && l.compare(pos, 1, " ") == 0 &&
                  read_kv(l, ++pos, "threads", &s.threads) && pos == l.size();
  if (!ok) {
    FAIL_CHECK(
        "malformed summary line (want 'spanring: summary: written=N dropped=M "
        "unfinished=U processes=P threads=T'): '",
        l, "'");
    return std::nullopt;
  }
  return s;
}

std::optional<std::pair<uint64_t, std::string>> parse_wrote(const std::string& stderr_text) {
  const auto lines = lines_starting(stderr_text, "spanring: wrote ");
  if (lines.size() != 1) return std::nullopt;
  const std::string& l = lines[0];
  size_t pos = std::strlen("spanring: wrote ");
  const size_t start = pos;
  uint64_t n = 0;
  while (pos < l.size() && l[pos] >= '0' && l[pos] <= '9') n = n * 10 + (l[pos++] - '0');
  if (pos == start || l.compare(pos, 12, " records to ") != 0) return std::nullopt;
  return std::make_pair(n, l.substr(pos + 12));
}

std::optional<std::string> segment_from_stderr(const std::string& stderr_text) {
  const auto lines = lines_starting(stderr_text, "spanring: segment ");
  if (lines.empty()) return std::nullopt;
  const std::string rest = lines[0].substr(std::strlen("spanring: segment "));
  const size_t end = rest.find(' ');
  if (end == 0 || end == std::string::npos) return std::nullopt;
  return rest.substr(0, end);
}

std::set<uint64_t> Trace::pids_with_name_prefix(const std::string& prefix) const {
  std::set<uint64_t> pids;
  for (const SpanLine& s : spans) {
    if (s.name.rfind(prefix, 0) == 0) pids.insert(s.pid);
  }
  return pids;
}

uint64_t Trace::count(const std::string& name) const {
  const auto it = count_by_name.find(name);
  return it == count_by_name.end() ? 0 : it->second;
}

Trace load_trace(const std::string& path) {
  Trace t;
  t.text = parse_text(read_file(path));
  for (const ParsedLine& l : t.text.lines) {
    switch (l.kind) {
      case LineKind::kSpan:
        t.spans.push_back(l.span);
        ++t.count_by_name[l.span.name];
        break;
      case LineKind::kAnchor:
        t.anchors.push_back(l.anchor);
        break;
      case LineKind::kDrops:
        t.drops.push_back(l.drops);
        t.dropped_by_pid[l.drops.pid] += l.drops.dropped;
        t.dropped_total += l.drops.dropped;
        break;
      case LineKind::kOther:
        break;
    }
  }
  return t;
}

void check_trace_invariants(const Trace& trace, const Summary& summary,
                            const std::string& stderr_text, const std::string& out_path) {
  // Every line is one of the three kinds, and valid. Show at most 10 problems.
  if (!trace.text.errors.empty()) {
    std::string shown;
    for (size_t i = 0; i < trace.text.errors.size() && i < 10; ++i) {
      shown += trace.text.errors[i] + "\n";
    }
    FAIL_CHECK(trace.text.errors.size(), " line(s) of ", out_path,
               " do not parse as [STRACE] / [CLOCK_ANCHOR] / [SPANRING_DROPS]:\n", shown);
  }

  // Anchors: one per pid, before the pid's first span; mono_ns <= every host span's ts.
  std::map<uint64_t, const AnchorLine*> anchor_of;
  std::set<uint64_t> pids_with_spans;
  size_t bad_order = 0;
  size_t bad_anchor_ts = 0;
  size_t bad_prefix = 0;
  std::string first_bad_order;
  std::string first_bad_anchor_ts;
  std::string first_bad_prefix;
  for (const ParsedLine& l : trace.text.lines) {
    if (l.kind == LineKind::kAnchor) {
      const bool first = anchor_of.emplace(l.anchor.pid, &l.anchor).second;
      CHECK_MESSAGE(first, "pid ", l.anchor.pid, " has more than one [CLOCK_ANCHOR] line");
      continue;
    }
    if (l.kind != LineKind::kSpan) continue;
    const SpanLine& s = l.span;
    pids_with_spans.insert(s.pid);
    const auto a = anchor_of.find(s.pid);
    if (a == anchor_of.end()) {
      if (bad_order++ == 0) {
        first_bad_order = "span of pid " + std::to_string(s.pid) + " (" + s.name +
                          ") before any [CLOCK_ANCHOR] of that pid\n";
      }
      continue;
    }
    if (!is_device_span(s) && s.ts < a->second->mono_ns) {
      if (bad_anchor_ts++ == 0) {
        first_bad_anchor_ts = "span " + s.name + " of pid " + std::to_string(s.pid) + " has ts " +
                              std::to_string(s.ts) + " < anchor mono_ns " +
                              std::to_string(a->second->mono_ns) + "\n";
      }
    }
    if (s.prefix.present && !is_device_span(s) && s.prefix.mono_ns != s.ts + s.dur) {
      if (bad_prefix++ == 0) {
        first_bad_prefix = "span " + s.name + ": prefix mono_ns " +
                           std::to_string(s.prefix.mono_ns) + " != ts + dur " +
                           std::to_string(s.ts + s.dur) + " (the span's end)\n";
      }
    }
  }
  CHECK_MESSAGE(bad_order == 0, bad_order,
                " span(s) come before their pid's anchor; first: ", first_bad_order);
  CHECK_MESSAGE(
      bad_anchor_ts == 0, bad_anchor_ts,
      " host span(s) start before their pid's anchor mono_ns; first: ", first_bad_anchor_ts);
  CHECK_MESSAGE(bad_prefix == 0, bad_prefix,
                " span(s) with a prefix E != ts + dur; first: ", first_bad_prefix);
  for (const auto& [pid, anchor] : anchor_of) {
    CHECK_MESSAGE(pids_with_spans.count(pid) + trace.dropped_by_pid.count(pid) > 0,
                  "anchor for pid ", pid, " which has neither spans nor drops");
  }

  // Summary against the file.
  CHECK_MESSAGE(summary.written == trace.spans.size(), "summary written=", summary.written,
                " but the file holds ", trace.spans.size(), " [STRACE] lines");
  CHECK_MESSAGE(summary.dropped == trace.dropped_total, "summary dropped=", summary.dropped,
                " but the drop lines add up to ", trace.dropped_total);
  std::set<uint64_t> owner_pids = pids_with_spans;
  std::set<std::pair<uint64_t, uint64_t>> owners;
  for (const SpanLine& s : trace.spans) owners.emplace(s.pid, s.tid);
  for (const DropsLine& d : trace.drops) {
    if (d.pid == 0 && d.tid == 0) continue;  // segment-wide (no_ring, vfork): no owner
    owner_pids.insert(d.pid);
    owners.emplace(d.pid, d.tid);
  }
  CHECK_MESSAGE(summary.processes == owner_pids.size(), "summary processes=", summary.processes,
                " but the file has ", owner_pids.size(), " distinct pids");
  // threads= counts ring owners (docs/output.md); a reused tid is a new owner.
  CHECK_MESSAGE(summary.threads >= owners.size(), "summary threads=", summary.threads,
                " but the file has ", owners.size(), " distinct (pid, tid) pairs");

  const auto wrote = parse_wrote(stderr_text);
  CHECK_MESSAGE(wrote.has_value(),
                "no single 'spanring: wrote N records to PATH' line on stderr:\n", stderr_text);
  if (wrote) {
    CHECK_MESSAGE(wrote->first == trace.spans.size(), "'wrote ", wrote->first,
                  " records' but the file holds ", trace.spans.size(), " [STRACE] lines");
    CHECK_MESSAGE(wrote->second == out_path, "'wrote ... to ", wrote->second, "' but -o was ",
                  out_path);
  }
}

}  // namespace spanring_test
