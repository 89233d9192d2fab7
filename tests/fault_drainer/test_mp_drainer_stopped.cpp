// A drainer that stops (SIGSTOP) while its producers emit flat out into tiny rings: the producers
// never wait for it (they keep completing emits while it is stopped), their memory does not grow
// (a record that does not fit is dropped, never buffered), every drop is reported exactly
// (per thread, written + dropped == emitted, as seq ranges), and after SIGCONT the drainer
// catches up and exits normally.
#include "fault_util.h"

#include <doctest/doctest.h>

#include <signal.h>

#include <cstdint>
#include <string>
#include <vector>

using namespace fault_test;

namespace {

// Ring capacity in slots (`--ring-records`): a fault.t<i> record with seq=<n> takes 2 slots
// (more than the 12 inline payload bytes), so a ring holds 32 records.
constexpr uint64_t kRingSlots = 64;
// Emits per thread that must complete while the drainer is stopped: thousands of ring-fulls, so
// that a producer that waited for room, even briefly per record, could not get there in time.
constexpr uint64_t kEmitsWhileStopped = 1000000;
// RSS growth allowed while stopped: a producer that kept records it could not store would grow
// by tens of MB here (1e6 records); a few pages may come from the stacks or the allocator.
constexpr uint64_t kRssSlackPages = 64;
constexpr double kWaitS = 15;

struct Counts {
  std::vector<uint64_t> emitted;
  std::vector<uint64_t> stored;
};

Counts snapshot(const ReportMap& rep) {
  Counts c;
  const uint32_t n = rep->threads.load(std::memory_order_relaxed);
  for (uint32_t i = 0; i < n; ++i) {
    c.emitted.push_back(rep->t[i].emitted.load(std::memory_order_relaxed));
    c.stored.push_back(rep->t[i].stored.load(std::memory_order_relaxed));
  }
  return c;
}

bool every_thread_emitted(const ReportMap& rep, const std::vector<uint64_t>& at_least) {
  const Counts c = snapshot(rep);
  for (size_t i = 0; i < at_least.size(); ++i)
    if (i >= c.emitted.size() || c.emitted[i] < at_least[i]) return false;
  return true;
}

// Resident pages of the emitter as its monitor thread last read them, after a fresh sample.
uint64_t fresh_rss(const ReportMap& rep) {
  const uint64_t seen = rep->rss_samples.load(std::memory_order_acquire);
  REQUIRE_MESSAGE(wait_until([&] { return rep->rss_samples.load(std::memory_order_acquire) >= seen + 2; },
                             kWaitS),
                  "the emitter's RSS monitor stopped sampling");
  return rep->rss_pages.load(std::memory_order_relaxed);
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("the RSS check sees a producer that keeps what it cannot store (negative control)") {
  // The same measurement as below, on an untraced emitter that allocates 64 bytes per record:
  // it must exceed the slack, or the flat-RSS check could never fail.
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  ReportMap rep(tmp.file("report.bin"));
  const pid_t pid = spawn({{emitter, "--threads", "2", "--report", rep.path(), "--until-stop",
                            "1", "--rss", "1", "--leak", "64"},
                           {}, "", tmp.file("err.txt")});
  ChildGuard guard(pid);
  REQUIRE(wait_until([&] { return rep.ready() && rep->phase.load() >= fault::kPhaseEmitting; }, kWaitS));
  const uint64_t before = fresh_rss(rep);
  const Counts c0 = snapshot(rep);
  std::vector<uint64_t> want;
  for (uint64_t e : c0.emitted) want.push_back(e + kEmitsWhileStopped);
  REQUIRE(wait_until([&] { return every_thread_emitted(rep, want); }, kWaitS));
  const uint64_t after = fresh_rss(rep);
  CHECK_MESSAGE(after > before + kRssSlackPages, "a leaking emitter grew from ", before, " to ",
                after, " pages, not more than the ", kRssSlackPages, "-page slack");
  rep->stop.store(1);
  const Exit e = wait_exit(pid, kWaitS);
  CHECK_MESSAGE(e.exited_ok(), "leaking emitter: ", e.describe());
  guard.release();
}

TEST_CASE("producers keep emitting at full speed with flat memory while the drainer is stopped, and every drop is counted") {
  become_subreaper();
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  const std::string out = tmp.file("out.strace");
  const std::string json = tmp.file("emitted.json");
  const std::string err = tmp.file("spanring.err");
  ReportMap rep(tmp.file("report.bin"));
  const pid_t pid = spawn({{spanring, "run", "--ring-records", std::to_string(kRingSlots), "-o",
                            out, "--", emitter, "--threads", "2", "--report", rep.path(),
                            "--out", json, "--until-stop", "1", "--rss", "1"},
                           {}, "", err});
  ChildGuard guard(pid);
  INFO("spanring run stderr:\n", slurp(err));
  REQUIRE_MESSAGE(wait_until([&] { return rep.ready() && rep->phase.load() >= fault::kPhaseEmitting; },
                             kWaitS),
                  "the emitter never started emitting under spanring run");
  REQUIRE(rep->enabled.load() == 1);
  const uint32_t threads = rep->threads.load();
  REQUIRE(threads == 2);

  // Warm up: the drainer drains for a while (records are being written), then stop it.
  REQUIRE(wait_until([&] { return every_thread_emitted(rep, {20000, 20000}); }, kWaitS));
  const uint64_t rss_before = fresh_rss(rep);
  REQUIRE(::kill(pid, SIGSTOP) == 0);
  REQUIRE_MESSAGE(wait_until([&] { return drainer_stopped(pid); }, kWaitS),
                  "spanring run did not stop on SIGSTOP");
  const Counts c0 = snapshot(rep);

  // While it is stopped the producers keep completing emits: a million more per thread.
  std::vector<uint64_t> want;
  for (uint64_t e : c0.emitted) want.push_back(e + kEmitsWhileStopped);
  const bool progressed = wait_until([&] { return every_thread_emitted(rep, want); }, kWaitS);
  const bool still_stopped = drainer_stopped(pid);
  const Counts c1 = snapshot(rep);
  const uint64_t rss_stopped = fresh_rss(rep);
  CHECK_MESSAGE(progressed, "with the drainer stopped, the producers got from ",
                c0.emitted[0], "/", c0.emitted[1], " to only ", c1.emitted[0], "/",
                c1.emitted[1], " emits in ", kWaitS, " s: they wait for the drainer");
  CHECK_MESSAGE(still_stopped, "the drainer was not stopped for the whole measurement");
  for (uint32_t i = 0; i < threads; ++i) {
    // Nobody drains: at most the free part of one ring can have been stored.
    CHECK_MESSAGE(c1.stored[i] - c0.stored[i] <= kRingSlots, "thread ", i, " stored ",
                  c1.stored[i] - c0.stored[i], " records while the drainer was stopped, more "
                  "than its ring holds (", kRingSlots, " slots)");
  }
  CHECK_MESSAGE(rss_stopped <= rss_before + kRssSlackPages, "the producer's RSS grew from ",
                rss_before, " to ", rss_stopped, " pages while the drainer was stopped");

  // Resume: the drainer catches up, and records fit in the rings again.
  REQUIRE(::kill(pid, SIGCONT) == 0);
  const bool caught_up = wait_until(
      [&] {
        const Counts c = snapshot(rep);
        return c.stored[0] >= c1.stored[0] + 1000 && c.stored[1] >= c1.stored[1] + 1000;
      },
      kWaitS);
  CHECK_MESSAGE(caught_up, "after SIGCONT the rings never took 1000 more records per thread: "
                           "the drainer did not catch up");
  rep->stop.store(1);
  const Exit e = wait_exit(pid, 30);
  guard.release();
  const std::string err_text = slurp(err);
  INFO("spanring run stderr:\n", err_text);
  REQUIRE_MESSAGE(e.exited_ok(), "spanring run: ", e.describe());

  // The trace: every line parses, one anchor per pid, the summary matches the file, and per
  // thread the written seqs and the drop ranges are exactly 0..emitted-1.
  const std::string text = slurp(out);
  const spanring_test::ParsedText parsed = parse_and_check_form(text, {}, "trace");
  check_anchors(parsed, {}, "trace");
  const std::optional<spanring_test::Summary> summary = spanring_test::parse_summary(err_text);
  REQUIRE(summary.has_value());
  spanring_test::check_trace_invariants(spanring_test::load_trace(out), *summary, err_text, out);
  const Emitted emitted = load_emitted(json);
  REQUIRE(emitted.threads.size() == threads);
  const auto owners = lines_by_owner(parsed);
  uint64_t written = 0;
  uint64_t dropped = 0;
  for (const EmittedThread& t : emitted.threads) {
    const auto it = owners.find({emitted.pid, t.tid});
    REQUIRE_MESSAGE(it != owners.end(), "no line at all from ", t.name, " tid ", t.tid);
    const Accounting a = check_thread_accounting(it->second, t, emitted.pid, t.stored, "stopped drainer");
    written += a.written;
    dropped += a.dropped;
    // The stop made this thread drop at least what it emitted while stopped, minus one ring.
    CHECK_MESSAGE(a.dropped >= kEmitsWhileStopped - kRingSlots, t.name, ": only ", a.dropped,
                  " drops reported, but it emitted ", kEmitsWhileStopped,
                  " records into a full ring while the drainer was stopped");
    CHECK_MESSAGE(a.dropped_by_reason.size() == 1, t.name, ": drop reasons other than ring_full");
    CHECK(a.dropped_by_reason.count("ring_full") == 1);
  }
  CHECK(summary->written == written);
  CHECK(summary->dropped == dropped);
  CHECK(summary->unfinished == 0);
}

}  // TEST_SUITE
