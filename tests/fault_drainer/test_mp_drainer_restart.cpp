// A drainer killed in the middle of a run (kill -9 at a random moment, or SIGKILL at one of its
// test points between writing a buffer and committing it) and restarted with
// `spanring drain --segment NAME -o SAME_FILE` while the producer keeps running: the restarted
// drainer resumes at the last commit, so every record the producer emitted is in the file exactly
// once (or reported dropped, once), no half line is left at the seam, every pid has one anchor,
// and the counts reconcile with what the producer says it emitted.
//
// Each scenario is its own TEST_CASE, run as its own meson test (tests/fault_drainer/meson.build
// selects it with --test-case), so they run in parallel and a skip (77) concerns one only.
#include "fault_util.h"

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace fault_test;

namespace {

constexpr double kWaitS = 20;
// The producer emits until the test stops it (--until-stop), so that the drainer dies and is
// restarted while it runs however slow the machine: the test stops it once the second drainer
// runs and every thread has emitted kEmitsAfterRestart more records. kEmitSeconds only caps a
// producer whose test died.
constexpr const char* kEmitSeconds = "120";
constexpr uint64_t kEmitsAfterRestart = 2000;
// Paced (2 records every ~50 us per thread) so the file stays a few MB; whether a ring overflows
// while no drainer runs depends on timing, and drops must then be reported exactly.
constexpr const char* kPaceUs = "50";
constexpr const char* kPaceEvery = "2";

uint64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// The segment's commit record as the first drainer left it.
struct CommitState {
  uint64_t commit_offset = 0;
  uint64_t journal_seq = 0;
  uint64_t journal_end = 0;
  uint32_t drainer_pid = 0;
};

CommitState commit_state(const std::string& segment) {
  ShmView v;
  REQUIRE_MESSAGE(v.open(segment, false), "cannot map segment ", segment, ": ",
                  std::string(std::strerror(errno)));
  REQUIRE(v.size() >= sizeof(spanring::SegmentHeader));
  const spanring::SegmentHeader& h = v.header();
  CommitState c;
  c.commit_offset = h.commit_offset.load(std::memory_order_acquire);
  c.journal_seq = h.journal_seq.load(std::memory_order_acquire);
  c.journal_end = h.journal_end;
  c.drainer_pid = h.drainer_pid.load(std::memory_order_acquire);
  return c;
}

// `spanring: resuming PATH after its last commit at byte N`: N, or nullopt.
std::optional<uint64_t> resumed_at(const std::string& err) {
  const auto lines = lines_starting(err, "spanring: resuming ");
  if (lines.size() != 1) return std::nullopt;
  const size_t at = lines[0].rfind(" at byte ");
  if (at == std::string::npos) return std::nullopt;
  return std::strtoull(lines[0].c_str() + at + 9, nullptr, 10);
}

// How the drainers of a scenario write their file.
enum class Writer { kUring, kWriteFallback };

// Runs the scenario: `point` empty = kill -9 at a random moment, else the test point to arm
// (SPANRING_TEST_POINT_HIT=3) in the first drainer's environment. kWriteFallback runs both
// drainers under no_uring_exec (io_uring_setup fails), so they write with write(2): the
// restart must be as exact as with io_uring.
void kill_and_restart(const std::string& point, Writer writer = Writer::kUring) {
  if (!point.empty()) spanring_test::skip_without_test_points();
  std::vector<std::string> wrap;  // prefix of both drainers' command lines
  if (writer == Writer::kWriteFallback) {
    wrap = {spanring_test::exe_from_env("NO_URING_EXEC")};
    const Exit probe = wait_exit(spawn({{wrap[0], "/bin/true"}, {}, "", ""}), kWaitS);
    if (probe.code == 77) {
      std::fprintf(stderr, "SKIP: no seccomp here, io_uring cannot be blocked\n");
      std::exit(77);
    }
  }
  become_subreaper();
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  const std::string out = tmp.file("out.strace");
  const std::string json = tmp.file("emitted.json");
  const std::string err1 = tmp.file("run.err");
  const std::string err2 = tmp.file("drain.err");
  ReportMap rep(tmp.file("report.bin"));

  SpawnOptions run;
  run.argv = wrap;
  for (const std::string& a :
       {spanring, std::string("run"), std::string("-o"), out, std::string("--"), emitter,
        std::string("--threads"), std::string("2"), std::string("--report"), rep.path(),
        std::string("--out"), json, std::string("--until-stop"), std::string("1"),
        std::string("--seconds"), std::string(kEmitSeconds),
        std::string("--pace-us"), std::string(kPaceUs), std::string("--pace-every"),
        std::string(kPaceEvery)})
    run.argv.push_back(a);
  run.stderr_path = err1;
  if (!point.empty()) run.env = {{"SPANRING_TEST_POINT", point}, {"SPANRING_TEST_POINT_HIT", "3"}};
  BackgroundDrainer first_drainer(run, kWaitS);
  const pid_t run_pid = first_drainer.pid();
  INFO("first drainer (spanring run) stderr:\n", slurp(err1));
  const std::string& segment = first_drainer.segment();
  SegmentGuard segment_guard(segment);
  REQUIRE_MESSAGE(wait_until([&] { return rep.ready() && rep->phase.load() >= fault::kPhaseEmitting; },
                             kWaitS),
                  "the emitter never started");
  const pid_t emitter_pid = static_cast<pid_t>(rep->pid.load());

  if (point.empty()) {
    const char* s = std::getenv("FAULT_SEED");
    const uint64_t seed = s != nullptr ? std::strtoull(s, nullptr, 10)
                                       : static_cast<uint64_t>(std::random_device{}());
    std::mt19937_64 rng(seed);
    const int delay_ms = 100 + static_cast<int>(rng() % 900);
    MESSAGE("random kill after ", delay_ms, " ms (FAULT_SEED=", seed, " reproduces it)");
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    REQUIRE(::kill(run_pid, SIGKILL) == 0);
  }
  const Exit first = wait_exit(run_pid, kWaitS);
  first_drainer.release();
  REQUIRE_MESSAGE(first.sig == SIGKILL, "the first drainer should have died by SIGKILL",
                  point.empty() ? "" : " at test point " + point, "; it ended with ",
                  first.describe());
  const uint32_t phase_at_kill = rep->phase.load();
  CHECK_MESSAGE(phase_at_kill < fault::kPhaseDone,
                "the producer had finished before the drainer died: the restart is not mid-run");

  // What the dead drainer left: a commit record, maybe a pending journal, maybe bytes past it.
  const CommitState dead = commit_state(segment);
  const uint64_t size_at_kill = file_size(out);
  const bool pending = dead.journal_seq % 2 == 1;
  const uint64_t committed = pending ? dead.journal_end : dead.commit_offset;
  MESSAGE((point.empty() ? std::string("random kill") : point), ": file ", size_at_kill,
          " bytes, commit_offset ", dead.commit_offset, ", journal_seq ", dead.journal_seq,
          ", journal_end ", dead.journal_end);
  CHECK_MESSAGE(size_at_kill >= committed, "the file (", size_at_kill,
                " bytes) is shorter than the committed ", committed);
  if (point == "drainer_journal_pending" || point == "drainer_journal_half_applied") {
    CHECK_MESSAGE(pending, point, ": the journal should be pending (odd journal_seq)");
  } else if (!point.empty()) {
    CHECK_MESSAGE(!pending, point, ": no journal should be pending");
  }
  if (point == "drainer_written_not_committed" || point == "writer_written_not_returned") {
    CHECK_MESSAGE(size_at_kill > committed, point, ": the file should hold written but "
                  "uncommitted bytes past the commit (", size_at_kill, " vs ", committed, ")");
  }

  // Restart on the same segment and file while the producer runs.
  std::vector<std::string> drain_argv = wrap;
  for (const std::string& a : {spanring, std::string("drain"), std::string("--segment"), segment,
                               std::string("-o"), out})
    drain_argv.push_back(a);
  const pid_t drain_pid = spawn({drain_argv, {}, "", err2});
  ChildGuard drain_guard(drain_pid);
  INFO("second drainer (spanring drain) stderr:\n", slurp(err2));
  // The producer emits on into the second drainer, then is told to stop.
  REQUIRE_MESSAGE(wait_until([&] { return catches_signal(drain_pid, SIGTERM); }, kWaitS),
                  "spanring drain never installed its SIGTERM handler");
  {
    const uint32_t threads = rep->threads.load(std::memory_order_relaxed);
    std::vector<uint64_t> want;
    for (uint32_t i = 0; i < threads; ++i)
      want.push_back(rep->t[i].emitted.load(std::memory_order_relaxed) + kEmitsAfterRestart);
    CHECK_MESSAGE(wait_until([&] {
      for (uint32_t i = 0; i < threads; ++i)
        if (rep->t[i].emitted.load(std::memory_order_relaxed) < want[i]) return false;
      return true;
    }, kWaitS), "the producer did not emit on after the restart");
  }
  rep->stop.store(1, std::memory_order_relaxed);
  // The producer was re-parented to us (subreaper) when spanring run died.
  const Exit producer = wait_exit(emitter_pid, kWaitS);
  CHECK_MESSAGE(producer.exited_ok(), "the producer: ", producer.describe());
  REQUIRE(::kill(drain_pid, SIGTERM) == 0);
  const Exit second = wait_exit(drain_pid, kWaitS);
  drain_guard.release();
  const std::string err_text = slurp(err2);
  INFO("second drainer stderr (final):\n", err_text);
  REQUIRE_MESSAGE(second.exited_ok(), "spanring drain: ", second.describe());
  if (writer == Writer::kWriteFallback) {
    // Each drainer said once, in one line, that it writes with write(2) because of io_uring.
    for (const std::string& e : {slurp(err1), err_text}) {
      const auto said = lines_starting(e, "spanring: io_uring is unavailable (");
      CHECK_MESSAGE(said.size() == 1, said.size(), " fallback lines in:\n", e);
      CHECK(e.find("writing with write(2) instead") != std::string::npos);
    }
  }

  // The seam: the second drainer kept exactly the committed bytes.
  const std::string text = slurp(out);
  const std::optional<uint64_t> kept = resumed_at(err_text);
  if (committed > 0) {
    REQUIRE_MESSAGE(kept.has_value(), "no 'spanring: resuming ... at byte N' line although ",
                    committed, " bytes were committed");
    CHECK_MESSAGE(*kept == committed, "resumed at byte ", *kept, ", the segment's commit was ",
                  committed);
  }
  if (!point.empty()) {
    // HIT=3: at least two buffers were committed before the point fired.
    CHECK_MESSAGE(committed > 0, point, ": nothing was committed before the kill");
  }
  const uint64_t seam = kept.value_or(0);
  REQUIRE(seam <= text.size());
  CHECK_MESSAGE((seam == 0 || text[seam - 1] == '\n'), "the commit at byte ", seam,
                " is not at a line boundary");

  // Exactly once, line by line.
  const spanring_test::ParsedText parsed = parse_and_check_form(text, {}, "restarted trace");
  check_anchors(parsed, {}, "restarted trace");
  const Emitted emitted = load_emitted(json);
  REQUIRE(emitted.threads.size() == 2);
  const auto owners = lines_by_owner(parsed);
  uint64_t total_written = 0;
  for (const EmittedThread& t : emitted.threads) {
    const auto it = owners.find({emitted.pid, t.tid});
    REQUIRE_MESSAGE(it != owners.end(), "no line at all from ", t.name, " tid ", t.tid);
    const Accounting a = check_thread_accounting(it->second, t, emitted.pid, t.stored, "restart");
    total_written += a.written;
    for (const auto& [reason, n] : a.dropped_by_reason)
      CHECK_MESSAGE(reason == "ring_full", n, " records dropped with reason ", reason);
  }
  // Only the producer's pid wrote (no stray owner), and the second drainer's summary covers
  // exactly what it wrote after the seam.
  for (const auto& [owner, lines] : owners) {
    CHECK_MESSAGE(owner.first == emitted.pid, "lines of pid ", owner.first, " tid ",
                  owner.second, " in the trace");
  }
  const spanring_test::ParsedText after = spanring_test::parse_text(text.substr(seam));
  uint64_t spans_after = 0;
  uint64_t dropped_after = 0;
  for (const auto& l : after.lines) {
    if (l.kind == spanring_test::LineKind::kSpan) ++spans_after;
    if (l.kind == spanring_test::LineKind::kDrops) dropped_after += l.drops.dropped;
  }
  const auto written = summary_value(err_text, "written");
  const auto dropped = summary_value(err_text, "dropped");
  REQUIRE_MESSAGE((written && dropped), "no summary line from spanring drain");
  CHECK_MESSAGE(*written == spans_after, "spanring drain says written=", *written,
                ", the file holds ", spans_after, " [STRACE] lines after the seam");
  CHECK_MESSAGE(*dropped == dropped_after, "spanring drain says dropped=", *dropped,
                ", its drop lines add up to ", dropped_after);
  CHECK(total_written <= emitted.threads[0].emitted + emitted.threads[1].emitted);
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("a drainer killed at a random moment and restarted on the same segment and file loses nothing and writes nothing twice") {
  kill_and_restart("");
}

TEST_CASE("a drainer killed at drainer_written_not_committed and restarted loses nothing and writes nothing twice") {
  kill_and_restart("drainer_written_not_committed");
}

TEST_CASE("a drainer killed at drainer_journal_pending and restarted loses nothing and writes nothing twice") {
  kill_and_restart("drainer_journal_pending");
}

TEST_CASE("a drainer killed at drainer_journal_half_applied and restarted loses nothing and writes nothing twice") {
  kill_and_restart("drainer_journal_half_applied");
}

TEST_CASE("a drainer killed at drainer_committed and restarted loses nothing and writes nothing twice") {
  kill_and_restart("drainer_committed");
}

TEST_CASE("a drainer killed at writer_written_not_returned and restarted loses nothing and writes nothing twice") {
  kill_and_restart("writer_written_not_returned");
}

TEST_CASE("under the write(2) fallback at drainer_journal_pending a drainer killed and restarted loses nothing and writes nothing twice") {
  kill_and_restart("drainer_journal_pending", Writer::kWriteFallback);
}

TEST_CASE("under the write(2) fallback at writer_written_not_returned a drainer killed and restarted loses nothing and writes nothing twice") {
  kill_and_restart("writer_written_not_returned", Writer::kWriteFallback);
}

}  // TEST_SUITE
