// The flight recorder (`spanring run --flight-recorder SIZE`, drain/flight_recorder.h) under a
// real workload: fault_emitter's threads emit `seq=<n>` spans, about ten times SIZE of binary
// trace, while the test takes snapshots
// - by SIGUSR1 to the drainer, by `spanring snapshot --segment NAME -o FILE`, and by the
//   command's normal exit with --snapshot-at-exit (one run);
// - by the command dying of a signal (SIGKILL of the emitter; another run), and by
//   dying_emitter killing itself with two spans open (listed as unfinished).
// Every snapshot is checked the same way: `spanring convert` turns it into [STRACE] text and
// Chrome JSON; per emitting thread, its spans and drop ranges tile the sequence numbers from 0
// to its newest one exactly once (check_thread_accounting), the first range being the
// `overwritten` one, [0, first in the window), and that newest one is at least what the thread
// had emitted when the snapshot was asked for (the window holds the newest records). The
// drainer's memory stays under SIZE plus a constant (VmHWM, its peak resident set, and RssAnon).
// And `spanring snapshot` on a segment whose drainer is no flight recorder, or on no segment,
// fails with a clear message.
#include "fault_util.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using namespace fault_test;

namespace {

constexpr double kWaitS = 40;
constexpr uint64_t kSize = 1u << 20;  // --flight-recorder 1M
// A fault.tN span with seq=<n> is ~80 bytes in a binary block: ten windows are ~130 k records.
constexpr uint64_t kTenWindowsRecords = 10 * kSize / 80;
// What the drainer may use besides the window (docs/failure-model.md): private memory
// (RssAnon: heap, a drain buffer of SIZE / 8, while a snapshot is written four 1 MiB write
// buffers) at most SIZE + 8 MiB; its peak resident set (VmHWM) adds its binary and libraries
// (< 8 MiB) and the segment's pages it reads (8 rings x 4096 slots x 64 bytes = 2 MiB here).
constexpr uint64_t kPrivateConstantBytes = 8u << 20;
constexpr uint64_t kSegmentBytes = 8 * 4096 * 64;
constexpr uint64_t kPeakConstantBytes = kPrivateConstantBytes + (8u << 20) + kSegmentBytes;

std::string spanring_exe() { return spanring_test::exe_from_env("SPANRING_EXE"); }

// A field of /proc/PID/status in bytes (its kB value), or 0.
uint64_t status_bytes(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, field.size() + 1, field + ":") == 0)
      return std::stoull(line.substr(field.size() + 1)) * 1024;
  return 0;
}

uint64_t emitted(const ReportMap& report, uint32_t i) {
  // relaxed: a progress counter, read as a lower bound.
  return report->t[i].emitted.load(std::memory_order_relaxed);
}
// Records put into the rings (what the drainer reads into the window; a record the ring
// refused while the drainer was behind never reaches it), over all threads.
uint64_t stored_total(const ReportMap& report, uint32_t threads) {
  uint64_t n = 0;
  // relaxed: progress counters, read as lower bounds.
  for (uint32_t i = 0; i < threads; ++i) n += report->t[i].stored.load(std::memory_order_relaxed);
  return n;
}

struct SnapshotFacts {
  std::map<uint64_t, uint64_t> window_first;  // per tid: first seq in the window
  std::map<uint64_t, uint64_t> newest;        // per tid: newest seq covered
};

// Converts and checks one snapshot (see the top of the file). `min_newest[i]`: thread i's
// newest sequence number must be at least this; `max_newest` (when not empty): at most this.
SnapshotFacts check_snapshot(const std::string& path, const ReportMap& report,
                             uint32_t threads, const std::vector<uint64_t>& min_newest,
                             const std::vector<uint64_t>& max_newest, const std::string& label) {
  SnapshotFacts facts;
  INFO(label, ": ", path);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  // The window is SIZE minus at most a block (SIZE / 8) and the bookkeeping; metadata is small.
  CHECK(static_cast<uint64_t>(st.st_size) >= kSize / 2);
  CHECK(static_cast<uint64_t>(st.st_size) <= kSize + (64u << 10));

  const std::string text_path = path + ".strace";
  const auto conv = spanring_test::run_process(
      {spanring_exe(), "convert", path, "--to", "strace", "-o", text_path});
  REQUIRE_MESSAGE(conv.exit_code == 0, conv.describe());
  const spanring_test::ParsedText parsed =
      parse_and_check_form(slurp(text_path), {}, label + " as [STRACE]");
  check_anchors(parsed, {}, label);
  const auto owners = lines_by_owner(parsed);
  const uint64_t pid = report->pid.load(std::memory_order_relaxed);
  uint64_t spans = 0;
  uint64_t overwritten_lines = 0;
  for (uint32_t i = 0; i < threads; ++i) {
    const uint64_t tid = report->t[i].tid.load(std::memory_order_relaxed);
    const auto it = owners.find({pid, tid});
    REQUIRE_MESSAGE(it != owners.end(), label, ": no line of thread ", i, " (tid ", tid, ")");
    const OwnerLines& lines = it->second;
    // The newest sequence number the snapshot covers for this thread.
    uint64_t newest = 0;
    for (const auto* s : lines.spans) {
      const auto v = spanring_test::attr_value(s->attrs, "seq");
      REQUIRE(v);
      newest = std::max<uint64_t>(newest, std::stoull(std::string(*v)));
    }
    for (const auto* d : lines.drops) newest = std::max(newest, d->last_seq);
    // Every seq from 0 to the newest is a span or in one drop range, once; in file order.
    EmittedThread t{"fault.t" + std::to_string(i), tid, newest + 1, 0};
    const Accounting a = check_thread_accounting(lines, t, pid, std::nullopt, label);
    spans += a.written;
    // Ten windows were emitted: the oldest records were pushed out, and say so first.
    REQUIRE(!lines.drops.empty());
    const auto* first = lines.drops.front();
    CHECK(first->reason == "overwritten");
    CHECK(first->first_seq == 0);
    CHECK(a.dropped_by_reason.count("overwritten") == 1);
    CHECK(a.dropped_by_reason.at("overwritten") == first->last_seq + 1);
    if (!lines.spans.empty()) {
      // The window starts right after the overwritten range (a span or another drop range).
      uint64_t window_first = UINT64_MAX;
      for (const auto* s : lines.spans)
        window_first = std::min<uint64_t>(
            window_first, std::stoull(std::string(*spanring_test::attr_value(s->attrs, "seq"))));
      for (size_t k = 1; k < lines.drops.size(); ++k)
        window_first = std::min(window_first, lines.drops[k]->first_seq);
      CHECK(window_first == first->last_seq + 1);
      facts.window_first[tid] = window_first;
    }
    overwritten_lines += 1;
    CHECK_MESSAGE(newest >= min_newest[i], label, ": thread ", i, " newest seq ", newest,
                  " but it had emitted ", min_newest[i] + 1, " when the snapshot was asked for");
    if (!max_newest.empty()) CHECK(newest <= max_newest[i]);
    facts.newest[tid] = newest;
  }
  CHECK(spans > 0);

  // Chrome JSON: valid, one X event per span, the overwritten ranges as instant events.
  const std::string json_path = path + ".json";
  const auto chrome = spanring_test::run_process(
      {spanring_exe(), "convert", path, "--to", "chrome", "-o", json_path});
  REQUIRE_MESSAGE(chrome.exit_code == 0, chrome.describe());
  const nlohmann::json j = nlohmann::json::parse(slurp(json_path));
  uint64_t x = 0;
  uint64_t overwritten_marks = 0;
  for (const auto& e : j.at("traceEvents")) {
    if (e.value("ph", "") == "X" && e.value("cat", "") == "host") ++x;
    if (e.value("ph", "") == "i" &&
        e.value("name", "").find("(overwritten)") != std::string::npos)
      ++overwritten_marks;
  }
  CHECK(x == spans);
  CHECK(overwritten_marks == overwritten_lines);

  // `spanring report` names the reason.
  const auto rep = spanring_test::run_process({spanring_exe(), "report", path, "--json"});
  REQUIRE_MESSAGE(rep.exit_code == 0, rep.describe());
  const nlohmann::json r = nlohmann::json::parse(rep.out);
  uint64_t reported = 0;
  for (const auto& d : r.at("drops"))
    if (d.at("reason") == "overwritten") ++reported;
  CHECK(reported == overwritten_lines);
  return facts;
}

std::vector<uint64_t> newest_emitted(const ReportMap& report, uint32_t threads) {
  std::vector<uint64_t> v;
  for (uint32_t i = 0; i < threads; ++i) v.push_back(emitted(report, i) - 1);
  return v;
}

// The drainer's memory: its peak resident set and its private (anonymous) resident memory.
void check_memory(pid_t drainer, const std::string& when) {
  const uint64_t hwm = status_bytes(drainer, "VmHWM");
  const uint64_t anon = status_bytes(drainer, "RssAnon");
  MESSAGE("drainer memory ", when, ": VmHWM ", hwm >> 10, " KiB, RssAnon ", anon >> 10,
          " KiB (SIZE ", kSize >> 10, " KiB)");
  REQUIRE(hwm != 0);
#if defined(__SANITIZE_ADDRESS__)
  // Under ASan (.ci/run's second pass) the drainer's memory is the sanitizer's: shadow memory
  // and a quarantine of freed blocks. The bound is checked in the plain build.
  MESSAGE("ASan build: the memory bound is not checked");
#else
  CHECK(hwm <= kSize + kPeakConstantBytes);
  CHECK(anon <= kSize + kPrivateConstantBytes);
#endif
}

constexpr uint32_t kThreads = 2;

std::vector<std::string> emitter_argv(const ReportMap& report, const std::string& json) {
  return {spanring_test::exe_from_env("FAULT_EMITTER"), "--threads", std::to_string(kThreads),
          "--report", report.path(), "--until-stop", "1", "--out", json,
          "--pace-us", "20", "--pace-every", "32"};
}

// Waits until the rings took more than `more_than` records in all: counted in records stored,
// not emitted, so that "ten windows later" holds however many the producers had to drop.
void wait_for_records(const ReportMap& report, uint64_t more_than) {
  REQUIRE(wait_until([&] { return stored_total(report, kThreads) > more_than; }, kWaitS, 5));
}

std::string wait_for_snapshot_line(const std::string& err_path, uint64_t n) {
  const std::string prefix = "spanring: snapshot " + std::to_string(n) + " ";
  std::string line;
  const bool seen = wait_until([&] {
    for (const std::string& l : lines_starting(slurp(err_path), prefix)) line = l;
    return !line.empty();
  }, kWaitS, 5);
  REQUIRE_MESSAGE(seen, "no '", prefix, "' line; stderr: ", slurp(err_path));
  return line;
}

}  // namespace

TEST_CASE("snapshots by SIGUSR1, by spanring snapshot and at exit hold the newest records, "
          "contiguous per thread, and the drainer's memory stays bounded") {
  TempDir tmp;
  ReportMap report(tmp.file("report"));
  const std::string err = tmp.file("run.err");
  SpawnOptions o;
  o.argv = {spanring_exe(), "run", "--flight-recorder", "1M", "--snapshot-at-exit", "--rings", "8",
            "--ring-records", "4096",
            "-o", tmp.file("fr.sptrace"), "--"};
  for (const auto& a : emitter_argv(report, tmp.file("emitted.json"))) o.argv.push_back(a);
  o.stderr_path = err;
  BackgroundDrainer drainer(o, kWaitS);
  SegmentGuard segment_guard(drainer.segment());
  REQUIRE(wait_until([&] { return report.ready(); }, kWaitS));
  // Nothing is written while recording.
  CHECK(!file_exists(tmp.file("fr.sptrace")));

  // 1. SIGUSR1, after ten windows.
  wait_for_records(report, kTenWindowsRecords);
  check_memory(drainer.pid(), "after ten windows");
  std::vector<uint64_t> asked = newest_emitted(report, kThreads);
  REQUIRE(::kill(drainer.pid(), SIGUSR1) == 0);
  const std::string line1 = wait_for_snapshot_line(err, 1);
  CHECK(line1.find("(SIGUSR1): " + tmp.file("fr.snap-1.sptrace")) != std::string::npos);
  const SnapshotFacts s1 =
      check_snapshot(tmp.file("fr.snap-1.sptrace"), report, kThreads, asked, {}, "SIGUSR1");

  // 2. spanring snapshot, ten windows later: a window entirely newer than the first one.
  wait_for_records(report, stored_total(report, kThreads) + kTenWindowsRecords);
  asked = newest_emitted(report, kThreads);
  const auto snap = spanring_test::run_process(
      {spanring_exe(), "snapshot", "--segment", drainer.segment(), "-o",
       tmp.file("asked.sptrace")});
  REQUIRE_MESSAGE(snap.exit_code == 0, snap.describe());
  CHECK(snap.out == tmp.file("asked.sptrace") + "\n");
  const SnapshotFacts s2 = check_snapshot(tmp.file("asked.sptrace"), report, kThreads, asked,
                                          {}, "spanring snapshot");
  for (const auto& [tid, first] : s2.window_first) CHECK(first > s1.newest.at(tid));
  check_memory(drainer.pid(), "after two snapshots");

  // 3. The command's normal exit (--snapshot-at-exit): everything it emitted, up to its last.
  report->stop.store(1, std::memory_order_relaxed);
  const Exit e = wait_exit(drainer.pid(), kWaitS);
  drainer.release();
  REQUIRE_MESSAGE(e.exited_ok(), e.describe(), "\n", slurp(err));
  const Emitted em = load_emitted(tmp.file("emitted.json"));
  REQUIRE(em.threads.size() == kThreads);
  std::vector<uint64_t> last;
  for (const auto& t : em.threads) last.push_back(t.emitted - 1);
  const std::string line3 = wait_for_snapshot_line(err, 3);
  CHECK(line3.find("(command exited): " + tmp.file("fr.snap-3.sptrace")) != std::string::npos);
  check_snapshot(tmp.file("fr.snap-3.sptrace"), report, kThreads, last, last, "at exit");
  CHECK(lines_starting(slurp(err), "spanring: flight recorder: 3 snapshot(s) written").size() == 1);
  CHECK(!file_exists(tmp.file("fr.sptrace")));
}

TEST_CASE("the command killed by a signal gets a snapshot that ends with its last records") {
  TempDir tmp;
  ReportMap report(tmp.file("report"));
  const std::string err = tmp.file("run.err");
  SpawnOptions o;
  o.argv = {spanring_exe(), "run", "--flight-recorder", "1M", "--rings", "8",
            "--ring-records", "4096", "--"};
  for (const auto& a : emitter_argv(report, tmp.file("emitted.json"))) o.argv.push_back(a);
  o.stderr_path = err;
  // Default names: spanring-<drainer pid>.snap-<n>.sptrace in the drainer's directory (ours).
  BackgroundDrainer drainer(o, kWaitS);
  SegmentGuard segment_guard(drainer.segment());
  REQUIRE(wait_until([&] { return report.ready(); }, kWaitS));
  wait_for_records(report, kTenWindowsRecords);
  // relaxed: published before the report's magic, which report.ready() acquired.
  const auto emitter = static_cast<pid_t>(report->pid.load(std::memory_order_relaxed));
  REQUIRE(::kill(emitter, SIGKILL) == 0);
  const pid_t drainer_pid = drainer.pid();
  const Exit e = wait_exit(drainer_pid, kWaitS);
  drainer.release();
  CHECK_MESSAGE(e.code == 128 + SIGKILL, e.describe(), "\n", slurp(err));
  // A killed thread may have published a record before it counted it: newest is emitted - 1
  // or emitted.
  std::vector<uint64_t> lo;
  std::vector<uint64_t> hi;
  for (uint32_t i = 0; i < kThreads; ++i) {
    lo.push_back(emitted(report, i) - 1);
    hi.push_back(emitted(report, i));
  }
  const std::string path = std::filesystem::current_path().string() + "/spanring-" +
                           std::to_string(drainer_pid) + ".snap-1.sptrace";
  struct Remove {
    std::string p;
    ~Remove() {
      std::remove(p.c_str());
      std::remove((p + ".strace").c_str());
      std::remove((p + ".json").c_str());
    }
  } remove_after{path};
  const std::string line = wait_for_snapshot_line(err, 1);
  CHECK(line.find("(command killed by signal 9): " + path) != std::string::npos);
  check_snapshot(path, report, kThreads, lo, hi, "killed by a signal");
}

TEST_CASE("a command killed with spans open gets a snapshot that lists them as unfinished") {
  // dying_emitter --child open: a few spans, then two nested spans open and SIGKILL.
  TempDir tmp;
  const auto r = spanring_test::run_process(
      {spanring_exe(), "run", "--flight-recorder", "1M", "--rings", "8",
       "--ring-records", "4096", "-o",
       tmp.file("die.sptrace"), "--", spanring_test::exe_from_env("FAULT_DYING_EMITTER"), "--out",
       tmp.file("die.jsonl"), "--child", "open", "--index", "0"});
  CHECK_MESSAGE(r.term_signal == 0, r.describe());
  CHECK_MESSAGE(r.exit_code == 128 + SIGKILL, r.describe());
  CHECK_MESSAGE(r.err.find("spanring: snapshot 1 (command killed by signal 9): " +
                           tmp.file("die.snap-1.sptrace")) != std::string::npos,
                r.describe());
  const auto conv = spanring_test::run_process(
      {spanring_exe(), "convert", tmp.file("die.snap-1.sptrace"), "--to", "strace"});
  REQUIRE_MESSAGE(conv.exit_code == 0, conv.describe());
  const auto unfinished = lines_starting(conv.out, "[SPANRING_UNFINISHED]");
  REQUIRE(unfinished.size() == 2);
  CHECK(unfinished[0].find("name=die.open.outer ") != std::string::npos);
  CHECK(unfinished[1].find("name=die.open.inner ") != std::string::npos);
  // Everything it emitted fits in the window: nothing is reported overwritten.
  CHECK(conv.out.find("reason=overwritten") == std::string::npos);
  CHECK(conv.out.find("[STRACE] v=1 ") != std::string::npos);
}

TEST_CASE("with io_uring blocked, snapshots are written with write(2) and hold every record") {
  // no_uring_exec: io_uring_setup fails with ENOSYS (as under Docker's seccomp profile).
  TempDir tmp;
  const std::string json = tmp.file("emitted.json");
  const auto r = spanring_test::run_process(
      {spanring_test::exe_from_env("NO_URING_EXEC"), spanring_exe(), "run", "--flight-recorder",
       "1M", "--snapshot-at-exit", "--rings", "8",
       "--ring-records", "4096", "-o", tmp.file("fr"), "--",
       spanring_test::exe_from_env("FAULT_EMITTER"), "--threads", "2", "--count", "3000",
       "--pace-us", "20", "--pace-every", "32", "--out", json});
  if (r.exit_code == 77 && r.err.find("no_uring_exec:") != std::string::npos) {
    std::fprintf(stderr, "SKIP: %s", r.err.c_str());  // no seccomp here (its own meson test)
    std::exit(77);
  }
  REQUIRE_MESSAGE(r.exit_code == 0, r.describe());
  CHECK_MESSAGE(r.err.find("io_uring is unavailable") != std::string::npos, r.describe());
  CHECK_MESSAGE(r.err.find("spanring: snapshot 1 (command exited): " +
                           tmp.file("fr.snap-1.sptrace")) != std::string::npos,
                r.describe());
  const auto conv = spanring_test::run_process(
      {spanring_exe(), "convert", tmp.file("fr.snap-1.sptrace"), "--to", "strace", "-o",
       tmp.file("fr.strace")});
  REQUIRE_MESSAGE(conv.exit_code == 0, conv.describe());
  // 2 x 3,000 records fit in the window: every one is there, nothing overwritten.
  const spanring_test::ParsedText parsed =
      parse_and_check_form(slurp(tmp.file("fr.strace")), {}, "write(2) snapshot");
  const auto owners = lines_by_owner(parsed);
  const Emitted em = load_emitted(json);
  REQUIRE(em.threads.size() == 2);
  for (const EmittedThread& t : em.threads) {
    const auto it = owners.find({em.pid, t.tid});
    REQUIRE(it != owners.end());
    const Accounting a = check_thread_accounting(it->second, t, em.pid, std::nullopt, "write(2)");
    CHECK(a.dropped_by_reason.count("overwritten") == 0);
  }
}

TEST_CASE("spanring snapshot fails clearly where there is no flight recorder") {
  TempDir tmp;
  SUBCASE("no such segment") {
    const auto r = spanring_test::run_process(
        {spanring_exe(), "snapshot", "--segment", "spanring-no-such-segment"});
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK_MESSAGE(r.err.find("spanring-no-such-segment") != std::string::npos, r.describe());
  }
  SUBCASE("a drainer that writes a trace file") {
    ReportMap report(tmp.file("report"));
    SpawnOptions o;
    o.argv = {spanring_exe(), "run", "--rings", "8",
              "--ring-records", "4096", "-o", tmp.file("plain.strace"), "--",
              spanring_test::exe_from_env("FAULT_EMITTER"), "--threads", "1", "--report",
              report.path(), "--until-stop", "1", "--pace-us", "100"};
    o.stderr_path = tmp.file("run.err");
    BackgroundDrainer drainer(o, kWaitS);
    SegmentGuard segment_guard(drainer.segment());
    const auto r = spanring_test::run_process(
        {spanring_exe(), "snapshot", "--segment", drainer.segment(), "-o", tmp.file("x.sptrace")});
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK_MESSAGE(r.err.find("is not a flight recorder") != std::string::npos, r.describe());
    CHECK(!file_exists(tmp.file("x.sptrace")));
    // SIGUSR1 to it is refused with a line, not fatal (its default action would end it).
    REQUIRE(::kill(drainer.pid(), SIGUSR1) == 0);
    REQUIRE(wait_until([&] {
      return slurp(tmp.file("run.err")).find("SIGUSR1 ignored") != std::string::npos;
    }, kWaitS));
    // The drainer goes on undisturbed and ends as usual.
    REQUIRE(wait_until([&] { return report.ready(); }, kWaitS));
    report->stop.store(1, std::memory_order_relaxed);
    const Exit e = wait_exit(drainer.pid(), kWaitS);
    drainer.release();
    CHECK_MESSAGE(e.exited_ok(), e.describe());
  }
  SUBCASE("a segment whose drainer was killed") {
    ReportMap report(tmp.file("report"));
    SpawnOptions o;
    o.argv = {spanring_exe(), "run", "--flight-recorder", "1M", "--rings", "8",
              "--ring-records", "4096", "-o",
              tmp.file("fr.sptrace"), "--", spanring_test::exe_from_env("FAULT_EMITTER"),
              "--threads", "1", "--report", report.path(), "--until-stop", "1", "--pace-us",
              "100"};
    o.stderr_path = tmp.file("run.err");
    BackgroundDrainer drainer(o, kWaitS);
    SegmentGuard segment_guard(drainer.segment());
    REQUIRE(wait_until([&] { return report.ready(); }, kWaitS));
    REQUIRE(::kill(drainer.pid(), SIGKILL) == 0);
    const Exit e = wait_exit(drainer.pid(), kWaitS);
    drainer.release();
    CHECK(e.sig == SIGKILL);
    const auto r = spanring_test::run_process(
        {spanring_exe(), "snapshot", "--segment", drainer.segment()});
    CHECK(r.exit_code == 1);
    CHECK(r.out.empty());
    CHECK_MESSAGE(r.err.find("has no drainer running") != std::string::npos, r.describe());
    // The emitter, orphaned, is still emitting into the segment: stop it.
    report->stop.store(1, std::memory_order_relaxed);
    // acquire: pairs with the emitter's release of kPhaseExited.
    REQUIRE(wait_until(
        [&] { return report->phase.load(std::memory_order_acquire) == fault::kPhaseExited; },
        kWaitS));
  }
  SUBCASE("--flight-recorder with --format strace is refused before anything starts") {
    const auto r = spanring_test::run_process(
        {spanring_exe(), "run", "--flight-recorder", "1M", "--format", "strace", "--",
         "/bin/true"});
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(r.err.find("--format binary") != std::string::npos, r.describe());
  }
}
