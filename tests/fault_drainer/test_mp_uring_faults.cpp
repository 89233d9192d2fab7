// The io_uring writer under pressure: output into a pipe that a slow reader empties 4 KiB at a
// time, and many 1 MiB writes in flight to one file. For the deterministic workload
// (det_workload.h) the bytes that arrive, through the pipe or in the file, must equal what the
// test's own plain synchronous writer (det_expect.h) produces for the same records: whole lines,
// in order, nothing missing or doubled. For a large flat-out workload the file must have no hole
// and no overlap: every byte belongs to a line that parses, and every record is accounted for.
#include "det_expect.h"
#include "det_workload.h"
#include "fault_util.h"
#include "traced_run.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

using namespace fault_test;

namespace {

constexpr double kWaitS = 30;
// Records of the deterministic workload: ~1.6 MB of text. Its rings (65536 slots) hold all of
// it, so nothing is dropped however slowly the output drains: the output is a function of the
// workload, the pid and the tid only.
constexpr uint64_t kDetRecords = 8000;
constexpr const char* kDetRingSlots = "65536";

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("the plain writer's encoder follows the spec's examples (control for the byte comparisons)") {
  CHECK(det::encode_field("ext.app.odd name=x", true) == "ext.app.odd%20name%3Dx");
  CHECK(det::encode_field("why=[demo]", false) == "why=%5Bdemo%5D");
  CHECK(det::encode_field("\xC3\xA9", true) == "%C3%A9");
  CHECK(det::encode_field("\n" + std::string(186, 'x') + "\ny", false) ==
        "%0A" + std::string(186, 'x') + "~");
  CHECK(det::encode_field(std::string(64, 'b') + "c", true) == std::string(63, 'b') + "~");
  CHECK(det::encode_field(std::string(63, 'a') + "\xC3\xA9", true) == std::string(63, 'a') + "~");
  CHECK(det::encode_field(std::string(64, 'm'), true) == std::string(64, 'm'));
  CHECK(det::encode_field(std::string("ab\0cd", 5), false) == "ab");
  CHECK(!det::first_difference("a\nb\n", "a\nc\n").empty());
}

TEST_CASE("the trace checks catch a record written twice, a lost record, a bad drop range, a half line, a hole and a misplaced anchor (negative controls)") {
  const std::string anchor =
      "[mono_ns=100][T0x2][TIMING] clock_anchor: [CLOCK_ANCHOR] v=1 pid=1 mono_ns=100 wall_ns=5\n";
  const auto span = [](uint64_t seq, uint64_t ts) {
    return "[STRACE] v=1 pid=1 tid=2 inv=0 hid=0 depth=0 name=fault.t0 ts=" + std::to_string(ts) +
           " dur=1 seq=" + std::to_string(seq) + "\n";
  };
  const auto drop = [](uint64_t first, uint64_t last, uint64_t n) {
    return "[SPANRING_DROPS] v=1 pid=1 tid=2 dropped=" + std::to_string(n) + " first_seq=" +
           std::to_string(first) + " last_seq=" + std::to_string(last) + " reason=ring_full\n";
  };
  const EmittedThread thread{"fault.t0", 2, 4, 3};  // emitted 4: seq 1 dropped, 3 stored
  const auto problems = [&](const std::string& text, uint64_t stored) {
    std::vector<std::string> found;
    CaptureProblems capture(found);
    const spanring_test::ParsedText parsed = parse_and_check_form(text, {}, "control");
    check_anchors(parsed, {}, "control");
    const auto owners = lines_by_owner(parsed);
    const auto it = owners.find({1, 2});
    if (it != owners.end()) check_thread_accounting(it->second, thread, 1, stored, "control");
    return found;
  };
  const std::string good = anchor + span(0, 200) + drop(1, 1, 1) + span(2, 300) + span(3, 400);
  const auto none = problems(good, 3);
  CHECK_MESSAGE(none.empty(), "the good text has problems: ", none.empty() ? "" : none[0]);
  CHECK(!problems(anchor + span(0, 200) + drop(1, 1, 1) + span(2, 300) + span(2, 300) + span(3, 400), 3).empty());
  CHECK(!problems(anchor + span(0, 200) + drop(1, 1, 1) + span(3, 400), 3).empty());  // 2 lost
  CHECK(!problems(anchor + span(0, 200) + drop(1, 2, 1) + span(3, 400), 2).empty());  // bad range
  CHECK(!problems(anchor + span(0, 200) + drop(1, 1, 1) + span(3, 400) + span(2, 300), 3).empty());
  CHECK(!problems(good, 4).empty());                                 // a stored record missing
  CHECK(!problems(good.substr(0, good.size() - 1), 3).empty());      // half line at the end
  CHECK(!problems(anchor + span(0, 200) + std::string(64, '\0') + drop(1, 1, 1) + span(2, 300) +
                      span(3, 400), 3).empty());                     // a hole
  CHECK(!problems(span(0, 200) + anchor + drop(1, 1, 1) + span(2, 300) + span(3, 400), 3).empty());
  CHECK(!problems(anchor + good, 3).empty());                        // two anchors
  CHECK(!problems(anchor + span(0, 50) + drop(1, 1, 1) + span(2, 300) + span(3, 400), 3).empty());
}

TEST_CASE("through a pipe read 4 KiB at a time by a slow reader the trace equals a plain synchronous writer's byte for byte") {
  become_subreaper();
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_DET_EMITTER");
  TempDir tmp;
  const std::string json = tmp.file("det.json");
  const std::string err = tmp.file("run.err");
  int pipe_fds[2];
  REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  SpawnOptions run{{spanring, "run", "--rings", "4", "--ring-records", kDetRingSlots, "-o",
                    "/dev/stdout", "--", emitter, "--out", json, "--count",
                    std::to_string(kDetRecords)},
                   {}, "", err};
  run.stdout_fd = pipe_fds[1];
  const pid_t pid = spawn(run);
  ChildGuard guard(pid);
  ::close(pipe_fds[1]);

  // The slow reader: 4 KiB per read, 2 ms between reads (~2 MB/s, far below what the drainer
  // produces, so its writes into the pipe block and come back short).
  std::string got;
  size_t reads = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool eof = false;
  while (!eof && std::chrono::steady_clock::now() < deadline) {
    struct pollfd p = {pipe_fds[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    REQUIRE_MESSAGE(n >= 0, "read from the pipe: ", std::string(std::strerror(errno)));
    if (n == 0) {
      eof = true;
      break;
    }
    got.append(buf, static_cast<size_t>(n));
    ++reads;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ::close(pipe_fds[0]);
  REQUIRE_MESSAGE(eof, "the pipe did not reach EOF in time (", got.size(), " bytes read)");
  const Exit e = wait_exit(pid, kWaitS);
  guard.release();
  INFO("spanring run stderr:\n", slurp(err));
  REQUIRE_MESSAGE(e.exited_ok(), "spanring run: ", e.describe());
  MESSAGE("read ", got.size(), " bytes in ", reads, " reads");

  const det::DetRun d = det::load_run(json);
  REQUIRE(d.count == kDetRecords);
  const std::string want = det::expected_for(d, got, tmp, "pipe");
  CHECK_MESSAGE(got == want, "pipe output differs from the plain writer's: ",
                det::first_difference(got, want));
  CHECK_MESSAGE(reads > got.size() / 4096, "the reader did not read in 4 KiB pieces");
}

TEST_CASE("into a file the trace of the fixed workload equals a plain synchronous writer's byte for byte") {
  const std::string emitter = spanring_test::exe_from_env("FAULT_DET_EMITTER");
  TempDir tmp;
  const std::string json = tmp.file("det.json");
  const spanring_test::TracedRun r = spanring_test::run_traced(
      tmp.file("out.strace"), {"--rings", "4", "--ring-records", kDetRingSlots},
      {emitter, "--out", json, "--count", std::to_string(kDetRecords)}, 40);
  INFO("spanring run: ", r.run.describe());
  const det::DetRun d = det::load_run(json);
  const std::string got = slurp(r.out);
  const std::string want = det::expected_for(d, got, tmp, "file");
  CHECK_MESSAGE(got == want, "file output differs from the plain writer's: ",
                det::first_difference(got, want));
  // The summary agrees: the invalid records are the only drops.
  const uint64_t invalid = 2 * (kDetRecords / det::kKinds);  // kinds 10 and 11
  CHECK(r.summary.written == kDetRecords - invalid);
  CHECK(r.summary.dropped == invalid);
}

TEST_CASE("spans that end in reverse order of their starts before the process attached still get an anchor at or before every span") {
  // Two ways to get there: explicit emits of a parent after its child with start times before
  // the attach, and a forked child whose inherited open spans end one after the other (its
  // anchor is taken at the fork, after both began). [STRACE] consumers convert a span's ts to
  // wall time only when it is >= the pid's anchor mono_ns.
  const std::string emitter = spanring_test::exe_from_env("FAULT_DET_EMITTER");
  for (const char* mode : {"--nested", "--fork-nested"}) {
    CAPTURE(mode);
    TempDir tmp;
    const spanring_test::TracedRun r = spanring_test::run_traced(
        tmp.file("out.strace"), {}, {emitter, "--out", tmp.file("det.json"), mode, "1"}, 40);
    INFO("spanring run: ", r.run.describe());
    const std::string text = slurp(r.out);
    INFO("trace:\n", text);
    const spanring_test::ParsedText parsed = parse_and_check_form(text, {}, mode);
    check_anchors(parsed, {}, mode);
    size_t spans = 0;
    for (const auto& l : parsed.lines) spans += l.kind == spanring_test::LineKind::kSpan ? 1 : 0;
    CHECK(spans == (std::string(mode) == "--nested" ? 3u : 4u));
  }
}

TEST_CASE("many 1 MiB writes in flight to one file leave no hole and no overlap") {
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  const std::string json = tmp.file("emitted.json");
  // Four threads flat out into rings that hold all they emit (60000 two-slot records each):
  // the drainer fills 1 MiB buffers back to back, ~45 MB in all, and keeps up to 8 writes in
  // flight. Nothing can be dropped, so every record must be in the file exactly once.
  const spanring_test::TracedRun r = spanring_test::run_traced(
      tmp.file("out.strace"), {"--rings", "8", "--ring-records", "131072"},
      {emitter, "--threads", "4", "--count", "60000", "--out", json}, 50);
  INFO("spanring run: ", r.run.describe());
  const std::string text = slurp(r.out);
  MESSAGE("trace of ", text.size(), " bytes");
  // More than the writer's queue depth of whole buffers, so writes overlapped in flight.
  REQUIRE_MESSAGE(text.size() > (16u << 20), "only ", text.size(),
                  " bytes: too few 1 MiB buffers to have many writes in flight");
  const spanring_test::ParsedText parsed = parse_and_check_form(text, {}, "large trace");
  check_anchors(parsed, {}, "large trace");
  const Emitted emitted = load_emitted(json);
  const auto owners = lines_by_owner(parsed);
  uint64_t written = 0;
  for (const EmittedThread& t : emitted.threads) {
    const auto it = owners.find({emitted.pid, t.tid});
    REQUIRE_MESSAGE(it != owners.end(), "no line from ", t.name);
    const Accounting a = check_thread_accounting(it->second, t, emitted.pid, t.stored, "large trace");
    CHECK_MESSAGE(a.dropped == 0, t.name, ": ", a.dropped, " records dropped from a ring that holds them all");
    written += a.written;
  }
  CHECK(r.summary.written == written);
}

}  // TEST_SUITE
