// io_uring unavailable (io_uring_setup fails with ENOSYS under no_uring_exec's seccomp filter,
// as under Docker's default profile):
// - by default the workload is never stopped: `spanring run` says so in one line, runs the
//   command and writes its trace with write(2), byte for byte what the io_uring writer writes
//   (the restart of a killed fallback drainer: test_mp_drainer_restart.cpp);
// - with --require-tracing, `spanring run` says so in one line, exits non-zero and never
//   starts the command; `spanring drain` says so in one line, exits non-zero and moves no ring
//   tail (nothing was written, so nothing may be consumed).
// Each check has a control run without the filter. Skipped (77) without seccomp.
#include "det_expect.h"
#include "fault_util.h"

#include <spanring/segment.h>

#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

using namespace fault_test;

namespace {

constexpr double kWaitS = 20;
constexpr int kSkip = 77;

struct Ran {
  Exit exit;
  std::string out;
  std::string err;
};

Ran run_to_end(const TempDir& tmp, const std::string& tag, std::vector<std::string> argv,
               std::vector<std::pair<std::string, std::string>> env = {}) {
  SpawnOptions o{std::move(argv), std::move(env), tmp.file(tag + ".out"), tmp.file(tag + ".err")};
  Ran r;
  r.exit = wait_exit(spawn(o), kWaitS);
  r.out = slurp(tmp.file(tag + ".out"));
  r.err = slurp(tmp.file(tag + ".err"));
  if (r.exit.code == kSkip && r.err.find("no_uring_exec:") != std::string::npos) {
    std::fprintf(stderr, "SKIP: %s", r.err.c_str());
    std::exit(kSkip);
  }
  return r;
}

size_t line_count(const std::string& s) {
  size_t n = 0;
  for (const char c : s) n += c == '\n' ? 1 : 0;
  return n;
}

struct RingLine {
  uint32_t state;
  uint64_t head;
  uint64_t tail;
};

std::vector<RingLine> ring_lines(const std::string& segment) {
  ShmView v;
  REQUIRE(v.open(segment, false));
  std::vector<RingLine> out;
  for (uint32_t i = 0; i < v.header().ring_count; ++i) {
    const spanring::RingHeader& r = v.ring(i);
    out.push_back({r.state.load(), r.head.load(), r.tail.load()});
  }
  return out;
}

// A segment of 4 rings of 64 slots into which two threads of an emitter published 10 records
// each (20 slots of a ring) before exiting: nothing has drained them yet. Removed at the end.
struct PublishedSegment {
  std::string name;
  SegmentGuard guard;
  std::vector<RingLine> before;  // every ring's line once the emitter is done

  PublishedSegment(const TempDir& tmp, const std::string& tag)
      : name("spanring-faulttest-" + std::to_string(::getpid()) + "-" + tag), guard(name) {
    spanring::SegmentOptions opts;
    opts.ring_count = 4;
    opts.ring_capacity = 64;
    spanring::Segment::create(name, opts);
    const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
    const Ran p = run_to_end(tmp, "producer", {emitter, "--threads", "2", "--count", "10"},
                             {{"SPANRING_SEGMENT", name}});
    REQUIRE_MESSAGE(p.exit.exited_ok(), p.exit.describe(), p.err);
    REQUIRE_MESSAGE(p.out.find("enabled=1 threads=2 emitted=20 stored=20") != std::string::npos,
                    p.out);
    before = ring_lines(name);
    size_t published = 0;
    for (const RingLine& r : before) published += r.head != r.tail ? 1 : 0;
    REQUIRE(published == 2);
  }
  // Whether the tail of every ring that held records has reached its head.
  bool drained() const {
    const std::vector<RingLine> now = ring_lines(name);
    for (size_t i = 0; i < now.size(); ++i)
      if (before[i].head != before[i].tail && now[i].tail != before[i].head) return false;
    return true;
  }
};

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("without io_uring spanring run --require-tracing says so in one line, exits non-zero and never starts the command") {
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string wrapper = spanring_test::exe_from_env("NO_URING_EXEC");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  const std::string started = tmp.file("started.json");
  const std::vector<std::string> run = {spanring, "run", "--require-tracing", "-o",
                                        tmp.file("out.strace"), "--", emitter, "--threads", "1",
                                        "--count", "1", "--out", started};
  std::vector<std::string> wrapped = {wrapper};
  wrapped.insert(wrapped.end(), run.begin(), run.end());
  const Ran r = run_to_end(tmp, "wrapped", wrapped);
  INFO("spanring run under no_uring_exec: ", r.exit.describe(), "\nstderr:\n", r.err);
  CHECK_MESSAGE((!r.exit.timed_out && r.exit.sig == 0 && r.exit.code > 0),
                "spanring run should exit non-zero by itself");
  CHECK_MESSAGE(line_count(r.err) == 1, "want exactly one stderr line");
  CHECK_MESSAGE(r.err.rfind("spanring: ", 0) == 0, "the line does not start 'spanring: '");
  CHECK_MESSAGE(r.err.find("io_uring") != std::string::npos, "the line does not name io_uring");
  CHECK_MESSAGE(!file_exists(started), "the command was started without io_uring");
  // Control: the same command line without the filter runs the command.
  const Ran c = run_to_end(tmp, "control", run);
  CHECK_MESSAGE(c.exit.exited_ok(), "control: ", c.exit.describe(), "\n", c.err);
  CHECK_MESSAGE(file_exists(started), "control: the command did not run");
}

TEST_CASE("without io_uring spanring drain --require-tracing says so in one line, exits non-zero and moves no ring tail") {
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string wrapper = spanring_test::exe_from_env("NO_URING_EXEC");
  TempDir tmp;
  const PublishedSegment seg(tmp, "nouring");
  const std::string& name = seg.name;
  const std::vector<RingLine>& before = seg.before;

  const std::string out = tmp.file("out.strace");
  const Ran r = run_to_end(tmp, "wrapped", {wrapper, spanring, "drain", "--require-tracing",
                                            "--segment", name, "-o", out});
  INFO("spanring drain under no_uring_exec: ", r.exit.describe(), "\nstderr:\n", r.err);
  CHECK_MESSAGE((!r.exit.timed_out && r.exit.sig == 0 && r.exit.code > 0),
                "spanring drain should exit non-zero by itself");
  CHECK_MESSAGE(line_count(r.err) == 1, "want exactly one stderr line");
  CHECK_MESSAGE(r.err.find("io_uring") != std::string::npos, "the line does not name io_uring");
  const std::vector<RingLine> after = ring_lines(name);
  for (size_t i = 0; i < before.size(); ++i) {
    CHECK_MESSAGE(after[i].tail == before[i].tail, "ring ", i, ": tail moved from ",
                  before[i].tail, " to ", after[i].tail, " with nothing written");
    CHECK_MESSAGE(after[i].state == before[i].state, "ring ", i, ": state changed");
  }
  {
    ShmView v;
    REQUIRE(v.open(name, false));
    CHECK_MESSAGE(v.header().drainer_pid.load() == 0, "the failed drainer left its lock");
  }

  // Control: a drainer with io_uring consumes both rings.
  const pid_t pid = spawn({{spanring, "drain", "--segment", name, "-o", out}, {}, "",
                           tmp.file("control.err")});
  ChildGuard child(pid);
  const bool drained = wait_until([&] { return seg.drained(); }, kWaitS);
  REQUIRE(wait_until([&] { return catches_signal(pid, SIGTERM); }, kWaitS));
  ::kill(pid, SIGTERM);
  const Exit e = wait_exit(pid, kWaitS);
  child.release();
  CHECK_MESSAGE(drained, "control: the drainer did not move the tails: ", slurp(tmp.file("control.err")));
  CHECK_MESSAGE(e.exited_ok(), "control: ", e.describe());
}

TEST_CASE("without io_uring spanring run says so in one line, runs the command and writes with write(2) exactly what the io_uring writer writes") {
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string wrapper = spanring_test::exe_from_env("NO_URING_EXEC");
  const std::string det_emitter = spanring_test::exe_from_env("FAULT_DET_EMITTER");
  TempDir tmp;
  // The deterministic workload, into rings that hold all of it: the output is a function of
  // the workload, the pid and the tid only (test_mp_uring_faults.cpp checks the io_uring writer
  // against the same reference).
  constexpr uint64_t kRecords = 8000;
  const std::string out = tmp.file("out.strace");
  const std::string json = tmp.file("det.json");
  const Ran r = run_to_end(tmp, "wrapped",
                           {wrapper, spanring, "run", "--rings", "4", "--ring-records", "65536",
                            "-o", out, "--", det_emitter, "--out", json, "--count",
                            std::to_string(kRecords)});
  INFO("spanring run under no_uring_exec: ", r.exit.describe(), "\nstderr:\n", r.err);
  REQUIRE_MESSAGE(r.exit.exited_ok(), "the command's status is passed on: it exited 0");
  const auto said = lines_starting(r.err, "spanring: io_uring is unavailable (");
  REQUIRE_MESSAGE(said.size() == 1, "want exactly one line saying io_uring is unavailable");
  CHECK(said[0].find("Function not implemented") != std::string::npos);  // the cause: ENOSYS
  CHECK(said[0].find("writing with write(2) instead") != std::string::npos);
  CHECK(r.err.find("failed") == std::string::npos);
  const det::DetRun d = det::load_run(json);
  CHECK(d.count == kRecords);
  const std::string got = slurp(out);
  const std::string want = det::expected_for(d, got, tmp, "fallback");
  CHECK_MESSAGE(got == want, "the write(2) output differs from the reference: ",
                det::first_difference(got, want));
}

TEST_CASE("without io_uring spanring drain writes with write(2) and consumes what it wrote") {
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string wrapper = spanring_test::exe_from_env("NO_URING_EXEC");
  TempDir tmp;
  const PublishedSegment seg(tmp, "fallback");
  const std::string& name = seg.name;

  const std::string out = tmp.file("out.strace");
  const pid_t pid = spawn({{wrapper, spanring, "drain", "--segment", name, "-o", out}, {}, "",
                           tmp.file("drain.err")});
  ChildGuard child(pid);
  const bool drained = wait_until([&] { return seg.drained(); }, kWaitS);
  REQUIRE(wait_until([&] { return catches_signal(pid, SIGTERM); }, kWaitS));
  ::kill(pid, SIGTERM);
  const Exit e = wait_exit(pid, kWaitS);
  child.release();
  const std::string err = slurp(tmp.file("drain.err"));
  INFO("spanring drain under no_uring_exec: ", e.describe(), "\nstderr:\n", err);
  CHECK_MESSAGE(drained, "the fallback drainer did not move the tails");
  CHECK(e.exited_ok());
  CHECK(lines_starting(err, "spanring: io_uring is unavailable (").size() == 1);
  const spanring_test::ParsedText parsed = parse_and_check_form(slurp(out), {}, "fallback drain");
  size_t spans = 0;
  for (const auto& l : parsed.lines) spans += l.kind == spanring_test::LineKind::kSpan ? 1 : 0;
  CHECK(spans == 20);
}

}  // TEST_SUITE
