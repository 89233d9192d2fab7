// A /dev/shm too small for every ring (a container's 64 MiB, say): rings are committed when a
// thread claims one, so the segment is still created and the threads that get a ring trace;
// the others' records are no_ring drops, counted exactly, and `spanring run` warns at the start
// how many rings fit. Nothing crashes (a store to a page tmpfs cannot supply would be a SIGBUS).
// The test mounts a 16 MiB tmpfs over /dev/shm in a mount namespace of its own (its children
// inherit it): room for the tables and 3 rings of the default 4 MiB, for 6 threads that all run
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
#include <set>
#include <string>
#include <vector>

using namespace fault_test;

namespace {

// Once per process: the test cases share the namespace and its tmpfs.
void mount_small_shm() {
  static bool mounted = false;
  if (mounted) return;
  if (::unshare(CLONE_NEWNS) != 0 ||
      ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      ::mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=16m,mode=1777") != 0) {
    std::fprintf(stderr, "SKIP: cannot mount a 16 MiB tmpfs on /dev/shm in a mount namespace: %s\n",
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
  const spanring_test::Trace parsed = spanring_test::load_trace(out);
  spanring_test::check_trace_invariants(parsed, r.summary, err, out);
  // As many threads traced as the warning said rings fit: a claim that fails gives back the
  // pages it committed, so failed claims do not eat the room of later ones. (Each thread
  // without a ring tries again every 1,024 records, so all `fit` rings are in use long before
  // the threads end.)
  std::set<uint64_t> traced;
  for (const spanring_test::SpanLine& span : parsed.spans) traced.insert(span.tid);
  CHECK_MESSAGE(traced.size() >= fit, traced.size(), " threads traced, ", fit, " rings fit");
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

TEST_CASE("a /dev/shm without room for one ring: the command runs untraced, or with --require-tracing never starts") {
  mount_small_shm();
  // One ring of 2^20 slots is 64 MiB, more than the whole 8 MiB /dev/shm (a segment that did
  // not fit used to die of SIGBUS while its pages were written).
  const std::vector<std::string> huge = {"--rings", "4", "--ring-records", "1048576"};
  TempDir tmp;
  const std::string marker = tmp.file("started");
  // A trace that no run writes stays as it was: not emptied, not moved to FILE.old.
  auto precious = [](const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs("precious\n", f);
    std::fclose(f);
  };
  auto kept = [&](const std::string& path) {
    CHECK(spanring_test::read_file(path) == "precious\n");
    struct stat old {};
    CHECK_MESSAGE(::stat((path + ".old").c_str(), &old) != 0, path, ".old was made");
  };
  precious(tmp.file("out.strace"));
  precious(tmp.file("out2.strace"));
  const std::vector<std::string> cmd = {"/bin/sh", "-c", "touch " + marker + "; exit 3"};
  struct stat st {};
  {
    // Never stop the workload: it runs without SPANRING_SEGMENT, its status passed on.
    const spanring_test::RunResult r = spanring_test::spanring_run(tmp.file("out.strace"), huge, cmd, 40);
    INFO("spanring run: ", r.describe());
    CHECK(r.exit_code == 3);
    CHECK(r.term_signal == 0);  // never SIGBUS
    CHECK(::stat(marker.c_str(), &st) == 0);
    const std::string want = "/dev/shm has ";
    CHECK(r.err.rfind("spanring: cannot trace: ", 0) == 0);
    CHECK(r.err.find(want) != std::string::npos);
    CHECK(r.err.find("running /bin/sh untraced") != std::string::npos);
    size_t lines = 0;
    for (const char c : r.err) lines += c == '\n' ? 1 : 0;
    CHECK(lines == 1);
    kept(tmp.file("out.strace"));
  }
  ::unlink(marker.c_str());
  {
    std::vector<std::string> opts = huge;
    opts.push_back("--require-tracing");
    const spanring_test::RunResult r = spanring_test::spanring_run(tmp.file("out2.strace"), opts, cmd, 40);
    INFO("spanring run --require-tracing: ", r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.term_signal == 0);
    CHECK(r.err.find("/dev/shm has ") != std::string::npos);
    CHECK_MESSAGE(::stat(marker.c_str(), &st) != 0, "the command ran");
    kept(tmp.file("out2.strace"));
  }
}

}  // TEST_SUITE
