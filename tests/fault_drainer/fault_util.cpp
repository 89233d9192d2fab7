#include "fault_util.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

extern char** environ;

namespace fault_test {

using spanring_test::DropsLine;
using spanring_test::LineKind;
using spanring_test::ParsedLine;
using spanring_test::ParsedText;
using spanring_test::SpanLine;

// ---- a small file system ----------------------------------------------------------------------

TmpfsMount::TmpfsMount(const std::string& dir, const char* size) : dir_(dir) {
  ::mkdir(dir.c_str(), 0755);
  const std::string opt = std::string("size=") + size;
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, opt.c_str()) != 0) {
    std::fprintf(stderr, "SKIP: cannot mount a %s tmpfs on %s: %s\n", size, dir.c_str(),
                 std::strerror(errno));
    std::exit(77);
  }
}

TmpfsMount::~TmpfsMount() { ::umount2(dir_.c_str(), MNT_DETACH); }

// ---- processes --------------------------------------------------------------------------------

pid_t spawn(const SpawnOptions& o) {
  REQUIRE(!o.argv.empty());
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (kv.rfind("SPANRING_SEGMENT=", 0) == 0 || kv.rfind("SPANRING_TEST_POINT", 0) == 0) continue;
    bool overridden = false;
    for (const auto& [k, v] : o.env) overridden |= kv.rfind(k + "=", 0) == 0;
    if (!overridden) env_storage.push_back(kv);
  }
  for (const auto& [k, v] : o.env) env_storage.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_storage) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_storage(o.argv);
  std::vector<char*> argv;
  for (auto& s : argv_storage) argv.push_back(s.data());
  argv.push_back(nullptr);

  const int out_fd = o.stdout_fd >= 0 ? o.stdout_fd
                     : o.stdout_path.empty()
                         ? ::open("/dev/null", O_WRONLY | O_CLOEXEC)
                         : ::open(o.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err_fd = o.stderr_path.empty()
                         ? ::open("/dev/null", O_WRONLY | O_CLOEXEC)
                         : ::open(o.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int in_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  REQUIRE_MESSAGE((out_fd >= 0 && err_fd >= 0 && in_fd >= 0), "cannot open the stdio of ",
                  o.argv[0], ": ", std::string(std::strerror(errno)));
  int report[2];
  REQUIRE(::pipe2(report, O_CLOEXEC) == 0);

  const pid_t pid = ::fork();
  REQUIRE_MESSAGE(pid >= 0, "fork: ", std::string(std::strerror(errno)));
  if (pid == 0) {
    ::close(report[0]);
    ::setpgid(0, 0);
    // dup2 clears close-on-exec on the new descriptors.
    ::dup2(in_fd, STDIN_FILENO);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(err_fd, STDERR_FILENO);
    // The default SIGPIPE disposition and an empty mask, whatever the test runner set.
    ::signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (o.umask >= 0) ::umask(static_cast<mode_t>(o.umask));
    int failed_step = 0;
    if (o.uid >= 0) {
      const auto id = static_cast<uid_t>(o.uid);
      if (::setgroups(0, nullptr) != 0) failed_step = 1;
      else if (::setgid(static_cast<gid_t>(id)) != 0) failed_step = 2;
      else if (::setuid(id) != 0) failed_step = 3;
    }
    if (failed_step == 0) ::execve(argv[0], argv.data(), envp.data());
    const int msg[2] = {failed_step, errno};
    (void)!::write(report[1], msg, sizeof msg);
    ::_exit(127);
  }
  ::close(report[1]);
  if (o.stdout_fd < 0) ::close(out_fd);
  ::close(err_fd);
  ::close(in_fd);
  int msg[2] = {0, 0};
  const ssize_t got = ::read(report[0], msg, sizeof msg);
  ::close(report[0]);
  if (got == sizeof msg) {
    ::waitpid(pid, nullptr, 0);
    static const char* kSteps[] = {"execve", "setgroups", "setgid", "setuid"};
    FAIL(kSteps[msg[0]], " of ", o.argv[0], " failed: ", std::string(std::strerror(msg[1])));
  }
  return pid;
}

std::string Exit::describe() const {
  if (timed_out) return "timed out (its process group was killed)";
  if (code >= 0) return "exit status " + std::to_string(code);
  if (sig != 0) return "killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  return "unknown status";
}

Exit wait_exit(pid_t pid, double timeout_s) {
  Exit e;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      FAIL_CHECK("waitpid(", pid, "): ", std::string(std::strerror(errno)));
      return e;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      e.timed_out = true;
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return e;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (WIFEXITED(status)) e.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) e.sig = WTERMSIG(status);
  return e;
}

bool wait_until(const std::function<bool()>& done, double timeout_s, int poll_ms) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(timeout_s * 1e6));
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
}

bool catches_signal(pid_t pid, int sig) {
  const std::string status = slurp("/proc/" + std::to_string(pid) + "/status");
  const size_t at = status.find("\nSigCgt:");
  if (at == std::string::npos) return false;
  const uint64_t mask = std::strtoull(status.c_str() + at + 8, nullptr, 16);
  return (mask >> (sig - 1)) & 1;
}

ChildGuard::~ChildGuard() {
  if (pid_ <= 0) return;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == 0) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  } else {
    ::kill(-pid_, SIGKILL);  // descendants left in its group
  }
  reap_zombies();
}

void become_subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }

void reap_zombies() {
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

SegmentGuard::~SegmentGuard() {
  if (!name_.empty()) ::shm_unlink(name_.c_str());
}

bool ShmView::open(const std::string& name, bool writable) {
  const int fd = ::shm_open(name.c_str(), writable ? O_RDWR : O_RDONLY, 0);
  if (fd < 0) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    errno = EINVAL;
    return false;
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size),
                   writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return false;
  base_ = static_cast<std::byte*>(p);
  size_ = static_cast<size_t>(st.st_size);
  return true;
}

ShmView::~ShmView() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

spanring::SegmentView ShmView::view() const {
  spanring::SegmentView v;
  std::string why;
  REQUIRE_MESSAGE(spanring::SegmentView::validate(base_, size_, v, why), why);
  return v;
}

spanring::RingHeader& ShmView::ring(uint32_t i) const { return view().ring(i); }

std::byte* ShmView::ring_slots(uint32_t i) const { return view().ring_slots(i); }

std::string ShmView::bytes() const {
  return std::string(reinterpret_cast<const char*>(base_), size_);
}

ReportMap::ReportMap(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE_MESSAGE(fd >= 0, "cannot create ", path, ": ", std::string(std::strerror(errno)));
  REQUIRE(::ftruncate(fd, sizeof(fault::Report)) == 0);
  void* p = ::mmap(nullptr, sizeof(fault::Report), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  REQUIRE_MESSAGE(p != MAP_FAILED, "mmap ", path, ": ", std::string(std::strerror(errno)));
  report_ = static_cast<fault::Report*>(p);
}

ReportMap::~ReportMap() {
  if (report_ != nullptr) ::munmap(report_, sizeof(fault::Report));
}

bool ReportMap::ready() const {
  return report_->magic.load(std::memory_order_acquire) == fault::kReportMagic;
}

// ---- files and stderr -------------------------------------------------------------------------

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f.good()) return {};
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

BackgroundDrainer::BackgroundDrainer(const SpawnOptions& options, double timeout_s) {
  REQUIRE_MESSAGE(!options.stderr_path.empty(), "BackgroundDrainer needs a stderr file");
  guard_.reset(spawn(options));
  const bool started = wait_until(
      [&] {
        const std::optional<std::string> s = segment_from_stderr(slurp(options.stderr_path));
        if (s) segment_ = *s;
        return s.has_value();
      },
      timeout_s);
  REQUIRE_MESSAGE(started, options.argv[0],
                  " never printed its segment (`spanring: segment NAME`) in ", timeout_s,
                  " s; stderr:\n", slurp(options.stderr_path));
}

std::optional<uint64_t> summary_value(const std::string& text, const std::string& key) {
  const auto lines = lines_starting(text, "spanring: summary: ");
  if (lines.size() != 1) return std::nullopt;
  const std::string& l = lines[0];
  const std::string want = " " + key + "=";
  size_t at = l.find(want);
  if (at == std::string::npos) return std::nullopt;
  at += want.size();
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(l.data() + at, l.data() + l.size(), v);
  if (ec != std::errc() || end == l.data() + at) return std::nullopt;
  return v;
}

std::vector<TaskState> task_states(pid_t pid) {
  std::vector<TaskState> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const std::string stat = slurp(dir + "/" + e->d_name + "/stat");
    const size_t open = stat.find('(');
    const size_t close = stat.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 2 >= stat.size())
      continue;
    out.push_back(TaskState{std::atoi(e->d_name), stat[close + 2],
                            stat.substr(open + 1, close - open - 1)});
  }
  ::closedir(d);
  return out;
}

bool drainer_stopped(pid_t pid) {
  const auto tasks = task_states(pid);
  if (tasks.empty()) return false;
  for (const TaskState& t : tasks) {
    if (t.comm.rfind("iou-", 0) == 0) continue;
    if (t.state != 'T') return false;
  }
  return true;
}

Emitted load_emitted(const std::string& json_path) {
  const nlohmann::json j = nlohmann::json::parse(spanring_test::read_file(json_path));
  Emitted e;
  e.pid = j.at("pid").get<uint64_t>();
  e.enabled = j.at("enabled").get<int>() != 0;
  e.segment = j.at("segment").get<std::string>();
  for (const auto& t : j.at("threads")) {
    e.threads.push_back(EmittedThread{t.at("name").get<std::string>(), t.at("tid").get<uint64_t>(),
                                      t.at("emitted").get<uint64_t>(),
                                      t.at("stored").get<uint64_t>()});
  }
  return e;
}

// ---- trace checks -----------------------------------------------------------------------------

namespace {

std::vector<std::string>* g_problems = nullptr;  // set by CaptureProblems

// A check of the trace checks below: a doctest CHECK, or (under CaptureProblems) a problem
// appended to the capturing list.
template <class... Parts>
void expect(bool ok, const Parts&... parts) {
  if (ok && g_problems != nullptr) return;
  std::ostringstream what;
  (what << ... << parts);
  if (g_problems != nullptr) g_problems->push_back(what.str());
  else CHECK_MESSAGE(ok, what.str());
}

}  // namespace

CaptureProblems::CaptureProblems(std::vector<std::string>& into) { g_problems = &into; }
CaptureProblems::~CaptureProblems() { g_problems = nullptr; }

std::map<std::pair<uint64_t, uint64_t>, OwnerLines> lines_by_owner(const ParsedText& text) {
  std::map<std::pair<uint64_t, uint64_t>, OwnerLines> out;
  for (const ParsedLine& l : text.lines) {
    if (l.kind == LineKind::kSpan) out[{l.span.pid, l.span.tid}].spans.push_back(&l.span);
    if (l.kind == LineKind::kDrops) out[{l.drops.pid, l.drops.tid}].drops.push_back(&l.drops);
  }
  return out;
}

Accounting check_thread_accounting(const OwnerLines& lines, const EmittedThread& thread,
                                   uint64_t pid, std::optional<uint64_t> stored,
                                   const std::string& label) {
  Accounting a;
  const std::string who = label + ": pid " + std::to_string(pid) + " tid " +
                          std::to_string(thread.tid) + " (" + thread.name + ", emitted " +
                          std::to_string(thread.emitted) + ")";
  // Intervals [first, last] of seqs: one per span, one per drop range.
  std::vector<std::pair<uint64_t, uint64_t>> covered;
  size_t bad_name = 0;
  size_t bad_seq = 0;
  size_t out_of_order = 0;
  std::string first_problem;
  uint64_t prev = 0;
  bool has_prev = false;
  for (const SpanLine* s : lines.spans) {
    ++a.written;
    if (s->name != thread.name) {
      if (bad_name++ == 0) first_problem += "span named " + s->name + "; ";
      continue;
    }
    const auto v = spanring_test::attr_value(s->attrs, "seq");
    uint64_t seq = 0;
    if (!v || std::from_chars(v->data(), v->data() + v->size(), seq).ec != std::errc()) {
      if (bad_seq++ == 0) first_problem += "span without integer seq: '" + s->attrs + "'; ";
      continue;
    }
    if (has_prev && seq <= prev) {
      if (out_of_order++ == 0)
        first_problem += "seq " + std::to_string(seq) + " after " + std::to_string(prev) + "; ";
    }
    prev = seq;
    has_prev = true;
    covered.emplace_back(seq, seq);
  }
  size_t bad_range = 0;
  for (const DropsLine* d : lines.drops) {
    a.dropped += d->dropped;
    a.dropped_by_reason[d->reason] += d->dropped;
    if (d->first_seq > d->last_seq || d->last_seq - d->first_seq + 1 != d->dropped) {
      if (bad_range++ == 0)
        first_problem += "drop line dropped=" + std::to_string(d->dropped) + " first_seq=" +
                         std::to_string(d->first_seq) + " last_seq=" +
                         std::to_string(d->last_seq) + "; ";
      continue;
    }
    covered.emplace_back(d->first_seq, d->last_seq);
  }
  expect(bad_name == 0, who, ": ", bad_name, " span(s) of another name; ", first_problem);
  expect(bad_seq == 0, who, ": ", bad_seq, " span(s) without seq; ", first_problem);
  expect(out_of_order == 0, who, ": ", out_of_order,
                " span(s) out of seq order in the file; ", first_problem);
  expect(bad_range == 0, who, ": ", bad_range,
                " drop line(s) whose count is not last_seq - first_seq + 1; ", first_problem);

  // Walk the sorted intervals: they must tile 0..emitted-1 with no gap and no overlap.
  std::sort(covered.begin(), covered.end());
  uint64_t next = 0;
  size_t twice = 0;
  size_t lost = 0;
  std::string seam;
  for (const auto& [first, last] : covered) {
    if (first < next) {
      if (twice++ == 0)
        seam += "seq " + std::to_string(first) + ".." + std::to_string(last) +
                " covered twice (next expected " + std::to_string(next) + "); ";
    } else if (first > next) {
      if (lost++ == 0)
        seam += "seqs " + std::to_string(next) + ".." + std::to_string(first - 1) +
                " neither written nor reported dropped; ";
    }
    next = std::max(next, last + 1);
  }
  expect(twice == 0, who, ": ", twice, " record(s) written or reported twice; ", seam);
  expect(lost == 0, who, ": ", lost, " gap(s) of lost records; ", seam);
  expect(next == thread.emitted, who, ": written + reported records end at seq ", next,
                ", the thread emitted ", thread.emitted, " (seq 0..", thread.emitted - 1, ")");
  expect(a.written + a.dropped == thread.emitted, who, ": written ", a.written,
                " + dropped ", a.dropped, " != emitted ", thread.emitted);
  if (stored) {
    expect(a.written == *stored, who, ": ", a.written, " written, but the ring accepted ",
                  *stored, " (a record in the ring must reach the file exactly once)");
  }
  return a;
}

ParsedText parse_and_check_form(const std::string& text,
                                const std::vector<std::string>& allowed_other,
                                const std::string& label) {
  expect((text.empty() || text.back() == '\n'), label,
                ": the file does not end with LF (a half line): ...",
                spanring_test::printable(text.substr(text.size() > 200 ? text.size() - 200 : 0)));
  const size_t nul = text.find('\0');
  expect(nul == std::string::npos, label, ": NUL byte at offset ", nul, " of ",
                text.size(), " (a hole in the file, or an overlapping write)");
  // Line by line: each must parse, or be of an allowed other kind; the lengths of the lines
  // that do must add up to the file size (no byte outside a good line).
  size_t good_bytes = 0;
  size_t bad = 0;
  std::string errors;
  size_t pos = 0;
  size_t line_no = 0;
  while (pos < text.size()) {
    ++line_no;
    size_t end = text.find('\n', pos);
    end = end == std::string::npos ? text.size() : end + 1;
    const std::string_view line(text.data() + pos, end - pos);
    const spanring_test::ParseResult r = spanring_test::parse_line(line);
    bool ok = r.ok() && r.line.kind != LineKind::kOther;
    if (r.ok() && r.line.kind == LineKind::kOther)
      for (const std::string& a : allowed_other) ok |= line.rfind(a, 0) == 0;
    if (ok) {
      good_bytes += line.size();
    } else if (bad++ < 8) {
      errors += "line " + std::to_string(line_no) + " (byte " + std::to_string(pos) + "): " +
                (r.ok() ? std::string("a line of another kind") : r.error) + "  [" +
                spanring_test::printable(line) + "]\n";
    }
    pos = end;
  }
  expect(bad == 0, label, ": ", bad, " line(s) do not parse:\n", errors);
  expect(good_bytes == text.size(), label, ": the good lines hold ", good_bytes,
                " bytes, the file ", text.size());
  return spanring_test::parse_text(text, true);
}

void check_anchors(const ParsedText& parsed, const std::vector<uint64_t>& strict_pids,
                   const std::string& label) {
  std::map<uint64_t, uint64_t> anchor_mono;  // pid -> mono_ns
  std::map<uint64_t, size_t> anchors;
  size_t before_anchor = 0;
  size_t early = 0;
  std::string first;
  const std::set<uint64_t> strict(strict_pids.begin(), strict_pids.end());
  for (const ParsedLine& l : parsed.lines) {
    if (l.kind == LineKind::kAnchor) {
      if (++anchors[l.anchor.pid] == 1) anchor_mono[l.anchor.pid] = l.anchor.mono_ns;
      continue;
    }
    if (l.kind != LineKind::kSpan) continue;
    const auto a = anchor_mono.find(l.span.pid);
    if (a == anchor_mono.end()) {
      if (before_anchor++ == 0) first += "span of pid " + std::to_string(l.span.pid) +
                                         " before its anchor; ";
      continue;
    }
    if ((strict.empty() || strict.count(l.span.pid) != 0) &&
        !spanring_test::is_device_span(l.span) && l.span.ts < a->second) {
      if (early++ == 0) first += "span ts " + std::to_string(l.span.ts) + " < anchor mono_ns " +
                                 std::to_string(a->second) + "; ";
    }
  }
  for (const auto& [pid, n] : anchors)
    expect(n == 1, label, ": pid ", pid, " has ", n, " [CLOCK_ANCHOR] lines (one per pid)");
  expect(before_anchor == 0, label, ": ", before_anchor,
                " span(s) before their pid's anchor; ", first);
  expect(early == 0, label, ": ", early, " span(s) start before their pid's anchor; ",
                first);
}

}  // namespace fault_test
