// Dead ring owners among many silent ones (owners_emitter.cpp): with ~200 rings held by owners
// that emit nothing, the drainer finds and frees exactly the rings whose owner is dead, and no
// other: threads that exited without releasing their ring (the raw exit syscall: their process
// lives on), a leader thread that exited the same way (a zombie while its process' other threads
// run), a whole process killed with SIGKILL, and a ring whose owner pid is alive but names
// another process (its start time differs: a reused pid). The rings of live owners stay
// active, and every record of every owner is in the trace. Owner liveness is checked once per
// process and cheaply per thread (drain/owner_watch.h); this checks that it still finds every
// kind of death. Not timed: the deadlines are only there so that a failure is not a hang.
#include "fault_util.h"

#include <spanring/segment.h>

#include "src/proc.h"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using namespace fault_test;

namespace {

constexpr double kWaitS = 20;

struct Owners {
  uint32_t pid = 0;
  bool leader_exited = false;
  std::set<uint32_t> tids;        // threads that stay
  std::set<uint32_t> raw_exited;  // threads that exited without releasing their ring
};

// Waits for owners_emitter's JSON line in `path` and parses it.
Owners owners_from(const std::string& path) {
  REQUIRE_MESSAGE(wait_until([&] { return slurp(path).find('\n') != std::string::npos; }, kWaitS),
                  "owners_emitter never said it was ready: ", slurp(path));
  const nlohmann::json j = nlohmann::json::parse(slurp(path));
  Owners o;
  o.pid = j.at("pid").get<uint32_t>();
  o.leader_exited = j.at("leader_exited").get<int>() != 0;
  for (const auto& t : j.at("tids")) o.tids.insert(t.get<uint32_t>());
  for (const auto& t : j.at("raw_exited")) o.raw_exited.insert(t.get<uint32_t>());
  return o;
}

struct RingOwner {
  uint32_t index;
  uint32_t state;
  uint32_t pid;
  uint32_t tid;
};

std::vector<RingOwner> ring_owners(const std::string& name) {
  ShmView v;
  REQUIRE(v.open(name, false));
  const spanring::SegmentView view = v.view();
  std::vector<RingOwner> out;
  for (uint32_t i = 0; i < view.ring_count(); ++i) {
    const spanring::RingHeader& r = view.ring(i);
    out.push_back({i, r.state.load(std::memory_order_acquire), r.owner_pid, r.owner_tid});
  }
  return out;
}

// The ring that names (pid, tid) as its owner, or null; REQUIREs there is at most one.
const RingOwner* find_owner(const std::vector<RingOwner>& rings, uint32_t pid, uint32_t tid) {
  const RingOwner* found = nullptr;
  for (const RingOwner& r : rings) {
    if (r.pid != pid || r.tid != tid) continue;
    REQUIRE_MESSAGE(found == nullptr, "two rings name owner ", pid, "/", tid);
    found = &r;
  }
  return found;
}

// The state of the ring owned by (pid, tid); REQUIREs there is exactly one.
uint32_t state_of(const std::vector<RingOwner>& rings, uint32_t pid, uint32_t tid) {
  const RingOwner* found = find_owner(rings, pid, tid);
  REQUIRE_MESSAGE(found != nullptr, "no ring names owner ", pid, "/", tid);
  return found->state;
}

// Whether the ring that dead owner (pid, tid) held is free: its state is kRingFree, or no ring
// names the owner any more. Claims take the lowest free ring, so a thread that starts after the
// drainer freed a dead owner's ring may claim it again and overwrite its owner fields; it was
// free first.
bool dead_owner_freed(const std::vector<RingOwner>& rings, uint32_t pid, uint32_t tid) {
  const RingOwner* found = find_owner(rings, pid, tid);
  return found == nullptr || found->state == spanring::kRingFree;
}

// Makes free ring `index` look claimed by (pid, tid) with `start_time`, as a producer's claim
// does: owner fields first, then kRingActive with release.
void hand_claim(ShmView& v, uint32_t index, uint32_t pid, uint32_t tid, uint64_t start_time) {
  spanring::RingHeader& r = v.ring(index);
  REQUIRE(r.state.load(std::memory_order_acquire) == spanring::kRingFree);
  r.owner_pid = pid;
  r.owner_tid = tid;
  r.generation += 1;
  r.owner_start_time = start_time;
  std::memcpy(r.thread_name, "hand", 5);
  // release: the owner fields above are visible to the drainer that acquires the state.
  r.state.store(spanring::kRingActive, std::memory_order_release);
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("among 200 silent ring owners the drainer frees exactly the rings of dead owners: exited threads, an exited leader, a killed process, a reused pid") {
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("OWNERS_EMITTER");
  become_subreaper();
  TempDir tmp;
  const std::string name = "spanring-faulttest-" + std::to_string(::getpid()) + "-owners";
  SegmentGuard guard(name);
  spanring::Segment::create(name, spanring::SegmentOptions{256, 64});
  const std::string out = tmp.file("out.strace");
  const pid_t drainer =
      spawn({{spanring, "drain", "--segment", name, "-o", out}, {}, "", tmp.file("drain.err")});
  ChildGuard drainer_guard(drainer);
  INFO("spanring drain stderr:\n", slurp(tmp.file("drain.err")));

  // B: 100 owners, and its leader thread exits without releasing its ring after its own
  // record; then A: 100 owners, 10 of which exit the same way. One after the other; when the
  // drainer frees B's leader's ring before A starts, one of A's threads may claim it again
  // (dead_owner_freed counts a ring that no longer names its dead owner as freed).
  const pid_t b = spawn({{emitter, "--threads", "100", "--leader-exit", "1"},
                         {{"SPANRING_SEGMENT", name}}, tmp.file("b.json"), tmp.file("b.err")});
  ChildGuard b_guard(b);
  const Owners ob = owners_from(tmp.file("b.json"));
  const pid_t a = spawn({{emitter, "--threads", "100", "--raw-exit", "10"},
                         {{"SPANRING_SEGMENT", name}}, tmp.file("a.json"), tmp.file("a.err")});
  ChildGuard a_guard(a);
  const Owners oa = owners_from(tmp.file("a.json"));
  REQUIRE(oa.pid == static_cast<uint32_t>(a));
  REQUIRE(ob.pid == static_cast<uint32_t>(b));
  REQUIRE(oa.tids.size() == 90);
  REQUIRE(oa.raw_exited.size() == 10);
  REQUIRE(ob.tids.size() == 100);

  // Two rings claimed by hand for this (live) process: one with its true start time (a live
  // owner: stays), one with another start time (the pid names another process: dead).
  const uint32_t me = static_cast<uint32_t>(::getpid());
  const uint32_t my_tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  const uint64_t my_start = spanring::process_start_time(me);
  REQUIRE(my_start != 0);
  uint32_t live_ring = UINT32_MAX;
  uint32_t reused_ring = UINT32_MAX;
  {
    ShmView v;
    REQUIRE(v.open(name, true));
    for (uint32_t i = v.view().ring_count(); i-- > 0 && reused_ring == UINT32_MAX;) {
      // Never claimed (generation 0): not a ring just freed for a dead owner the test checks.
      if (v.ring(i).state.load(std::memory_order_acquire) != spanring::kRingFree ||
          v.ring(i).generation != 0)
        continue;
      if (live_ring == UINT32_MAX) {
        live_ring = i;
        hand_claim(v, i, me, my_tid, my_start);
      } else {
        reused_ring = i;
        hand_claim(v, i, me, me, my_start + 1);
      }
    }
  }
  REQUIRE(reused_ring != UINT32_MAX);

  // The dead owners' rings are freed; the process-level and thread-level deaths both count.
  const auto freed = [&](uint32_t pid, const std::set<uint32_t>& tids) {
    const auto rings = ring_owners(name);
    for (const uint32_t t : tids)
      if (!dead_owner_freed(rings, pid, t)) return false;
    return true;
  };
  CHECK_MESSAGE(wait_until([&] { return freed(oa.pid, oa.raw_exited); }, kWaitS, 20),
                "the rings of threads that exited without releasing them were not freed");
  CHECK_MESSAGE(wait_until([&] { return freed(ob.pid, {ob.pid}); }, kWaitS, 20),
                "the ring of a leader thread that exited (a zombie) was not freed");
  CHECK_MESSAGE(wait_until([&] { return ring_owners(name)[reused_ring].state ==
                                        spanring::kRingFree; }, kWaitS, 20),
                "the ring of an owner whose pid now names another process was not freed");
  // ... and no live owner's ring.
  {
    const auto rings = ring_owners(name);
    for (const uint32_t t : oa.tids) CHECK(state_of(rings, oa.pid, t) == spanring::kRingActive);
    for (const uint32_t t : ob.tids) CHECK(state_of(rings, ob.pid, t) == spanring::kRingActive);
    CHECK(rings[live_ring].state == spanring::kRingActive);
  }

  // A whole process killed: every ring of A is freed, B's and the live hand-made one stay.
  ::kill(a, SIGKILL);
  const Exit ea = wait_exit(a, kWaitS);
  a_guard.release();
  CHECK(ea.sig == SIGKILL);
  CHECK_MESSAGE(wait_until([&] { return freed(oa.pid, oa.tids); }, kWaitS, 20),
                "the rings of a killed process were not freed");
  {
    const auto rings = ring_owners(name);
    for (const uint32_t t : ob.tids) CHECK(state_of(rings, ob.pid, t) == spanring::kRingActive);
    CHECK(rings[live_ring].state == spanring::kRingActive);
  }

  // Every owner's one record is in the trace, nothing dropped, nothing unfinished.
  REQUIRE(wait_until([&] { return catches_signal(drainer, SIGTERM); }, kWaitS));
  ::kill(drainer, SIGTERM);
  const Exit d = wait_exit(drainer, kWaitS);
  drainer_guard.release();
  CHECK_MESSAGE(d.exited_ok(), "spanring drain: ", d.describe());
  const spanring_test::Trace trace = spanring_test::load_trace(out);
  std::set<std::pair<uint64_t, uint64_t>> owners;
  for (const auto& s : trace.spans) owners.insert({s.pid, s.tid});
  CHECK(trace.spans.size() == 100 + 100 + 1);
  CHECK(owners.size() == 201);
  CHECK(trace.dropped_total == 0);
  CHECK(trace.count("owners.leader") == 1);
  CHECK(slurp(out).find("[SPANRING_UNFINISHED]") == std::string::npos);
}

}  // TEST_SUITE
