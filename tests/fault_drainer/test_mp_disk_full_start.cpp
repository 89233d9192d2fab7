// A disk that is full when the drainer starts and gets room later: the trace goes to a 1 MiB
// tmpfs that a filler file has filled, so the drainer's first writes fail (ENOSPC); the test
// then deletes the filler and the producer emits on. What the failed writes announced (the
// process anchor, the threads, the binary file header) must be announced again in the writes
// that succeed, once each: the text file has one [CLOCK_ANCHOR] per pid before its first span,
// the binary file has its header and converts, and written + dropped + unwritten == emitted.
// The restart case kills the drainer (kill -9) after its failed writes and restarts it on the
// same segment once the disk has room: the unwritten count is journaled in the segment, so the
// final summary still accounts for every record emitted.
// Skipped (77) where mounting a tmpfs is not permitted.
#include "fault_util.h"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

using namespace fault_test;

namespace {

constexpr double kWaitS = 30;
// Records each thread emits once the disk has room again, before the test stops the producer:
// a few hundred KB of text at most, well within the 1 MiB.
constexpr uint64_t kEmitsAfterRoom = 400;
// Paced (one record per ms per thread): the drainer's first write comes while the producer
// runs, and what it emits stays far below the file system's size.
constexpr const char* kPaceUs = "1000";

// Fills the file system holding `path` with one file there, to its last byte (until ENOSPC).
void fill(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE_MESSAGE(fd >= 0, "cannot create the filler ", path, ": ", std::strerror(errno));
  std::vector<char> block(4096, 'x');
  uint64_t size = 0;
  for (size_t chunk = block.size(); chunk >= 1;) {
    const ssize_t n = ::write(fd, block.data(), chunk);
    if (n > 0) {
      size += static_cast<uint64_t>(n);
      continue;
    }
    REQUIRE_MESSAGE((n < 0 && errno == ENOSPC), "filler write: ", std::strerror(errno));
    chunk /= 2;  // the last partial block, byte by byte at the end
  }
  ::close(fd);
  MESSAGE("the filler holds ", size, " bytes");
}

uint64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// The `spanring: unwritten: N ...` line's N, 0 without one.
uint64_t unwritten_of(const std::string& err) {
  const auto l = lines_starting(err, "spanring: unwritten: ");
  REQUIRE_MESSAGE(l.size() <= 1, l.size(), " unwritten lines");
  return l.empty() ? 0 : std::strtoull(l[0].c_str() + 21, nullptr, 10);
}

// Waits until every emitting thread has emitted `more` records past where it is now.
void emit_more(ReportMap& rep, uint64_t more) {
  const uint32_t threads = rep->threads.load(std::memory_order_relaxed);
  std::vector<uint64_t> want;
  for (uint32_t i = 0; i < threads; ++i)
    want.push_back(rep->t[i].emitted.load(std::memory_order_relaxed) + more);
  CHECK_MESSAGE(wait_until([&] {
    for (uint32_t i = 0; i < threads; ++i)
      if (rep->t[i].emitted.load(std::memory_order_relaxed) < want[i]) return false;
    return true;
  }, kWaitS), "the producer did not emit on");
}

uint64_t emitted_total(const Emitted& e) {
  uint64_t n = 0;
  for (const EmittedThread& t : e.threads) n += t.emitted;
  return n;
}

// The text trace's spans and drop ranges, after the form and anchor checks.
struct TextCounts {
  uint64_t spans = 0;
  uint64_t dropped = 0;
};
TextCounts check_text(const std::string& text, const std::string& label) {
  const spanring_test::ParsedText parsed = parse_and_check_form(text, {}, label);
  check_anchors(parsed, {}, label);
  TextCounts c;
  for (const auto& l : parsed.lines) {
    if (l.kind == spanring_test::LineKind::kSpan) ++c.spans;
    if (l.kind == spanring_test::LineKind::kDrops) c.dropped += l.drops.dropped;
  }
  return c;
}

enum class Format { kText, kBinary };

void full_at_start(Format format) {
  become_subreaper();
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  const std::string mnt = tmp.file("full");
  TmpfsMount mount(mnt, "1m");
  const std::string filler = mnt + "/filler";
  fill(filler);
  const std::string out = mnt + (format == Format::kBinary ? "/out.bin" : "/out.strace");
  const std::string json = tmp.file("emitted.json");
  const std::string err = tmp.file("run.err");
  ReportMap rep(tmp.file("report.bin"));
  SpawnOptions run;
  run.argv = {spanring, "run", "--rings", "8", "--ring-records", "65536", "-o", out};
  if (format == Format::kBinary) run.argv.insert(run.argv.end(), {"--format", "binary"});
  run.argv.insert(run.argv.end(), {"--", emitter, "--threads", "2", "--report", rep.path(),
                                   "--out", json, "--until-stop", "1", "--seconds", "120",
                                   "--pace-us", kPaceUs, "--pace-every", "1"});
  run.stderr_path = err;
  BackgroundDrainer drainer(run, kWaitS);
  const pid_t pid = drainer.pid();
  INFO("spanring run stderr:\n", slurp(err));
  REQUIRE_MESSAGE(wait_until([&] { return rep.ready() && rep->phase.load() >= fault::kPhaseEmitting; },
                             kWaitS),
                  "the emitter never started");
  REQUIRE_MESSAGE(wait_until([&] { return slurp(err).find(std::strerror(ENOSPC)) != std::string::npos; },
                             kWaitS),
                  "no ENOSPC report although the disk was full");
  // Room again: the producer emits on, and what the drainer writes now must read alone.
  REQUIRE(::unlink(filler.c_str()) == 0);
  emit_more(rep, kEmitsAfterRoom);
  CHECK_MESSAGE(wait_until([&] { return file_size(out) > 0; }, kWaitS),
                "nothing was written once the disk had room");
  rep->stop.store(1, std::memory_order_relaxed);
  const Exit e = wait_exit(pid, kWaitS);
  drainer.release();
  const std::string err_text = slurp(err);
  INFO("spanring run stderr (final):\n", err_text);
  REQUIRE_MESSAGE((!e.timed_out && e.sig == 0), "spanring run: ", e.describe());

  const auto written = summary_value(err_text, "written");
  const auto dropped = summary_value(err_text, "dropped");
  REQUIRE((written && dropped));
  const uint64_t unwritten = unwritten_of(err_text);
  const uint64_t emitted = emitted_total(load_emitted(json));
  MESSAGE("emitted ", emitted, ": written ", *written, ", dropped ", *dropped, ", unwritten ",
          unwritten);
  CHECK_MESSAGE(unwritten > 0, "the first writes failed, yet nothing was counted unwritten");
  CHECK_MESSAGE(*written > 0, "nothing was written once the disk had room");
  CHECK_MESSAGE(*written + *dropped + unwritten == emitted, "written ", *written, " + dropped ",
                *dropped, " + unwritten ", unwritten, " != emitted ", emitted);

  std::string text;
  if (format == Format::kBinary) {
    // The file converts (it has its header, every process and thread it names announced).
    const std::string converted = tmp.file("converted.strace");
    const std::string cerr = tmp.file("convert.err");
    const Exit c = wait_exit(spawn({{spanring, "convert", out, "--to", "strace", "-o", converted},
                                    {}, "", cerr}),
                             kWaitS);
    INFO("spanring convert stderr:\n", slurp(cerr));
    REQUIRE_MESSAGE(c.exited_ok(), "spanring convert of the binary file: ", c.describe());
    text = slurp(converted);
  } else {
    text = slurp(out);
  }
  const TextCounts counts =
      check_text(text, format == Format::kBinary ? "binary, disk full at start" : "disk full at start");
  CHECK_MESSAGE(counts.spans == *written, "the file holds ", counts.spans,
                " spans, the summary says written=", *written);
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("a disk full at the start and freed later: the text file has one anchor per pid before its spans, and every record is accounted for") {
  full_at_start(Format::kText);
}

TEST_CASE("a disk full at the start and freed later: the binary file has its header, converts, and every record is accounted for") {
  full_at_start(Format::kBinary);
}

TEST_CASE("a drainer killed after failed writes and restarted once the disk has room: the unwritten count survives the restart") {
  become_subreaper();
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  const std::string mnt = tmp.file("full");
  TmpfsMount mount(mnt, "1m");
  const std::string filler = mnt + "/filler";
  fill(filler);
  const std::string out = mnt + "/out.strace";
  const std::string json = tmp.file("emitted.json");
  const std::string err1 = tmp.file("run.err");
  const std::string err2 = tmp.file("drain.err");
  ReportMap rep(tmp.file("report.bin"));
  SpawnOptions run;
  // Rings large enough to hold what the producer emits while no drainer runs (no ring_full
  // drop, whose line could be lost with a failed write).
  run.argv = {spanring, "run", "--rings", "8", "--ring-records", "65536", "-o", out, "--",
              emitter, "--threads", "2", "--report", rep.path(), "--out", json,
              "--until-stop", "1", "--seconds", "120", "--pace-us", kPaceUs, "--pace-every", "1"};
  run.stderr_path = err1;
  BackgroundDrainer first_drainer(run, kWaitS);
  const pid_t run_pid = first_drainer.pid();
  INFO("first drainer (spanring run) stderr:\n", slurp(err1));
  const std::string& segment = first_drainer.segment();
  SegmentGuard segment_guard(segment);
  REQUIRE_MESSAGE(wait_until([&] { return rep.ready() && rep->phase.load() >= fault::kPhaseEmitting; },
                             kWaitS),
                  "the emitter never started");
  const pid_t emitter_pid = static_cast<pid_t>(rep->pid.load());
  // Failed writes, and their count committed to the segment, then the kill.
  ShmView view;
  REQUIRE(view.open(segment, false));
  // The drainer writes the count from its process: read it with a load each time.
  auto unwritten_in_segment = [&] {
    return __atomic_load_n(&view.header().unwritten, __ATOMIC_RELAXED);
  };
  REQUIRE_MESSAGE(wait_until([&] { return unwritten_in_segment() != 0; }, kWaitS),
                  "the segment never counted an unwritten record although the disk was full");
  REQUIRE(::kill(run_pid, SIGKILL) == 0);
  const Exit first = wait_exit(run_pid, kWaitS);
  first_drainer.release();
  REQUIRE_MESSAGE(first.sig == SIGKILL, "the first drainer: ", first.describe());
  const uint64_t unwritten_at_kill = unwritten_in_segment();
  CHECK_MESSAGE(slurp(err1).find(std::strerror(ENOSPC)) != std::string::npos,
                "no ENOSPC report from the first drainer");

  // Room again, and a second drainer on the same segment and file.
  REQUIRE(::unlink(filler.c_str()) == 0);
  const pid_t drain_pid =
      spawn({{spanring, "drain", "--segment", segment, "-o", out}, {}, "", err2});
  ChildGuard drain_guard(drain_pid);
  INFO("second drainer (spanring drain) stderr:\n", slurp(err2));
  REQUIRE_MESSAGE(wait_until([&] { return catches_signal(drain_pid, SIGTERM); }, kWaitS),
                  "spanring drain never installed its SIGTERM handler");
  emit_more(rep, kEmitsAfterRoom);
  rep->stop.store(1, std::memory_order_relaxed);
  const Exit producer = wait_exit(emitter_pid, kWaitS);
  CHECK_MESSAGE(producer.exited_ok(), "the producer: ", producer.describe());
  REQUIRE(::kill(drain_pid, SIGTERM) == 0);
  const Exit second = wait_exit(drain_pid, kWaitS);
  drain_guard.release();
  const std::string err_text = slurp(err2);
  INFO("second drainer stderr (final):\n", err_text);
  REQUIRE_MESSAGE(second.exited_ok(), "spanring drain: ", second.describe());

  // The file: the first drainer's committed prefix (nothing: every write failed) and the
  // second's; the final summary's unwritten covers both drainers.
  const TextCounts counts = check_text(slurp(out), "restart after a full disk");
  const uint64_t unwritten = unwritten_of(err_text);
  const uint64_t emitted = emitted_total(load_emitted(json));
  MESSAGE("emitted ", emitted, ": spans in the file ", counts.spans, ", dropped ", counts.dropped,
          ", unwritten ", unwritten, " (", unwritten_at_kill, " at the kill)");
  CHECK_MESSAGE(unwritten >= unwritten_at_kill, "the restarted drainer's summary says unwritten ",
                unwritten, ", the first drainer had committed ", unwritten_at_kill);
  CHECK_MESSAGE(counts.spans + counts.dropped + unwritten == emitted, "written ", counts.spans,
                " + dropped ", counts.dropped, " + unwritten ", unwritten, " != emitted ", emitted);
}

}  // TEST_SUITE
