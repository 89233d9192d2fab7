// A /dev/shm too small for every ring (a container's 64 MiB, say): rings are committed when a
// thread claims one, so the segment is still created and the threads that get a ring trace;
// the others' records are no_ring drops, counted exactly, and `spanring run` warns at the start
// how many rings fit. Nothing crashes (a store to a page tmpfs cannot supply would be a SIGBUS).
// The test mounts an 8 MiB tmpfs over /dev/shm in a mount namespace of its own (its children
// inherit it): room for the tables and 3 rings of the default 2 MiB, for 6 threads that all run
// at once. Skipped (77) where a mount namespace or a mount is not permitted.
#include "fault_util.h"

#include "traced_run.h"

#include <doctest/doctest.h>

#include <spanring/error.h>
#include <spanring/segment.h>

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace fault_test;

namespace {

// Once per process: the test cases share the namespace and its tmpfs.
void mount_small_shm() {
  static bool mounted = false;
  if (mounted) return;
  if (::unshare(CLONE_NEWNS) != 0 ||
      ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      ::mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=8m,mode=1777") != 0) {
    std::fprintf(stderr, "SKIP: cannot mount an 8 MiB tmpfs on /dev/shm in a mount namespace: %s\n",
                 std::strerror(errno));
    std::exit(77);
  }
  mounted = true;
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("a /dev/shm with room for 3 of the rings: a warning, 3 threads at a time trace, the others' records are counted no_ring drops") {
  mount_small_shm();
  TempDir tmp;
  const std::string out = tmp.file("out.strace");
  const std::string json = tmp.file("emitted.json");
  // Six threads for a second each, paced: all hold (or want) a ring at the same time.
  const spanring_test::TracedRun r = spanring_test::run_traced(
      out, {},
      {spanring_test::exe_from_env("FAULT_EMITTER"), "--threads", "6", "--seconds", "1",
       "--pace-us", "200", "--out", json},
      60);
  const std::string& err = r.run.err;
  INFO("spanring run stderr:\n", err);

  // The warning names how many rings fit: some, not all six threads' worth.
  const std::string warning = "warning: /dev/shm has room for ";
  const size_t at = err.find(warning);
  REQUIRE_MESSAGE(at != std::string::npos, "no warning that /dev/shm holds too few rings");
  const unsigned long fit = std::strtoul(err.c_str() + at + warning.size(), nullptr, 10);
  CHECK(fit >= 1);
  CHECK(fit < 6);

  // Every record is in the trace or counted as a drop, and some were dropped for want of a ring.
  const Emitted emitted = load_emitted(json);
  REQUIRE(emitted.enabled);
  REQUIRE(emitted.threads.size() == 6);
  uint64_t total = 0;
  uint64_t stored = 0;
  for (const EmittedThread& t : emitted.threads) {
    total += t.emitted;
    stored += t.stored;
  }
  CHECK(r.summary.written == stored);
  CHECK(r.summary.written + r.summary.dropped == total);
  CHECK(r.summary.dropped > 0);
  const std::string trace = slurp(out);
  CHECK_MESSAGE(trace.find(" reason=no_ring") != std::string::npos, "no no_ring drop line");
  spanring_test::check_trace_invariants(spanring_test::load_trace(out), r.summary, err, out);
}

TEST_CASE("a /dev/shm without room for the tables and one ring refuses the segment before anything is created") {
  mount_small_shm();
  // One ring of 2^20 slots is 64 MiB: more than the whole 8 MiB /dev/shm.
  const std::string name = "spanring-test-small-shm-" + std::to_string(::getpid());
  try {
    spanring::Segment::create(name, spanring::SegmentOptions{4, 1u << 20});
    spanring::Segment::remove(name);
    FAIL("created a segment whose one ring cannot fit in /dev/shm");
  } catch (const spanring::Error& e) {
    CHECK(e.code() == spanring::ErrorCode::kNoSpace);
    CHECK(e.err() == ENOSPC);
    CHECK(std::string(e.what()).find("MiB free") != std::string::npos);
  }
  struct stat st {};
  CHECK(::stat(("/dev/shm/" + name).c_str(), &st) != 0);
}

}  // TEST_SUITE
