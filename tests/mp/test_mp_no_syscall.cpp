// The hot path makes no syscall: tests/mp/no_syscall_emitter.cpp, traced by `spanring run`, claims
// its ring with one span, forbids every syscall with seccomp (trap and count), emits 100,000
// spans through both producer APIs and exits with exit_group(trapped ? 1 : 0). A negative
// control makes one getpid() after the filter to prove that the counter catches a syscall.
//
// The machine may not be able to run this (no seccomp, or a clock source without a vDSO path
// so that even libc's clock_gettime is a syscall): the emitter then exits 77 and the whole
// program exits 77, which meson reports as skipped.
#include "mp_util.h"
#include "strace_parser.h"
#include "traced_run.h"

#include <doctest/doctest.h>

#include <sys/syscall.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using namespace spanring_test;

namespace {

constexpr uint64_t kSpans = 100000;
constexpr uint64_t kRecords = kSpans + 1;  // plus the first one, emitted before the filter
constexpr int kExitSkip = 77;

// Mirrors no_syscall_emitter.cpp's report page.
struct Report {
  uint64_t trapped;
  int64_t first_nr;
  uint64_t phase;
  uint64_t emitted;
};

std::string syscall_name(int64_t nr) {
  struct Known {
    long nr;
    const char* name;
  };
  static const Known kKnown[] = {
      {SYS_clock_gettime, "clock_gettime"},
      {SYS_gettid, "gettid"},
      {SYS_getpid, "getpid"},
      {SYS_write, "write"},
      {SYS_read, "read"},
      {SYS_futex, "futex"},
      {SYS_mmap, "mmap"},
      {SYS_munmap, "munmap"},
      {SYS_madvise, "madvise"},
      {SYS_sched_yield, "sched_yield"},
      {SYS_nanosleep, "nanosleep"},
      {SYS_clock_nanosleep, "clock_nanosleep"},
      {SYS_prctl, "prctl"},
      {SYS_openat, "openat"},
      {SYS_close, "close"},
      {SYS_rt_sigprocmask, "rt_sigprocmask"},
      {SYS_getrandom, "getrandom"},
      {SYS_mprotect, "mprotect"},
  };
  for (const Known& k : kKnown) {
    if (k.nr == nr) return std::to_string(nr) + " (" + k.name + ")";
  }
  return std::to_string(nr);
}

Report read_report(const std::string& path) {
  const std::string bytes = read_file(path);
  REQUIRE_MESSAGE(bytes.size() >= sizeof(Report), "report file ", path, " holds ", bytes.size(),
                  " bytes");
  Report r{};
  std::memcpy(&r, bytes.data(), sizeof r);
  return r;
}

std::string describe(const Report& r) {
  return "trapped syscalls: " + std::to_string(r.trapped) +
         (r.trapped != 0 ? ", first: " + syscall_name(r.first_nr) : std::string()) + "; phase " +
         std::to_string(r.phase) + " (1 filtered, 2 clock probed, 3 all emitted)" +
         "; spans emitted: " + std::to_string(r.emitted);
}

struct NoSyscallRun {
  RunResult run;
  Report report{};
  std::string out;
};

NoSyscallRun run_no_syscall_emitter(const TempDir& tmp,
                                    const std::vector<std::string>& spanring_options,
                                    const std::vector<std::string>& emitter_options) {
  NoSyscallRun e;
  e.out = tmp.file("out.strace");
  const std::string report = tmp.file("report.bin");
  std::vector<std::string> command = {exe_from_env("NO_SYSCALL_EMITTER"), "--count",
                                      std::to_string(kSpans), "--report", report};
  command.insert(command.end(), emitter_options.begin(), emitter_options.end());
  // Not run_traced: one case expects exit 1, and exit 77 means skip.
  e.run = spanring_run(e.out, spanring_options, command, 20);  // ~1 s each; 3 fit meson's timeout
  REQUIRE_FALSE_MESSAGE(e.run.timed_out, e.run.describe());
  if (e.run.exit_code == kExitSkip) {
    std::fprintf(stderr,
                 "SKIP: this machine cannot run the no-syscall test (seccomp unavailable, or "
                 "clock_gettime is a real syscall here: see "
                 "/sys/devices/system/clocksource/clocksource0/current_clocksource)\n%s\n",
                 e.run.err.c_str());
    std::exit(kExitSkip);
  }
  e.report = read_report(report);
  return e;
}

// The trace holds written + dropped == kRecords for exactly one pid, the emitter's.
void check_emitter_trace(const NoSyscallRun& e, bool allow_drops) {
  const std::optional<Summary> summary = parse_summary(e.run.err);
  REQUIRE(summary.has_value());
  const Trace trace = load_trace(e.out);
  check_trace_invariants(trace, *summary, e.run.err, e.out);
  CHECK(summary->unfinished == 0);

  std::set<uint64_t> pids;
  for (const SpanLine& s : trace.spans) pids.insert(s.pid);
  for (const DropsLine& d : trace.drops) pids.insert(d.pid);
  REQUIRE_MESSAGE(pids.size() == 1, "records from ", pids.size(),
                  " pids, expected the "
                  "emitter's only");
  const uint64_t pid = *pids.begin();
  const uint64_t written = trace.spans.size();
  const uint64_t dropped = trace.dropped_total;
  MESSAGE("pid ", pid, ": written ", written, ", dropped ", dropped, " (", trace.drops.size(),
          " drop lines)");
  CHECK_MESSAGE(written + dropped == kRecords, "written ", written, " + dropped ", dropped,
                " != ", kRecords, " emitted");
  for (const DropsLine& d : trace.drops) {
    CHECK_MESSAGE(d.reason == "ring_full", "drop line with reason ", d.reason,
                  " (only a full ring can drop these records)");
    CHECK_MESSAGE(d.first_seq <= d.last_seq, "drop range ", d.first_seq, "..", d.last_seq);
  }
  if (!allow_drops) {
    CHECK_MESSAGE(dropped == 0, dropped, " records dropped although the ring holds all ", kRecords,
                  " records (2 slots each)");
    CHECK(trace.count("nosys.first") == 1);
    CHECK(trace.count("nosys.span") == kSpans / 2);
    CHECK(trace.count("nosys.c") == kSpans / 2);
  }
}

}  // namespace

TEST_SUITE("mp") {

TEST_CASE("after its first record a thread emits 100,000 spans without a single syscall") {
  // Default sizes: the producer outruns a live drainer, so the 4096-slot ring may overflow;
  // drops are fine here as long as every one is reported.
  TempDir tmp;
  const NoSyscallRun e = run_no_syscall_emitter(tmp, {}, {});
  INFO("spanring run: ", e.run.describe());
  INFO("emitter: ", describe(e.report));
  CHECK_MESSAGE(e.report.trapped == 0, "the emitter made ", e.report.trapped,
                " syscall(s) after its first record; first: ", syscall_name(e.report.first_nr));
  REQUIRE(e.run.exit_code == 0);
  CHECK(e.report.phase == 3);
  CHECK(e.report.emitted == kRecords);
  check_emitter_trace(e, /*allow_drops=*/true);
}

TEST_CASE("with a ring that holds every record, all 100,001 are written and none dropped") {
  // 2^18 slots; every record here takes 2 (name + attributes <= 76 raw bytes), so 200,002
  // slots: the ring cannot fill however slowly the drainer runs.
  TempDir tmp;
  const NoSyscallRun e =
      run_no_syscall_emitter(tmp, {"--rings", "2", "--ring-records", "262144"}, {});
  INFO("spanring run: ", e.run.describe());
  INFO("emitter: ", describe(e.report));
  REQUIRE(e.run.exit_code == 0);
  check_emitter_trace(e, /*allow_drops=*/false);
}

TEST_CASE("the trap counter catches a syscall: one getpid after the filter makes it exit 1") {
  TempDir tmp;
  const NoSyscallRun e = run_no_syscall_emitter(tmp, {}, {"--call-getpid"});
  INFO("spanring run: ", e.run.describe());
  INFO("emitter: ", describe(e.report));
  CHECK(e.run.exit_code == 1);
  CHECK(e.report.trapped == 1);
  CHECK(e.report.first_nr == SYS_getpid);
  CHECK(e.report.phase == 3);
}

}  // TEST_SUITE("mp")
