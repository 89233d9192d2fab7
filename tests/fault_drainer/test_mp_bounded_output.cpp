// Bounded output with real processes: `spanring run --max-size` and `--rotate` on workloads many
// times larger than the bound, in [STRACE] text and binary; a drainer killed with kill -9 while
// it rotates, or after its file is full, and restarted with the same options on the same segment
// and file; a 1 MiB tmpfs that fills under a binary trace, and the same tmpfs kept from filling
// by --max-size.
//
// Every trace is checked against what fault_emitter says each thread emitted (seq=0..emitted-1
// per thread): read as [STRACE] text (binary files through `spanring convert --to strace`, one
// file at a time, so each must read alone), each thread's spans and drop ranges, in file order,
// must be one contiguous run of sequence numbers with nothing twice, and what is not in the
// files must be exactly what the bound says it left out.
//
// Each scenario is its own TEST_CASE and meson test (tests/fault_drainer/meson.build).
#include "fault_util.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace fault_test;

namespace {

constexpr double kWaitS = 30;

// FILE, FILE.1, ... (the rotation's names, README "Running in production").
std::string rotated(const std::string& path, uint32_t n) {
  return n == 0 ? path : path + "." + std::to_string(n);
}

// A tmpfs of `size` on `dir` for the test's life; skips (77) where mounting is not permitted.
uint64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// The trace file as [STRACE] text: itself, or for binary what `spanring convert --to strace`
// makes of it alone (which must succeed with nothing to say: not cut, no block missing).
std::string as_text(const std::string& spanring, const std::string& path, bool binary) {
  if (!binary) return slurp(path);
  const std::string txt = path + ".converted";
  const auto r = spanring_test::run_process({spanring, "convert", path, "--to", "strace", "-o", txt});
  CHECK_MESSAGE(r.exit_code == 0, "spanring convert ", path, ": ", r.describe());
  CHECK_MESSAGE(r.err.empty(), "spanring convert ", path, " says: ", r.err);
  const auto c = spanring_test::run_process(
      {spanring, "convert", path, "--to", "chrome", "-o", path + ".json"});
  CHECK_MESSAGE(c.exit_code == 0, "spanring convert --to chrome ", path, ": ", c.describe());
  if (c.exit_code == 0) {
    const nlohmann::json j = nlohmann::json::parse(slurp(path + ".json"), nullptr, false);
    CHECK_MESSAGE(!j.is_discarded(), path, ": --to chrome is not JSON");
  }
  return slurp(txt);
}

// What trace files hold for each emitting thread: the sequence numbers as [first, last] runs
// (a span is [seq, seq]) in file order, and the records the pid-0 max_size lines report.
struct Coverage {
  std::map<uint64_t, std::vector<std::pair<uint64_t, uint64_t>>> runs;  // tid -> runs
  uint64_t spans = 0;
  uint64_t dropped_in_file = 0;  // drop ranges of threads (any reason)
  uint64_t max_size = 0;         // dropped= of pid-0 reason=max_size lines
  size_t max_size_lines = 0;
  bool max_size_line_last = true;  // every max_size line is its file's last line
};

// Adds one file's text (checked for form and anchors on its own) to `cov`.
void add_file(Coverage& cov, const std::string& text, uint64_t pid, const std::string& label) {
  const spanring_test::ParsedText parsed = parse_and_check_form(text, {}, label);
  check_anchors(parsed, {}, label);
  for (size_t i = 0; i < parsed.lines.size(); ++i) {
    const spanring_test::ParsedLine& l = parsed.lines[i];
    if (l.kind == spanring_test::LineKind::kSpan) {
      CHECK_MESSAGE(l.span.pid == pid, label, ": a span of pid ", l.span.pid);
      const auto seq = spanring_test::attr_value(l.span.attrs, "seq");
      REQUIRE_MESSAGE(seq.has_value(), label, ": a span without seq=");
      const uint64_t s = std::strtoull(std::string(*seq).c_str(), nullptr, 10);
      cov.runs[l.span.tid].push_back({s, s});
      ++cov.spans;
    } else if (l.kind == spanring_test::LineKind::kDrops) {
      if (l.drops.pid == 0) {
        CHECK_MESSAGE(l.drops.reason == "max_size", label, ": a pid-0 drop line of reason ",
                      l.drops.reason);
        cov.max_size += l.drops.dropped;
        ++cov.max_size_lines;
        cov.max_size_line_last = cov.max_size_line_last && i + 1 == parsed.lines.size();
        continue;
      }
      CHECK_MESSAGE(l.drops.reason == "ring_full", label, ": ", l.drops.dropped,
                    " records dropped with reason ", l.drops.reason);
      CHECK(l.drops.dropped == l.drops.last_seq - l.drops.first_seq + 1);
      cov.runs[l.drops.tid].push_back({l.drops.first_seq, l.drops.last_seq});
      cov.dropped_in_file += l.drops.dropped;
    }
  }
}

// A thread's runs joined: [first, end) when they follow each other exactly (nothing twice,
// nothing missing in between), else a failed check and nullopt.
std::optional<std::pair<uint64_t, uint64_t>> joined(
    const std::vector<std::pair<uint64_t, uint64_t>>& runs, const std::string& label) {
  if (runs.empty()) return std::pair<uint64_t, uint64_t>{0, 0};
  uint64_t next = runs.front().first;
  for (const auto& [first, last] : runs) {
    if (first != next) {
      CHECK_MESSAGE(first == next, label, ": seq ", first, " follows ", next - 1,
                    first < next ? " (written twice)" : " (records missing in between)");
      return std::nullopt;
    }
    next = last + 1;
  }
  return std::pair<uint64_t, uint64_t>{runs.front().first, next};
}

std::vector<std::string> emitter_args(const std::string& emitter, const std::string& json,
                                      const std::vector<std::string>& more) {
  std::vector<std::string> a = {emitter, "--threads", "2", "--out", json};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// --max-size 256K on ~40,000 records (~6 MB of text, ~3 MB of binary).
void max_size_run(bool binary) {
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  const std::string out = tmp.file(binary ? "out.sptrace" : "out.strace");
  const std::string json = tmp.file("emitted.json");
  constexpr uint64_t kMax = 256u << 10;
  std::vector<std::string> argv = {spanring, "run", "--max-size", "256K", "--fail-on-loss",
                                   "--ring-records", "65536", "--format",
                                   binary ? "binary" : "strace", "-o", out, "--"};
  for (const std::string& a : emitter_args(emitter, json, {"--count", "20000", "--pace-us", "20",
                                                            "--pace-every", "8"}))
    argv.push_back(a);
  const auto r = spanring_test::run_process(argv);
  INFO("spanring run stderr:\n", r.err);
  CHECK_MESSAGE(r.exit_code == 3, "--fail-on-loss with records kept out by --max-size exits 3: ",
                r.describe());
  CHECK_MESSAGE(r.err.find("reached --max-size") != std::string::npos, "no line saying so");
  CHECK_MESSAGE(lines_starting(r.err, "spanring: warning: ").size() >= 1, "no warning");
  CHECK(r.err.find("(reason max_size): the file had reached --max-size") != std::string::npos);

  const uint64_t size = file_size(out);
  MESSAGE((binary ? "binary" : "text"), ": ", size, " bytes of at most ", kMax);
  CHECK(size <= kMax);
  CHECK(size > kMax / 2);  // the bound is used, not abandoned early

  const Emitted emitted = load_emitted(json);
  REQUIRE(emitted.threads.size() == 2);
  Coverage cov;
  add_file(cov, as_text(spanring, out, binary), emitted.pid, "max-size trace");
  CHECK_MESSAGE(cov.max_size_lines == 1, cov.max_size_lines, " max_size lines (want one)");
  CHECK_MESSAGE(cov.max_size_line_last, "the max_size line is not the file's last");
  uint64_t left_out = 0;
  for (const EmittedThread& t : emitted.threads) {
    const auto run = joined(cov.runs[t.tid], t.name);
    REQUIRE(run.has_value());
    // Each thread's written part is a prefix of what it emitted: 0..end-1, then nothing. It may
    // be empty: a thread scheduled only after the file was full has nothing in it.
    CHECK_MESSAGE(run->first == 0, t.name, " starts at seq ", run->first);
    CHECK(run->second <= t.emitted);
    left_out += t.emitted - run->second;
  }
  CHECK_MESSAGE(cov.spans > 0, "the file holds no span");
  // Exact: written + reported in the file + kept out (max_size) == emitted.
  CHECK_MESSAGE(cov.max_size == left_out, "the max_size line says ", cov.max_size,
                " records are not in the file; the threads emitted ", left_out,
                " past what it holds");
  const auto written = summary_value(r.err, "written");
  const auto dropped = summary_value(r.err, "dropped");
  REQUIRE((written && dropped));
  CHECK(*written == cov.spans);
  CHECK(*dropped == cov.dropped_in_file + cov.max_size);
}

// --rotate 128K:3 on the same workload.
void rotate_run(bool binary) {
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  const std::string out = tmp.file(binary ? "out.sptrace" : "out.strace");
  const std::string json = tmp.file("emitted.json");
  constexpr uint64_t kFile = 128u << 10;
  std::vector<std::string> argv = {spanring, "run", "--rotate", "128K:3", "--ring-records",
                                   "65536", "--format", binary ? "binary" : "strace", "-o", out,
                                   "--"};
  for (const std::string& a : emitter_args(emitter, json, {"--count", "20000", "--pace-us", "20",
                                                            "--pace-every", "8"}))
    argv.push_back(a);
  const auto r = spanring_test::run_process(argv);
  INFO("spanring run stderr:\n", r.err);
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  const auto rotated = lines_starting(r.err, "spanring: rotated: ");
  REQUIRE(rotated.size() == 1);
  const uint64_t files = std::strtoull(rotated[0].c_str() + 19, nullptr, 10);
  MESSAGE((binary ? "binary" : "text"), ": ", rotated[0]);
  CHECK_MESSAGE(files > 4, "only ", files, " files for ~", (binary ? 3 : 6), " MB");

  // The newest three are kept, the older ones deleted.
  const std::vector<std::string> kept = {out + ".2", out + ".1", out};  // oldest first
  for (const std::string& f : kept) {
    CHECK_MESSAGE(file_exists(f), f, " is missing");
    CHECK_MESSAGE(file_size(f) <= kFile, f, " holds ", file_size(f), " bytes");
  }
  CHECK_MESSAGE(!file_exists(out + ".3"), out, ".3 was not deleted");

  const Emitted emitted = load_emitted(json);
  REQUIRE(emitted.threads.size() == 2);
  Coverage cov;
  for (const std::string& f : kept) add_file(cov, as_text(spanring, f, binary), emitted.pid, f);
  CHECK(cov.max_size_lines == 0);
  // What rotation promises: the kept files are the newest part of the run, in drain order.
  // Which threads' records that part holds depends on how the threads were scheduled (a thread
  // that finished early may have all of its records in deleted files), so for each thread: what
  // the kept files hold of it is the newest it emitted (up to its last seq, nothing missing in
  // between), or nothing at all.
  uint64_t gone = 0;  // records (spans and drop ranges) of the threads that the kept files lack
  for (const EmittedThread& t : emitted.threads) {
    const auto run = joined(cov.runs[t.tid], t.name);
    REQUIRE(run.has_value());
    const uint64_t kept_of_thread = run->second - run->first;
    if (kept_of_thread > 0)
      CHECK_MESSAGE(run->second == t.emitted, t.name, ": the kept files hold seq ", run->first,
                    "..", run->second - 1, " of 0..", t.emitted - 1,
                    ", not its newest records");
    gone += t.emitted - kept_of_thread;
  }
  CHECK_MESSAGE(cov.spans > 0, "the kept files hold no span");
  CHECK_MESSAGE(gone > 0, "nothing is missing from the kept files, yet ", files,
                " files were written and only 3 kept");
  // Exact: what the kept files lack is what the drainer wrote (or reported as dropped) into the
  // deleted files, no more and no less.
  const auto written = summary_value(r.err, "written");
  const auto dropped = summary_value(r.err, "dropped");
  REQUIRE((written && dropped));
  CHECK_MESSAGE(*written + *dropped - (cov.spans + cov.dropped_in_file) == gone,
                "the run wrote ", *written, " spans and reported ", *dropped,
                " dropped; the kept files hold ", cov.spans, " spans and ", cov.dropped_in_file,
                " dropped, so the deleted files held ",
                *written + *dropped - (cov.spans + cov.dropped_in_file),
                ", but the threads lack ", gone);
}

// `spanring run` with `extra` (--rotate ... or --max-size ...), killed with kill -9 once
// `killed_when` holds, then `spanring drain` on the same segment and file with the same options
// until the producer is done. Returns the second drainer's stderr.
struct Restarted {
  std::string out;
  Emitted emitted;
  std::string err1;
  std::string err2;
};

Restarted kill_and_restart(const TempDir& tmp, bool binary, const std::vector<std::string>& extra,
                           const std::function<bool(const std::string& out,
                                                    const std::string& err)>& killed_when) {
  become_subreaper();
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  Restarted res;
  res.out = tmp.file(binary ? "out.sptrace" : "out.strace");
  const std::string json = tmp.file("emitted.json");
  const std::string err1 = tmp.file("run.err");
  const std::string err2 = tmp.file("drain.err");
  ReportMap rep(tmp.file("report.bin"));
  SpawnOptions run;
  run.argv = {spanring, "run", "--format", binary ? "binary" : "strace", "-o", res.out};
  run.argv.insert(run.argv.end(), extra.begin(), extra.end());
  run.argv.push_back("--");
  for (const std::string& a : emitter_args(emitter, json, {"--report", rep.path(), "--seconds",
                                                            "2", "--pace-us", "50",
                                                            "--pace-every", "2"}))
    run.argv.push_back(a);
  run.stderr_path = err1;
  BackgroundDrainer first(run, kWaitS);
  const pid_t run_pid = first.pid();
  SegmentGuard segment_guard(first.segment());
  REQUIRE_MESSAGE(wait_until([&] { return rep.ready() && rep->phase.load() >= fault::kPhaseEmitting; },
                             kWaitS),
                  "the emitter never started");
  const pid_t emitter_pid = static_cast<pid_t>(rep->pid.load());
  REQUIRE_MESSAGE(wait_until([&] { return killed_when(res.out, slurp(err1)); }, kWaitS),
                  "the moment to kill never came; stderr:\n", slurp(err1));
  REQUIRE(::kill(run_pid, SIGKILL) == 0);
  const Exit e1 = wait_exit(run_pid, kWaitS);
  first.release();
  REQUIRE(e1.sig == SIGKILL);
  CHECK_MESSAGE(rep->phase.load() < fault::kPhaseDone, "the producer finished before the kill");

  std::vector<std::string> drain = {spanring, "drain", "--segment", first.segment(), "-o",
                                    res.out, "--format", binary ? "binary" : "strace"};
  drain.insert(drain.end(), extra.begin(), extra.end());
  const pid_t drain_pid = spawn({drain, {}, "", err2});
  ChildGuard guard(drain_pid);
  const Exit producer = wait_exit(emitter_pid, kWaitS);
  CHECK_MESSAGE(producer.exited_ok(), "the producer: ", producer.describe());
  REQUIRE_MESSAGE(wait_until([&] { return catches_signal(drain_pid, SIGTERM); }, kWaitS),
                  "spanring drain never installed its SIGTERM handler");
  REQUIRE(::kill(drain_pid, SIGTERM) == 0);
  const Exit e2 = wait_exit(drain_pid, kWaitS);
  guard.release();
  res.err1 = slurp(err1);
  res.err2 = slurp(err2);
  INFO("spanring drain stderr:\n", res.err2);
  REQUIRE_MESSAGE(e2.exited_ok(), "spanring drain: ", e2.describe());
  res.emitted = load_emitted(json);
  REQUIRE(res.emitted.threads.size() == 2);
  return res;
}

void rotate_kill_restart(bool binary) {
  TempDir tmp;
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  // COUNT 1000: nothing is deleted, so the files together must hold every record.
  const Restarted r = kill_and_restart(
      tmp, binary, {"--rotate", "128K:1000"},
      [](const std::string& out, const std::string&) { return file_exists(out + ".3"); });
  INFO("spanring run stderr:\n", r.err1, "\nspanring drain stderr:\n", r.err2);
  uint32_t oldest = 0;
  while (file_exists(rotated(r.out, oldest + 1))) ++oldest;
  MESSAGE((binary ? "binary" : "text"), ": ", oldest + 1, " files after the restart");
  CHECK(oldest >= 4);
  Coverage cov;
  for (uint32_t n = oldest + 1; n-- > 0;) {
    const std::string f = rotated(r.out, n);
    CHECK_MESSAGE(file_size(f) <= (128u << 10), f, " holds ", file_size(f), " bytes");
    add_file(cov, as_text(spanring, f, binary), r.emitted.pid, f);
  }
  for (const EmittedThread& t : r.emitted.threads) {
    const auto run = joined(cov.runs[t.tid], t.name);
    REQUIRE(run.has_value());
    CHECK_MESSAGE((run->first == 0 && run->second == t.emitted), t.name, ": the files hold seq ",
                  run->first, "..", run->second, " of 0..", t.emitted, " (nothing may be lost)");
  }
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("on a full 1 MiB tmpfs a binary trace counts the records it could not write and the workload runs to its end") {
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  const std::string mnt = tmp.file("full");
  TmpfsMount mount(mnt, "1m");
  const std::string out = mnt + "/out.sptrace";
  const std::string json = tmp.file("emitted.json");
  // ~80 bytes a span in binary: 2 x 30,000 spans is ~5 MB, five times the file system.
  std::vector<std::string> argv = {spanring, "run", "--format", "binary", "--ring-records",
                                   "65536", "-o", out, "--"};
  for (const std::string& a : emitter_args(emitter, json, {"--count", "30000", "--pace-us", "20",
                                                            "--pace-every", "8"}))
    argv.push_back(a);
  const auto r = spanring_test::run_process(argv);
  INFO("spanring run stderr:\n", r.err);
  CHECK_MESSAGE(r.exit_code == 0, "spanring run exits with its command's status: ", r.describe());
  const auto enospc = lines_starting(r.err, std::string("spanring: writing ") + out + " failed: " +
                                                std::strerror(ENOSPC));
  CHECK_MESSAGE(enospc.size() == 1, "ENOSPC said on ", enospc.size(), " lines (want once)");
  // The workload is unaffected: every thread emitted all its records.
  const Emitted emitted = load_emitted(json);
  REQUIRE(emitted.threads.size() == 2);
  uint64_t total = 0;
  for (const EmittedThread& t : emitted.threads) {
    CHECK(t.emitted == 30000);
    total += t.emitted;
  }
  const auto written = summary_value(r.err, "written");
  const auto dropped = summary_value(r.err, "dropped");
  const auto u = lines_starting(r.err, "spanring: unwritten: ");
  REQUIRE((written && dropped));
  REQUIRE_MESSAGE(u.size() == 1, "no 'spanring: unwritten: N' line");
  const uint64_t unwritten = std::strtoull(u[0].c_str() + 21, nullptr, 10);
  CHECK_MESSAGE(*written + *dropped + unwritten == total, "written ", *written, " + dropped ",
                *dropped, " + unwritten ", unwritten, " != emitted ", total);
  CHECK(unwritten > 0);
  // The file is whole blocks: it converts, and holds exactly the records said written.
  const std::string txt = tmp.file("converted.strace");
  const auto c = spanring_test::run_process({spanring, "convert", out, "--to", "strace", "-o", txt});
  CHECK_MESSAGE(c.exit_code == 0, c.describe());
  const spanring_test::ParsedText parsed = parse_and_check_form(slurp(txt), {}, "full tmpfs");
  uint64_t spans = 0;
  for (const auto& l : parsed.lines) spans += l.kind == spanring_test::LineKind::kSpan ? 1 : 0;
  CHECK_MESSAGE(spans == *written, "the file holds ", spans, " spans, the summary says ",
                *written);
}

TEST_CASE("--max-size keeps a text trace from filling a 1 MiB tmpfs: no failed write, every record accounted") {
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  const std::string mnt = tmp.file("small");
  TmpfsMount mount(mnt, "1m");
  const std::string out = mnt + "/out.strace";
  const std::string json = tmp.file("emitted.json");
  std::vector<std::string> argv = {spanring, "run", "--max-size", "512K", "--ring-records",
                                   "65536", "-o", out, "--"};
  for (const std::string& a : emitter_args(emitter, json, {"--count", "20000", "--pace-us", "20",
                                                            "--pace-every", "8"}))
    argv.push_back(a);
  const auto r = spanring_test::run_process(argv);
  INFO("spanring run stderr:\n", r.err);
  CHECK_MESSAGE(r.exit_code == 0, "without --fail-on-loss the command's status: ", r.describe());
  CHECK_MESSAGE(r.err.find(std::strerror(ENOSPC)) == std::string::npos, "a write failed");
  CHECK(lines_starting(r.err, "spanring: unwritten: ").empty());
  CHECK(file_size(out) <= (512u << 10));
  const Emitted emitted = load_emitted(json);
  Coverage cov;
  add_file(cov, slurp(out), emitted.pid, "max-size on tmpfs");
  uint64_t left_out = 0;
  for (const EmittedThread& t : emitted.threads) {
    const auto run = joined(cov.runs[t.tid], t.name);
    REQUIRE(run.has_value());
    CHECK(run->first == 0);
    left_out += t.emitted - run->second;
  }
  CHECK(cov.max_size == left_out);
  CHECK(left_out > 0);
}


TEST_CASE("bounds that cannot be kept are refused before the command starts") {
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  TempDir tmp;
  const std::string marker = tmp.file("ran");
  struct Case {
    std::vector<std::string> options;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--max-size", "1M", "--rotate", "1M", "-o", tmp.file("a")}, "do not go together"},
      {{"--max-size", "10K", "-o", tmp.file("b")}, "below the smallest file"},
      {{"--rotate", "10K", "-o", tmp.file("c")}, "below the smallest file"},
      // 0 is the limits' "no bound": given explicitly it is a size below 64K like any other,
      // never a silently unbounded file.
      {{"--max-size", "0", "-o", tmp.file("b0")}, "--max-size: 0 is below the smallest file"},
      {{"--max-size", "0K", "-o", tmp.file("b1")}, "--max-size: 0 is below the smallest file"},
      {{"--rotate", "0", "-o", tmp.file("c0")}, "--rotate SIZE 0 is below the smallest file"},
      {{"--rotate", "0:3", "-o", tmp.file("c1")}, "--rotate SIZE 0 is below the smallest file"},
      {{"--rotate", "1M:0", "-o", tmp.file("d")}, "COUNT must be a number of files"},
      {{"--rotate", "lots", "-o", tmp.file("e")}, "SIZE must be a size"},
      // stdout is run_process' pipe: a pipe cannot be rotated.
      {{"--rotate", "1M", "-o", "/dev/stdout"}, "--rotate needs a regular file"},
      // Rotation renames the path: a symbolic link (stdout redirected to a file, for -o -, or
      // a link to a file) would be replaced, so it is refused whatever it points to.
      {{"--rotate", "1M", "-o", "-"}, "is a symbolic link"},
      {{"--rotate", "1M", "-o", tmp.file("link")}, "is a symbolic link"},
      {{"--rotate", "1M", "--also-strace", tmp.file("f"), "-o", tmp.file("g")},
       "--rotate and --also-strace do not go together"},
  };
  const std::string target = tmp.file("target");
  std::FILE* f = std::fopen(target.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fputs("kept\n", f);
  std::fclose(f);
  REQUIRE(::symlink(target.c_str(), tmp.file("link").c_str()) == 0);
  for (const Case& c : cases) {
    std::vector<std::string> argv = {spanring, "run"};
    argv.insert(argv.end(), c.options.begin(), c.options.end());
    for (const char* a : {"--", "/usr/bin/touch"}) argv.push_back(a);
    argv.push_back(marker);
    const auto r = spanring_test::run_process(argv);
    INFO(spanring_test::printable(argv[2] + " " + argv[3], 60), ": ", r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(c.says) != std::string::npos);
    CHECK_MESSAGE(!file_exists(marker), "the command ran");
  }
  struct stat st {};
  REQUIRE(::lstat(tmp.file("link").c_str(), &st) == 0);
  CHECK_MESSAGE(S_ISLNK(st.st_mode), "the link given to --rotate was replaced");
  CHECK(spanring_test::read_file(target) == "kept\n");
}

TEST_CASE("--max-size keeps a text trace under its size, valid, and counts every record it kept out") {
  max_size_run(false);
}

TEST_CASE("--max-size keeps a binary trace under its size, readable, and counts every record it kept out") {
  max_size_run(true);
}

TEST_CASE("--rotate keeps the newest text files, each readable alone, holding the newest records once") {
  rotate_run(false);
}

TEST_CASE("--rotate keeps the newest binary files, each readable alone, holding the newest records once") {
  rotate_run(true);
}

TEST_CASE("a rotating text drainer killed with kill -9 and restarted with the same options loses and repeats nothing") {
  rotate_kill_restart(false);
}

TEST_CASE("a rotating binary drainer killed with kill -9 and restarted with the same options loses and repeats nothing") {
  rotate_kill_restart(true);
}

TEST_CASE("a drainer killed after its file reached --max-size and restarted counts every record kept out, the killed one's too") {
  TempDir tmp;
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const Restarted r = kill_and_restart(
      tmp, false, {"--max-size", "256K"},
      [](const std::string&, const std::string& err) {
        if (err.find("reached --max-size") == std::string::npos) return false;
        // Let the full drainer consume (and commit) a while before it dies.
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        return true;
      });
  INFO("spanring run stderr:\n", r.err1, "\nspanring drain stderr:\n", r.err2);
  CHECK(file_size(r.out) <= (256u << 10));
  Coverage cov;
  add_file(cov, slurp(r.out), r.emitted.pid, "restarted max-size trace");
  CHECK_MESSAGE(cov.max_size_lines == 1, cov.max_size_lines, " max_size lines (want one)");
  uint64_t left_out = 0;
  for (const EmittedThread& t : r.emitted.threads) {
    const auto run = joined(cov.runs[t.tid], t.name);
    REQUIRE(run.has_value());
    CHECK(run->first == 0);
    left_out += t.emitted - run->second;
  }
  CHECK_MESSAGE(cov.max_size == left_out, "the max_size line says ", cov.max_size,
                "; the threads emitted ", left_out, " past what the file holds (the killed "
                "drainer's count must survive in the segment)");
}

}  // TEST_SUITE
