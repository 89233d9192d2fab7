// Garbage in shared memory: while `spanring run` drains a segment with four producer threads,
// fault_fuzzer maps the segment and writes garbage into ONE thread's ring (the victim, idle once
// its first 1000 records are committed) for one second. The drainer must not crash or hang,
// must say that it quarantined that ring (and no other), and must keep draining the healthy
// rings, whose records reconcile exactly with what their threads emitted. The victim's records
// committed before the attack stay in the file exactly once.
//
// One TEST_CASE per kind of garbage, each its own meson test (selected by the mode in
// parentheses), so that they run in parallel and each takes ~2 s, under ASan too.
#include "fault_util.h"

#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace fault_test;

namespace {

constexpr double kWaitS = 20;
constexpr uint32_t kThreads = 4;       // thread 0 is the victim
constexpr uint64_t kVictimRecords = 1000;
// Records each healthy thread must store after the attack: more than its ring holds (4096
// slots = 2048 two-slot records), so the drainer must have kept draining it.
constexpr uint64_t kAfterAttack = 5000;

enum class Expect { kQuarantine, kSurvive };

// `must_say`: a line the drainer must print on stderr during the attack (empty: none).
void corrupt_one_ring(const std::string& mode, Expect expect, const std::string& must_say = "") {
  become_subreaper();
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  const std::string fuzzer = spanring_test::exe_from_env("FAULT_FUZZER");
  TempDir tmp;
  const std::string out = tmp.file("out.strace");
  const std::string json = tmp.file("emitted.json");
  const std::string err = tmp.file("run.err");
  ReportMap rep(tmp.file("report.bin"));

  // 4,096-slot rings: a healthy thread's kAfterAttack records overrun its ring unless drained.
  BackgroundDrainer drainer({{spanring, "run", "--ring-records", "4096", "-o", out, "--",
                              emitter, "--threads",
                              std::to_string(kThreads), "--victim", std::to_string(kVictimRecords),
                              "--report", rep.path(), "--out", json, "--until-stop", "1",
                              "--pace-us", "100", "--pace-every", "4"},
                             {}, "", err},
                            kWaitS);
  const pid_t run_pid = drainer.pid();
  const std::string& segment = drainer.segment();
  INFO("spanring run stderr:\n", slurp(err));
  REQUIRE_MESSAGE(wait_until([&] { return rep.ready() && rep->phase.load() >= fault::kPhaseEmitting &&
                                          rep->victim_ready.load() == 1; },
                             kWaitS),
                  "the emitter's victim thread never got ready");
  const uint32_t pid = rep->pid.load();
  const uint32_t victim_tid = rep->t[0].tid.load();

  // The attack: one second of garbage, always the same for a mode (fixed seed).
  const std::string fuzz_out = tmp.file("fuzzer.out");
  const pid_t fuzz_pid = spawn({{fuzzer, "--segment", segment, "--pid", std::to_string(pid),
                                 "--tid", std::to_string(victim_tid), "--mode", mode,
                                 "--seconds", "1", "--seed", "20251129"},
                                {}, fuzz_out, tmp.file("fuzzer.err")});
  const Exit fz = wait_exit(fuzz_pid, kWaitS);
  INFO("fuzzer stdout:\n", slurp(fuzz_out), "fuzzer stderr:\n", slurp(tmp.file("fuzzer.err")));
  REQUIRE_MESSAGE(fz.exited_ok(), "fault_fuzzer: ", fz.describe());
  const auto said = lines_starting(slurp(fuzz_out), "fault_fuzzer: ring ");
  REQUIRE(said.size() == 1);
  const uint32_t ring = static_cast<uint32_t>(std::strtoul(said[0].c_str() + std::strlen("fault_fuzzer: ring "), nullptr, 10));

  // The drainer survived the attack and keeps draining the healthy rings.
  REQUIRE_MESSAGE(::waitpid(run_pid, nullptr, WNOHANG) == 0,
                  "spanring run is gone after the attack (crashed?)");
  std::vector<uint64_t> stored_at_end_of_attack;
  for (uint32_t i = 1; i < kThreads; ++i) stored_at_end_of_attack.push_back(rep->t[i].stored.load());
  const bool kept_draining = wait_until(
      [&] {
        for (uint32_t i = 1; i < kThreads; ++i)
          if (rep->t[i].stored.load() < stored_at_end_of_attack[i - 1] + kAfterAttack) return false;
        return true;
      },
      kWaitS);
  CHECK_MESSAGE(kept_draining, "after the attack the healthy rings did not take ", kAfterAttack,
                " more records each: the drainer stopped draining them");
  rep->stop.store(1);
  const Exit e = wait_exit(run_pid, 30);
  drainer.release();
  const std::string err_text = slurp(err);
  INFO("spanring run stderr (final):\n", err_text);
  REQUIRE_MESSAGE(!e.timed_out, "spanring run hung after the attack");
  REQUIRE_MESSAGE(e.sig == 0, "spanring run died by signal ", e.sig, " after the attack");
  CHECK_MESSAGE(e.code == 0, "spanring run: ", e.describe());

  if (!must_say.empty())
    CHECK_MESSAGE(err_text.find(must_say) != std::string::npos, "the drainer never said \"",
                  must_say, "\"");

  // The quarantine message names the ring, and only that ring.
  size_t ours = 0;
  size_t others = 0;
  for (const std::string& l : lines_starting(err_text, "spanring: ring ")) {
    if (l.find("quarantined") == std::string::npos) continue;
    if (l.rfind("spanring: ring " + std::to_string(ring) + " (", 0) == 0) ++ours;
    else ++others;
  }
  CHECK_MESSAGE(others == 0, others, " quarantine line(s) for rings the fuzzer did not touch");
  if (expect == Expect::kQuarantine) {
    CHECK_MESSAGE(ours == 1, ours, " quarantine line(s) for ring ", ring,
                  " (want exactly one, naming the ring)");
    CHECK_MESSAGE(err_text.find("spanring: ring " + std::to_string(ring) + " (pid " +
                                std::to_string(pid) + " tid " + std::to_string(victim_tid) +
                                ") quarantined: ") != std::string::npos,
                  "the quarantine line does not name the victim's pid and tid");
  } else {
    MESSAGE(mode, ": ", ours, " quarantine line(s) for the victim's ring");
  }

  // The file: every line parses; the producer's pid has one anchor before its spans.
  const std::string text = slurp(out);
  const spanring_test::ParsedText parsed =
      parse_and_check_form(text, {"[SPANRING_UNFINISHED] "}, "trace after corruption");
  check_anchors(parsed, {pid}, "trace after corruption");
  const Emitted emitted = load_emitted(json);
  REQUIRE(emitted.threads.size() == kThreads);
  const auto owners = lines_by_owner(parsed);
  for (uint32_t i = 1; i < kThreads; ++i) {
    const EmittedThread& t = emitted.threads[i];
    const auto it = owners.find({pid, t.tid});
    REQUIRE_MESSAGE(it != owners.end(), "no line at all from healthy ", t.name);
    check_thread_accounting(it->second, t, pid, t.stored, "healthy ring under attack");
  }
  if (expect == Expect::kQuarantine) {
    // The victim: its 1000 records were committed before the attack; nothing of the garbage
    // became a [STRACE] line. Drop lines for it (reason corrupt) must be consistent.
    EmittedThread victim = emitted.threads[0];
    REQUIRE(victim.emitted == kVictimRecords);
    const auto it = owners.find({pid, victim.tid});
    REQUIRE_MESSAGE(it != owners.end(), "no line at all from the victim");
    const Accounting a = check_thread_accounting(it->second, victim, pid, kVictimRecords, "victim");
    for (const auto& [reason, n] : a.dropped_by_reason)
      CHECK_MESSAGE(reason == "corrupt", "victim: ", n, " records dropped with reason ", reason);
    // Summary against the file.
    const std::optional<spanring_test::Summary> summary = spanring_test::parse_summary(err_text);
    REQUIRE(summary.has_value());
    spanring_test::check_trace_invariants(spanring_test::load_trace(out), *summary, err_text, out);
  }
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("a ring whose head is behind its tail (head_behind_tail) is quarantined while the healthy rings drain exactly") {
  corrupt_one_ring("head_behind_tail", Expect::kQuarantine);
}

TEST_CASE("a ring whose head is far ahead of its tail (head_far_ahead) is quarantined while the healthy rings drain exactly") {
  corrupt_one_ring("head_far_ahead", Expect::kQuarantine);
}

TEST_CASE("a record whose name length runs past its slots (record_length) gets its ring quarantined while the healthy rings drain exactly") {
  corrupt_one_ring("record_length", Expect::kQuarantine);
}

TEST_CASE("a record claiming zero slots (bad_slots) gets its ring quarantined while the healthy rings drain exactly") {
  corrupt_one_ring("bad_slots", Expect::kQuarantine);
}

TEST_CASE("a record claiming more slots than are published (slots_past_head) gets its ring quarantined while the healthy rings drain exactly") {
  corrupt_one_ring("slots_past_head", Expect::kQuarantine);
}

TEST_CASE("a record with unknown flags (bad_flags) gets its ring quarantined while the healthy rings drain exactly") {
  corrupt_one_ring("bad_flags", Expect::kQuarantine);
}

TEST_CASE("a record with an old sequence number (bad_seq) gets its ring quarantined while the healthy rings drain exactly") {
  corrupt_one_ring("bad_seq", Expect::kQuarantine);
}

TEST_CASE("a ring in an unknown state (bad_state) is quarantined while the healthy rings drain exactly") {
  corrupt_one_ring("bad_state", Expect::kQuarantine);
}

TEST_CASE("a record whose name starts with a NUL byte (nul_name) never becomes a line with an empty name") {
  corrupt_one_ring("nul_name", Expect::kSurvive);
}

TEST_CASE("a record with malformed packed attributes (bad_packed) gets its ring quarantined while the healthy rings drain exactly") {
  corrupt_one_ring("bad_packed", Expect::kQuarantine);
}

TEST_CASE("random bytes in a ring's records, head and state (random_records) get it quarantined while the healthy rings drain exactly") {
  corrupt_one_ring("random_records", Expect::kQuarantine);
}

TEST_CASE("random bytes anywhere in a ring's header (header_random) neither crash nor hang the drainer, and the healthy rings drain exactly") {
  corrupt_one_ring("header_random", Expect::kSurvive);
}

TEST_CASE("a record whose sequence number skips records its drop counter never counted (seq_gap_uncounted) gets its ring quarantined, not reported as a loss") {
  corrupt_one_ring("seq_gap_uncounted", Expect::kQuarantine);
}

TEST_CASE("a drop counter that would run past the last sequence number (drops_wrap) gets its ring quarantined and never a drop range that wraps") {
  corrupt_one_ring("drops_wrap", Expect::kQuarantine);
}

TEST_CASE("a drop counter above one record per nanosecond since boot (drops_implausible) gets its ring quarantined, its count never reported as a loss") {
  corrupt_one_ring("drops_implausible", Expect::kQuarantine,
                   "is more records than nanoseconds since boot: corrupt");
}

TEST_CASE("a segment header whose geometry is rewritten while the drainer runs (header_geometry) is reported, never followed, and only the attacked ring is quarantined") {
  // Every ring, slot and journal access of the drainer goes through the geometry it validated
  // at open: under ASan a single access computed from the rewritten offsets fails the test.
  corrupt_one_ring("header_geometry", Expect::kQuarantine, "spanring: segment header damaged: ");
}

}  // TEST_SUITE
