// `spanring stat --segment NAME [--json]` (cli/stat.cpp) against real processes: a live
// `spanring run` of fault_emitter (creator and drainer alive, one ring per emitting thread with
// its owner's pid, tid and thread name), the same run with its drainer stopped (the rings fill
// up, then drop: fill and ring_full climb, and records = slots / 2 for these 2-slot records),
// the segment that run leaves behind once it is killed (everyone dead, rings released); a
// missing name, another program's object, another layout and an unfinished creation (exit 2,
// a clear message); and a segment whose rings are overwritten with random bytes, over and over,
// which stat reports on without ever crashing.
#include "fault_util.h"

#include <spanring/segment.h>

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace fault_test;
using nlohmann::json;

namespace {

constexpr double kWaitS = 20;

spanring_test::RunResult stat_run(const std::string& spanring, const std::string& segment,
                                  bool as_json) {
  std::vector<std::string> argv = {spanring, "stat", "--segment", segment};
  if (as_json) argv.push_back("--json");
  return spanring_test::run_process(argv, 30);
}

// `spanring stat --json`, REQUIREd to exit 0 with one JSON object on stdout.
json stat_json(const std::string& spanring, const std::string& segment) {
  const spanring_test::RunResult r = stat_run(spanring, segment, true);
  REQUIRE_MESSAGE(r.exit_code == 0, "spanring stat --json: ", r.describe());
  json j;
  REQUIRE_NOTHROW(j = json::parse(r.out));
  REQUIRE(j.is_object());
  return j;
}

// The rings of `j` owned by `pid`.
std::vector<json> rings_of(const json& j, uint32_t pid) {
  std::vector<json> out;
  for (const json& r : j.at("rings"))
    if (r.at("pid").get<uint32_t>() == pid) out.push_back(r);
  return out;
}

}  // namespace

TEST_SUITE("mp") {

TEST_CASE("spanring stat shows a live run's creator, drainer and owner threads, their fill and drops, and what a killed run left behind") {
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  become_subreaper();  // the emitter outlives the run killed below: it is reaped here
  TempDir tmp;
  ReportMap report(tmp.file("report"));
  BackgroundDrainer run({{spanring, "run", "--ring-records", "64", "-o", tmp.file("out.strace"),
                          "--", emitter, "--threads", "3", "--report", report.path(),
                          "--until-stop", "1", "--pace-us", "300"},
                         {}, "", tmp.file("run.err")},
                        kWaitS);
  SegmentGuard segment_guard(run.segment());
  INFO("spanring run stderr:\n", slurp(tmp.file("run.err")));
  REQUIRE(wait_until([&] {
    return report.ready() && report->phase.load(std::memory_order_acquire) >= fault::kPhaseEmitting;
  }, kWaitS));
  const uint32_t emitter_pid = report->pid.load();
  const pid_t run_pid = run.pid();  // run.pid() is -1 once the test has reaped it
  std::set<uint32_t> tids;
  for (uint32_t i = 0; i < 3; ++i) tids.insert(report->t[i].tid.load());

  // Live: everyone alive, one active ring per emitting thread.
  json j = stat_json(spanring, run.segment());
  CHECK(j.at("segment") == run.segment());
  CHECK(j.at("ring_count") == 256);
  CHECK(j.at("ring_capacity") == 64);
  CHECK(j.at("slot_bytes") == 64);
  CHECK(j.at("layout_version") == spanring::kLayoutVersion);
  CHECK(j.at("creator").at("pid") == run_pid);
  CHECK(j.at("creator").at("alive") == true);
  CHECK(j.at("drainer").at("pid") == run_pid);
  CHECK(j.at("drainer").at("alive") == true);
  CHECK(j.at("header_damage") == "");
  CHECK(j.at("totals").at("rings_in_use") == 3);
  CHECK(j.at("totals").at("processes") == 1);
  CHECK(j.at("totals").at("rings_free") == 253);
  std::vector<json> mine = rings_of(j, emitter_pid);
  REQUIRE(mine.size() == 3);
  std::set<uint32_t> seen_tids;
  for (const json& r : mine) {
    seen_tids.insert(r.at("tid").get<uint32_t>());
    CHECK(r.at("state") == "active");
    CHECK(r.at("alive") == true);
    CHECK(r.at("thread_name") == "fault_emitter");
    CHECK(r.at("problem") == "");
    CHECK(r.at("fill_records").is_number());
    CHECK(r.at("fill_slots").get<uint64_t>() <= 64);
  }
  CHECK(seen_tids == tids);

  // The drainer stopped: the rings fill up (every record here takes 2 slots) and then drop. A
  // drop counted after every drainer thread is stopped proves its ring full: the count before
  // (a drainer that fell behind on a loaded machine drops too) is the baseline.
  REQUIRE(::kill(run_pid, SIGSTOP) == 0);
  REQUIRE_MESSAGE(wait_until([&] { return drainer_stopped(run_pid); }, kWaitS),
                  "spanring run did not stop on SIGSTOP");
  std::map<uint32_t, uint64_t> ring_full_at_stop;  // tid -> ring_full
  for (const json& r : rings_of(stat_json(spanring, run.segment()), emitter_pid))
    ring_full_at_stop[r.at("tid").get<uint32_t>()] = r.at("drops").at("ring_full").get<uint64_t>();
  const bool full = wait_until([&] {
    const json s = stat_json(spanring, run.segment());
    for (const json& r : rings_of(s, emitter_pid))
      if (r.at("drops").at("ring_full").get<uint64_t>() <=
          ring_full_at_stop[r.at("tid").get<uint32_t>()])
        return false;
    return true;
  }, kWaitS, 50);
  CHECK_MESSAGE(full, "the rings never dropped while the drainer was stopped");
  j = stat_json(spanring, run.segment());
  uint64_t ring_full = 0;
  for (const json& r : rings_of(j, emitter_pid)) {
    const uint64_t slots = r.at("fill_slots").get<uint64_t>();
    // A ring that dropped with its drainer stopped is full: 32 records of 2 slots.
    CHECK(slots == 64);
    CHECK(r.at("fill_records").get<uint64_t>() * 2 == slots);
    CHECK(r.at("fill_percent").get<double>() == doctest::Approx(100.0 * slots / 64));
    CHECK(r.at("head").get<uint64_t>() - r.at("tail").get<uint64_t>() == slots);
    ring_full += r.at("drops").at("ring_full").get<uint64_t>();
  }
  CHECK(j.at("drops").at("ring_full") == ring_full);
  CHECK(j.at("totals").at("fill_records").get<uint64_t>() * 2 ==
        j.at("totals").at("fill_slots").get<uint64_t>());

  // The text form says the same in words and one line per ring.
  const spanring_test::RunResult text = stat_run(spanring, run.segment(), false);
  REQUIRE_MESSAGE(text.exit_code == 0, text.describe());
  CHECK(text.out.find("segment " + run.segment() + ": 256 rings of 64 slots") != std::string::npos);
  CHECK(text.out.find("creator: pid " + std::to_string(run_pid) + " (alive)") !=
        std::string::npos);
  CHECK(text.out.find("drainer: pid " + std::to_string(run_pid) + " (alive)") !=
        std::string::npos);
  CHECK(text.out.find("rings: 3 in use by 1 process(es), 0 quarantined, 253 free") !=
        std::string::npos);
  for (const uint32_t tid : tids)
    CHECK_MESSAGE(text.out.find(" " + std::to_string(tid) + "  fault_emitter    yes ") !=
                      std::string::npos,
                  "no line for tid ", tid, " in:\n", text.out);

  // Left behind: the run killed, then the emitter told to finish (its threads release their
  // rings as they exit).
  REQUIRE(::kill(run_pid, SIGKILL) == 0);
  ::kill(run_pid, SIGCONT);
  const Exit killed = wait_exit(run_pid, kWaitS);
  run.release();
  CHECK(killed.sig == SIGKILL);
  report->stop.store(1, std::memory_order_relaxed);
  CHECK(wait_until([&] {
    reap_zombies();
    return ::kill(static_cast<pid_t>(emitter_pid), 0) != 0;
  }, kWaitS));
  j = stat_json(spanring, run.segment());
  CHECK(j.at("creator").at("alive") == false);
  CHECK(j.at("drainer").at("pid") == run_pid);
  CHECK(j.at("drainer").at("alive") == false);
  mine = rings_of(j, emitter_pid);
  REQUIRE(mine.size() == 3);
  for (const json& r : mine) {
    CHECK(r.at("state") == "released");
    CHECK(r.at("alive") == false);
  }
  const spanring_test::RunResult left = stat_run(spanring, run.segment(), false);
  CHECK(left.exit_code == 0);
  CHECK(left.out.find("creator: pid " + std::to_string(run_pid) + " (dead)") !=
        std::string::npos);
}

TEST_CASE("spanring stat refuses a missing segment, another program's object, another layout and an unfinished creation, exit 2 with the reason") {
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string base = "spanring-stattest-" + std::to_string(::getpid());

  const spanring_test::RunResult missing = stat_run(spanring, base + "-missing", false);
  CHECK(missing.exit_code == 2);
  CHECK(missing.out.empty());
  CHECK_MESSAGE(missing.err.find("cannot open shared-memory segment '" + base + "-missing'") !=
                    std::string::npos, missing.err);

  // Raw objects written by hand, as another program (or a killed creator) leaves them.
  const auto make = [](const std::string& name, const std::string& bytes) {
    const int fd = ::open(("/dev/shm/" + name).c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    ::close(fd);
  };
  SegmentGuard foreign_guard(base + "-foreign");
  make(base + "-foreign", std::string(4096, 'x'));
  const spanring_test::RunResult foreign = stat_run(spanring, base + "-foreign", true);
  CHECK(foreign.exit_code == 2);
  CHECK(foreign.out.empty());
  CHECK_MESSAGE(foreign.err.find("not a spanring segment") != std::string::npos, foreign.err);

  spanring::SegmentHeader h{};
  h.magic.store(spanring::kSegmentMagic);
  h.layout_version = spanring::kLayoutVersion - 1;
  std::string bytes(4096, '\0');
  std::memcpy(bytes.data(), &h, sizeof h);
  SegmentGuard old_guard(base + "-old");
  make(base + "-old", bytes);
  const spanring_test::RunResult old = stat_run(spanring, base + "-old", false);
  CHECK(old.exit_code == 2);
  CHECK_MESSAGE(old.err.find("layout version " + std::to_string(spanring::kLayoutVersion - 1)) !=
                    std::string::npos, old.err);

  // A creation that never finished: only the creator fields, naming this (live) process.
  spanring::SegmentHeader unfinished{};
  unfinished.creator_pid = static_cast<uint32_t>(::getpid());
  unfinished.creator_start_time = 1;  // not this process' start time: its creator is dead
  std::memcpy(bytes.data(), &unfinished, sizeof unfinished);
  // The name `spanring run` gives, with the creator's pid (drain/unfinished_segment.h).
  const std::string unfinished_name = "spanring-" + std::to_string(::getpid()) + "-5a7e57a7";
  SegmentGuard unfinished_guard(unfinished_name);
  make(unfinished_name, bytes);
  const spanring_test::RunResult half = stat_run(spanring, unfinished_name, false);
  CHECK(half.exit_code == 2);
  CHECK_MESSAGE(half.err.find("is not initialised: its creator pid " + std::to_string(::getpid()) +
                              " died while creating it") != std::string::npos,
                half.err);
}

TEST_CASE("spanring stat reports on a segment whose rings hold random bytes and never crashes") {
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string name = "spanring-stattest-" + std::to_string(::getpid()) + "-corrupt";
  SegmentGuard guard(name);
  spanring::Segment seg = spanring::Segment::create(name, spanring::SegmentOptions{8, 64});
  const spanring::SegmentView& view = seg.view();
  const uint32_t seed = std::random_device{}();
  INFO("seed ", seed);
  std::mt19937_64 rng(seed);
  // Counters near their limits and small ones, so both "head within a ring of tail" and not.
  const auto value = [&rng]() -> uint64_t {
    switch (rng() % 4) {
      case 0: return rng();
      case 1: return rng() % 128;
      case 2: return UINT64_MAX - rng() % 128;
      default: return 0;
    }
  };
  uint32_t with_problem = 0;
  for (int round = 0; round < 60; ++round) {
    for (uint32_t i = 0; i < view.ring_count(); ++i) {
      spanring::RingHeader& r = view.ring(i);
      auto* raw = reinterpret_cast<unsigned char*>(&r);
      for (size_t b = 0; b < sizeof r; ++b) raw[b] = static_cast<unsigned char>(rng());
      r.state.store(static_cast<uint32_t>(rng() % 7));  // the 5 states and unknown ones
      const uint64_t tail = value();
      r.tail.store(tail);
      r.head.store(rng() % 2 ? tail + rng() % 80 : value());
      auto* slots = reinterpret_cast<unsigned char*>(view.ring_slots(i));
      for (uint32_t b = 0; b < view.ring_capacity() * spanring::kSlotBytes; ++b)
        slots[b] = static_cast<unsigned char>(rng() % 3 == 0 ? rng() % 8 : rng());
    }
    for (const bool as_json : {true, false}) {
      const spanring_test::RunResult r = stat_run(spanring, name, as_json);
      REQUIRE_MESSAGE(r.exit_code == 0, "round ", round, ": ", r.describe());
      if (!as_json) continue;
      json j;
      REQUIRE_NOTHROW(j = json::parse(r.out));
      for (const json& ring : j.at("rings")) {
        if (ring.at("problem") != "") ++with_problem;
        if (ring.at("fill_slots").get<uint64_t>() > 64) FAIL("fill past capacity: ", ring.dump());
      }
    }
  }
  CHECK(with_problem > 0);  // the corruption was seen, not only survived

  // A header whose geometry was rewritten: refused when stat opens it, with the reason.
  view.header().ring_count = 1u << 20;
  const spanring_test::RunResult r = stat_run(spanring, name, false);
  CHECK(r.exit_code == 2);
  CHECK(r.term_signal == 0);
  CHECK_MESSAGE(r.err.find("invalid ring table") != std::string::npos, r.err);
}

}  // TEST_SUITE
