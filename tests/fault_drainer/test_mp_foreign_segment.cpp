// Segments that are not ours, or not ours alone: `spanring drain` refuses a segment of another
// layout version, another slot size, a truncated object and a non-spanring object, naming what
// it found and what it expected, and leaves it byte for byte as it was; a second drainer on a
// segment that a live drainer holds is refused (naming that drainer's pid) without touching the
// live drainer's file; `spanring clean` removes what a killed `spanring run` left (killed at any
// step of creating its segment too) and never a segment that a live process still uses, nor an
// object that is not a spanring segment; segments are created 0600 whatever the umask; and a
// traced program that may not open the segment runs on untraced with one line saying why.
#include "fault_util.h"

#include <spanring/segment.h>

#include "src/proc.h"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

using namespace fault_test;

namespace {

constexpr double kWaitS = 20;

std::string test_segment_name(const std::string& what) {
  return "spanring-faulttest-" + std::to_string(::getpid()) + "-" + what;
}

std::string shm_bytes(const std::string& name) {
  ShmView v;
  REQUIRE_MESSAGE(v.open(name, false), "cannot map ", name, ": ", std::string(std::strerror(errno)));
  return v.bytes();
}

std::string octal(mode_t mode) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

bool shm_exists(const std::string& name) { return file_exists("/dev/shm/" + name); }

// Runs `spanring clean` (`-n` when `dry`), CHECKs that it exits 0, returns its stderr.
std::string run_clean(const std::string& spanring, bool dry) {
  std::vector<std::string> argv = {spanring, "clean"};
  if (dry) argv.push_back("-n");
  const spanring_test::RunResult r = spanring_test::run_process(argv, 30);
  INFO("spanring clean", std::string(dry ? " -n" : ""), ": ", r.describe());
  CHECK(r.exit_code == 0);
  return r.err;
}

// A small healthy segment (4 rings of 16 slots) named `name`.
void create_segment(const std::string& name) {
  spanring::SegmentOptions o;
  o.ring_count = 4;
  o.ring_capacity = 16;
  spanring::Segment::create(name, o);  // unmapped again at once; the object stays
}

// `spanring drain` on `name` must fail without touching it; returns its stderr.
std::string refused(const std::string& name, const TempDir& tmp) {
  const std::string before = shm_bytes(name);
  const spanring_test::RunResult r = spanring_test::run_process(
      {spanring_test::exe_from_env("SPANRING_EXE"), "drain", "--segment", name, "-o",
       tmp.file("refused.strace")},
      20);
  INFO("spanring drain: ", r.describe());
  CHECK_FALSE(r.timed_out);
  CHECK_MESSAGE(r.term_signal == 0, "spanring drain died by a signal instead of refusing");
  CHECK_MESSAGE((r.exit_code != 0 && r.exit_code != -1), "spanring drain accepted the segment");
  const std::string after = shm_bytes(name);
  CHECK_MESSAGE(before == after, "spanring drain changed the segment it refused (", before.size(),
                " bytes before, ", after.size(), " after)");
  return r.err;
}

// Sets a u32 field of the segment header at `offset` (a layout field the drainer checks).
void patch_u32(const std::string& name, size_t offset, uint32_t value) {
  ShmView v;
  REQUIRE(v.open(name, true));
  std::memcpy(v.base() + offset, &value, sizeof value);
}

}  // namespace

TEST_SUITE("fault") {

TEST_CASE("a healthy segment is accepted by spanring drain (control for the refusals below)") {
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  TempDir tmp;
  const std::string name = test_segment_name("healthy");
  SegmentGuard guard(name);
  create_segment(name);
  const pid_t pid = spawn({{spanring, "drain", "--segment", name, "-o", tmp.file("out.strace")},
                           {}, "", tmp.file("err.txt")});
  ChildGuard child(pid);
  ShmView v;
  REQUIRE(v.open(name, false));
  CHECK_MESSAGE(wait_until([&] { return v.header().drainer_pid.load() == static_cast<uint32_t>(pid); },
                           kWaitS),
                "spanring drain never took the healthy segment: ", slurp(tmp.file("err.txt")));
  REQUIRE(wait_until([&] { return catches_signal(pid, SIGTERM); }, kWaitS));
  ::kill(pid, SIGTERM);
  const Exit e = wait_exit(pid, kWaitS);
  child.release();
  CHECK_MESSAGE(e.exited_ok(), e.describe(), ": ", slurp(tmp.file("err.txt")));
}

TEST_CASE("a segment of another layout version is refused naming both versions and left untouched") {
  TempDir tmp;
  const std::string name = test_segment_name("version");
  SegmentGuard guard(name);
  create_segment(name);
  patch_u32(name, offsetof(spanring::SegmentHeader, layout_version), spanring::kLayoutVersion + 6);
  const std::string err = refused(name, tmp);
  const std::string found = "version " + std::to_string(spanring::kLayoutVersion + 6);
  const std::string ours = "version " + std::to_string(spanring::kLayoutVersion);
  CHECK_MESSAGE(err.find(found) != std::string::npos, "no '", found, "' in: ", err);
  CHECK_MESSAGE(err.find(ours) != std::string::npos, "no '", ours, "' in: ", err);
  CHECK_MESSAGE(err.find(name) != std::string::npos, "the message does not name the segment: ", err);
}

TEST_CASE("a segment of another slot size is refused naming both sizes and left untouched") {
  TempDir tmp;
  const std::string name = test_segment_name("slot");
  SegmentGuard guard(name);
  create_segment(name);
  patch_u32(name, offsetof(spanring::SegmentHeader, slot_bytes), 128);
  const std::string err = refused(name, tmp);
  CHECK_MESSAGE(err.find("128") != std::string::npos, "the found slot size 128 is not named: ", err);
  CHECK_MESSAGE(err.find(std::to_string(spanring::kSlotBytes)) != std::string::npos,
                "the expected slot size is not named: ", err);
  CHECK_MESSAGE(err.find("slot") != std::string::npos, "the message does not say 'slot': ", err);
}

TEST_CASE("a truncated segment is refused naming the size it needs and the size it has, and left untouched") {
  TempDir tmp;
  const std::string name = test_segment_name("short");
  SegmentGuard guard(name);
  create_segment(name);
  const uint64_t want = spanring::segment_bytes(4, 16);
  const uint64_t have = want - 1024;
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, static_cast<off_t>(have)) == 0);
  ::close(fd);
  const std::string err = refused(name, tmp);
  CHECK_MESSAGE(err.find(std::to_string(want)) != std::string::npos, "the needed size ", want,
                " is not named: ", err);
  CHECK_MESSAGE(err.find(std::to_string(have)) != std::string::npos, "the object's size ", have,
                " is not named: ", err);
}

TEST_CASE("an object smaller than a segment header is refused naming both sizes and left untouched") {
  TempDir tmp;
  const std::string name = test_segment_name("tiny");
  SegmentGuard guard(name);
  create_segment(name);
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  REQUIRE(fd >= 0);
  REQUIRE(::ftruncate(fd, 100) == 0);  // the first 100 bytes of a real header
  ::close(fd);
  const std::string err = refused(name, tmp);
  CHECK_MESSAGE(err.find("100") != std::string::npos, "the object's size is not named: ", err);
  CHECK_MESSAGE(err.find(std::to_string(spanring::kSegmentHeaderBytes)) != std::string::npos,
                "the header size is not named: ", err);
}

TEST_CASE("a shared-memory object that is not a spanring segment is refused and left untouched") {
  TempDir tmp;
  for (const bool zeros : {false, true}) {
    CAPTURE(zeros);
    const std::string name = test_segment_name(zeros ? "zeros" : "text");
    SegmentGuard guard(name);
    const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    REQUIRE(fd >= 0);
    std::string content(65536, '\0');
    if (!zeros)
      for (size_t i = 0; i < content.size(); ++i) content[i] = "not a spanring segment\n"[i % 23];
    REQUIRE(::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
    ::close(fd);
    const std::string err = refused(name, tmp);
    CHECK_MESSAGE(err.find("not a spanring segment") != std::string::npos, err);
    CHECK_MESSAGE(err.find(name) != std::string::npos, "the message does not name the object: ", err);
  }
}

TEST_CASE("a second drainer on a segment a live drainer holds is refused naming that pid and leaves the live trace alone") {
  become_subreaper();
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  const std::string out = tmp.file("out.strace");
  const std::string json = tmp.file("emitted.json");
  const std::string err = tmp.file("run.err");
  ReportMap rep(tmp.file("report.bin"));
  BackgroundDrainer drainer({{spanring, "run", "-o", out, "--", emitter, "--threads", "1",
                              "--report", rep.path(), "--out", json, "--until-stop", "1",
                              "--pace-us", "200"},
                             {}, "", err},
                            kWaitS);
  const pid_t run_pid = drainer.pid();
  const std::string& segment = drainer.segment();
  INFO("spanring run stderr:\n", slurp(err));
  REQUIRE(wait_until([&] { return rep.ready() && rep->phase.load() >= fault::kPhaseEmitting; }, kWaitS));
  struct stat st {};
  REQUIRE(wait_until([&] { return ::stat(out.c_str(), &st) == 0 && st.st_size > 4096; }, kWaitS));
  const uint64_t size_before = static_cast<uint64_t>(st.st_size);
  const std::string prefix_before = slurp(out).substr(0, size_before);

  // Same segment, same output file: a drainer that cut the file before taking the lock would
  // destroy the live trace.
  const spanring_test::RunResult second = spanring_test::run_process(
      {spanring, "drain", "--segment", segment, "-o", out}, 20);
  INFO("second drainer: ", second.describe());
  CHECK_MESSAGE((second.exit_code != 0 && second.exit_code != -1), "the second drainer was not refused");
  CHECK_MESSAGE(second.err.find("pid " + std::to_string(run_pid)) != std::string::npos,
                "the refusal does not name the live drainer's pid ", run_pid);
  CHECK_MESSAGE(second.err.find("drained") != std::string::npos,
                "the refusal does not say that the segment is being drained");
  const std::string after = slurp(out);
  CHECK_MESSAGE(after.size() >= size_before, "the live trace shrank from ", size_before, " to ",
                after.size(), " bytes when the second drainer was refused");
  CHECK_MESSAGE(after.compare(0, size_before, prefix_before) == 0,
                "the live trace's first ", size_before, " bytes changed");

  rep->stop.store(1);
  const Exit e = wait_exit(run_pid, 30);
  drainer.release();
  REQUIRE_MESSAGE(e.exited_ok(), "spanring run: ", e.describe());
  const std::string text = slurp(out);
  const auto parsed = parse_and_check_form(text, {}, "live trace");
  const Emitted emitted = load_emitted(json);
  const auto owners = lines_by_owner(parsed);
  const auto it = owners.find({emitted.pid, emitted.threads.at(0).tid});
  REQUIRE(it != owners.end());
  check_thread_accounting(it->second, emitted.threads[0], emitted.pid, emitted.threads[0].stored,
                          "live trace");
}

TEST_CASE("spanring clean removes what a killed spanring run left and keeps every segment a live process uses") {
  become_subreaper();
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  struct Run {
    pid_t pid = -1;
    pid_t emitter = -1;
    std::string segment;
    std::unique_ptr<ReportMap> rep;
  };
  std::vector<std::unique_ptr<BackgroundDrainer>> drainers;
  std::vector<std::unique_ptr<SegmentGuard>> segment_guards;
  auto start = [&](const std::string& tag) {
    Run r;
    r.rep = std::make_unique<ReportMap>(tmp.file(tag + ".report"));
    drainers.push_back(std::make_unique<BackgroundDrainer>(
        SpawnOptions{{spanring, "run", "-o", tmp.file(tag + ".strace"), "--", emitter,
                      "--threads", "1", "--report", r.rep->path(), "--until-stop", "1",
                      "--pace-us", "1000"},
                     {}, "", tmp.file(tag + ".err")},
        kWaitS));
    r.pid = drainers.back()->pid();
    r.segment = drainers.back()->segment();
    segment_guards.push_back(std::make_unique<SegmentGuard>(r.segment));
    REQUIRE(wait_until([&] { return r.rep->ready() && (*r.rep)->phase.load() >= fault::kPhaseEmitting; },
                       kWaitS));
    r.emitter = static_cast<pid_t>((*r.rep)->pid.load());
    return r;
  };
  Run dead = start("dead");     // run and command killed: nobody uses the segment
  Run orphan = start("orphan"); // run killed, its command lives on and still owns a ring
  Run live = start("live");     // untouched
  REQUIRE(::kill(-dead.pid, SIGKILL) == 0);  // spanring run and its command (same group)
  CHECK(wait_exit(dead.pid, kWaitS).sig == SIGKILL);
  CHECK(wait_exit(dead.emitter, kWaitS).sig == SIGKILL);  // re-parented to us, the subreaper
  REQUIRE(::kill(orphan.pid, SIGKILL) == 0);
  CHECK(wait_exit(orphan.pid, kWaitS).sig == SIGKILL);
  REQUIRE(shm_exists(dead.segment));
  REQUIRE(shm_exists(orphan.segment));

  const auto clean = [&](bool dry) { return run_clean(spanring, dry); };
  const auto says = [](const std::string& err, const std::string& start, const std::string& name) {
    for (const std::string& l : lines_starting(err, start + name))
      if (l.size() > start.size() + name.size() && (l[start.size() + name.size()] == ' ' ||
                                                   l[start.size() + name.size()] == ':'))
        return true;
    return false;
  };

  // Dry run: says what it would do, removes nothing.
  std::string err = clean(true);
  CHECK_MESSAGE(says(err, "spanring: would remove ", dead.segment), err);
  CHECK(shm_exists(dead.segment));
  // For real.
  err = clean(false);
  CHECK_MESSAGE(says(err, "spanring: removed ", dead.segment), err);
  CHECK_MESSAGE(!shm_exists(dead.segment), "spanring clean left the dead run's segment: ", err);
  CHECK_MESSAGE(says(err, "spanring: kept ", orphan.segment), err);
  CHECK_MESSAGE(shm_exists(orphan.segment),
                "spanring clean removed a segment whose producer is alive: ", err);
  CHECK_MESSAGE(says(err, "spanring: kept ", live.segment), err);
  CHECK_MESSAGE(shm_exists(live.segment), "spanring clean removed a live run's segment: ", err);
  CHECK_MESSAGE(err.find("kept " + live.segment + ": its creator pid " + std::to_string(live.pid)) !=
                    std::string::npos,
                "no reason (its live creator) given for keeping ", live.segment, ": ", err);

  // Once the orphaned producer exits, its segment is dead too.
  (*orphan.rep)->stop.store(1);
  CHECK(wait_exit(orphan.emitter, kWaitS).exited_ok());
  err = clean(false);
  CHECK_MESSAGE(!shm_exists(orphan.segment), "the orphan's segment outlived its producer: ", err);
  CHECK(shm_exists(live.segment));

  (*live.rep)->stop.store(1);
  const Exit e = wait_exit(live.pid, kWaitS);
  CHECK_MESSAGE(e.exited_ok(), "the live run: ", e.describe());
  CHECK_MESSAGE(!shm_exists(live.segment), "spanring run did not remove its segment at exit");
  for (auto& d : drainers) d->release();
}

namespace {

// A pid that no process has now: a child that exited and was reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  REQUIRE(pid > 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return pid;
}

// Creates /dev/shm/NAME holding `bytes` (mode 0600).
void make_shm(const std::string& name, const std::string& bytes) {
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  REQUIRE_MESSAGE(fd >= 0, "shm_open ", name, ": ", std::strerror(errno));
  if (!bytes.empty())
    REQUIRE(::pwrite(fd, bytes.data(), bytes.size(), 0) == static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

// Runs `spanring run -- /bin/touch STARTED` with test point `step` armed: it must die there
// (SIGKILL) before the command starts. Returns the object it left in /dev/shm (the name
// `spanring run` gives, with its pid), guarded by `guard`; its pid into `run_pid`.
std::string run_killed_at(const std::string& spanring, const TempDir& tmp, const char* step,
                          SegmentGuard& guard, pid_t& run_pid) {
  const std::string started = tmp.file(std::string("started-") + step);
  run_pid = spawn({{spanring, "run", "--rings", "2", "--ring-records", "64", "-o",
                    tmp.file("out.strace"), "--force", "--", "/bin/touch", started},
                   {{"SPANRING_TEST_POINT", step}},
                   "",
                   tmp.file(std::string("run-") + step + ".err")});
  const Exit e = wait_exit(run_pid, kWaitS);
  REQUIRE_MESSAGE(e.sig == SIGKILL, "spanring run should die at its test point: ", e.describe());
  CHECK(!file_exists(started));
  std::string left;
  const std::string prefix = "spanring-" + std::to_string(run_pid) + "-";
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm"))
    if (entry.path().filename().string().rfind(prefix, 0) == 0) left = entry.path().filename();
  REQUIRE_MESSAGE(!left.empty(), "the killed run left no segment named ", prefix, "*");
  guard.reset(left);
  // A producer is refused by it (no magic) rather than tracing into it.
  CHECK_THROWS_AS(spanring::Segment::open(left), spanring::Error);
  return left;
}

}  // namespace

TEST_CASE("spanring clean removes a segment whose creator was killed while creating it, and keeps one still being created") {
  spanring_test::skip_without_test_points();
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  TempDir tmp;
  // spanring run killed after it wrote the creator fields, before the magic (its pages are
  // being written then: ~200 ms at the default size). The command never starts.
  SegmentGuard left_guard;
  pid_t run_pid = 0;
  const std::string left =
      run_killed_at(spanring, tmp, "segment_initialising", left_guard, run_pid);

  // A segment being created right now by a live process (this test): same state, kept.
  const std::string creating = "spanring-" + std::to_string(::getpid()) + "-0c0ffee0";
  SegmentGuard creating_guard(creating);
  {
    const int fd = ::shm_open(creating.c_str(), O_CREAT | O_RDWR, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, 4096) == 0);
    spanring::SegmentHeader h{};
    h.creator_pid = static_cast<uint32_t>(::getpid());
    h.creator_start_time = spanring::process_start_time(h.creator_pid);
    REQUIRE(::pwrite(fd, &h, sizeof h, 0) == static_cast<ssize_t>(sizeof h));
    ::close(fd);
  }

  const auto clean = [&](bool dry) { return run_clean(spanring, dry); };
  std::string err = clean(true);
  CHECK_MESSAGE(err.find("spanring: would remove " + left + " (its creator died while creating it)") !=
                    std::string::npos,
                err);
  CHECK(shm_exists(left));
  err = clean(false);
  CHECK_MESSAGE(err.find("spanring: removed " + left + " (its creator died while creating it)") !=
                    std::string::npos,
                err);
  CHECK(!shm_exists(left));
  CHECK_MESSAGE(err.find("spanring: kept " + creating + ": its creator pid " +
                         std::to_string(::getpid()) + " is still creating it") != std::string::npos,
                err);
  CHECK(shm_exists(creating));
}

TEST_CASE("a spanring run killed at any step of creating its segment leaves nothing spanring clean does not remove, and clean touches nothing else") {
  spanring_test::skip_without_test_points();
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  TempDir tmp;

  // Objects that are not a spanring segment being created, each next to what would make it one:
  // none may be removed, whatever their creator's pid says.
  const std::string dead = std::to_string(dead_pid());
  const std::string header_sized(sizeof(spanring::SegmentHeader), '\0');
  std::string garbage = header_sized;
  garbage[200] = 'x';  // a byte create() never writes before the magic
  std::string other_creator = header_sized;
  const uint32_t not_the_names_pid = 1;
  std::memcpy(&other_creator[offsetof(spanring::SegmentHeader, creator_pid)], &not_the_names_pid,
              sizeof not_the_names_pid);
  const std::vector<std::pair<std::string, std::string>> foreign = {
      {"spanring-" + dead + "-creating", ""},              // not the name spanring run gives
      {"spanring-" + dead + "-0123456", ""},               // 7 hex digits
      {"spanring-" + dead + "-0123456789", ""},            // 10
      {"spanring-" + dead + "-ABCDEF01", ""},              // upper case
      {"other-" + dead + "-01234567", ""},                 // another program's prefix
      {"spanring-" + dead + "-0badbeef", std::string(100, '\0')},  // sized, smaller than a header
      {"spanring-" + dead + "-0badf00d", garbage},          // written where create() never writes
      {"spanring-" + dead + "-0ddba11a", other_creator},    // another creator than the name's
  };
  std::vector<std::unique_ptr<SegmentGuard>> foreign_guards;
  for (const auto& [name, bytes] : foreign) {
    make_shm(name, bytes);
    foreign_guards.push_back(std::make_unique<SegmentGuard>(name));
  }
  // A creation in progress by a live process (this test), before it wrote its creator: kept.
  const std::string live_empty = "spanring-" + std::to_string(::getpid()) + "-1a2b3c4d";
  make_shm(live_empty, "");
  SegmentGuard live_guard(live_empty);

  // Every step of Segment::create() (drain/unfinished_segment.h), in order.
  const char* const kSteps[] = {"segment_created",      "segment_sized",
                                "segment_creator_pid",  "segment_initialising",
                                "segment_header_half",  "segment_header_written"};
  for (const char* step : kSteps) {
    CAPTURE(step);
    SegmentGuard left_guard;
    pid_t run_pid = 0;
    const std::string left = run_killed_at(spanring, tmp, step, left_guard, run_pid);

    // stat names its dead creator rather than calling it another program's object.
    const spanring_test::RunResult st =
        spanring_test::run_process({spanring, "stat", "--segment", left}, 30);
    CHECK_MESSAGE(st.err.find("its creator pid " + std::to_string(run_pid) +
                              " died while creating it") != std::string::npos,
                  st.describe());

    const std::string err = run_clean(spanring, false);
    CHECK_MESSAGE(err.find("spanring: removed " + left + " (its creator died while creating it)") !=
                      std::string::npos,
                  err);
    CHECK_MESSAGE(!shm_exists(left), "spanring clean left what the run killed at ", step,
                  " made: ", err);
    for (const auto& f : foreign)
      CHECK_MESSAGE(shm_exists(f.first), "spanring clean removed ", f.first, ": ", err);
    CHECK_MESSAGE(err.find("spanring: kept " + live_empty + ": its creator pid " +
                           std::to_string(::getpid()) + " is still creating it") !=
                      std::string::npos,
                  err);
    CHECK(shm_exists(live_empty));
  }
}

TEST_CASE("a segment whose name is removed from /dev/shm during a run gets one warning, and the run goes on") {
  // As systemd-logind's RemoveIPC does at logout: the mapping stays, the name is gone.
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  const std::string err_path = tmp.file("run.err");
  BackgroundDrainer run({{spanring, "run", "-o", tmp.file("out.strace"), "--", emitter,
                          "--threads", "1", "--seconds", "3", "--count", "1000000",
                          "--pace-us", "1000"},
                         {}, "", err_path},
                        kWaitS);
  SegmentGuard guard(run.segment());
  // Once the emitter has attached and claimed its ring, the name goes.
  REQUIRE(wait_until(
      [&] {
        ShmView v;
        if (!v.open(run.segment(), false)) return false;
        for (uint32_t i = 0; i < v.view().ring_count(); ++i)
          if (v.ring(i).state.load() == spanring::kRingActive) return true;
        return false;
      },
      kWaitS));
  REQUIRE(::shm_unlink(run.segment().c_str()) == 0);
  const Exit e = wait_exit(run.pid(), kWaitS);
  run.release();
  const std::string err = slurp(err_path);
  INFO("spanring run: ", e.describe(), "\n", err);
  CHECK(e.exited_ok());
  const auto warned = lines_starting(err, "spanring: warning: segment " + run.segment() +
                                              " was removed from /dev/shm");
  CHECK(warned.size() == 1);
  const std::optional<uint64_t> written = summary_value(err, "written");
  REQUIRE(written.has_value());
  CHECK(*written > 0);  // the emitter, attached before the removal, was traced to its end
}

TEST_CASE("segments are created 0600 even under umask 000") {
  become_subreaper();
  const std::string spanring = spanring_test::exe_from_env("SPANRING_EXE");
  const std::string emitter = spanring_test::exe_from_env("FAULT_EMITTER");
  TempDir tmp;
  // Control: umask 000 really lets a 0666 object be 0666, so the check below can fail.
  const mode_t old = ::umask(0);
  const std::string control = test_segment_name("umask-control");
  SegmentGuard control_guard(control);
  const int fd = ::shm_open(control.c_str(), O_RDWR | O_CREAT | O_EXCL, 0666);
  struct stat st {};
  const bool control_ok = fd >= 0 && ::fstat(fd, &st) == 0;
  if (fd >= 0) ::close(fd);
  // In-process, through the library.
  const std::string lib = test_segment_name("umask-lib");
  SegmentGuard lib_guard(lib);
  create_segment(lib);
  ::umask(old);
  REQUIRE(control_ok);
  CHECK_MESSAGE((st.st_mode & 07777) == 0666, "control object is ", octal(st.st_mode));
  REQUIRE(::stat(("/dev/shm/" + lib).c_str(), &st) == 0);
  CHECK_MESSAGE((st.st_mode & 07777) == 0600, "Segment::create under umask 000 made mode ",
                octal(st.st_mode));

  // spanring run started with umask 000.
  const std::string err = tmp.file("run.err");
  ReportMap rep(tmp.file("report.bin"));
  SpawnOptions run{{spanring, "run", "-o", tmp.file("out.strace"), "--", emitter, "--threads",
                    "1", "--report", rep.path(), "--until-stop", "1", "--pace-us", "1000"},
                   {}, "", err};
  run.umask = 0;
  BackgroundDrainer drainer(run, kWaitS);
  const pid_t pid = drainer.pid();
  const std::string& segment = drainer.segment();
  REQUIRE(::stat(("/dev/shm/" + segment).c_str(), &st) == 0);
  CHECK_MESSAGE((st.st_mode & 07777) == 0600, "spanring run under umask 000 made its segment ",
                octal(st.st_mode));
  REQUIRE(wait_until([&] { return rep.ready(); }, kWaitS));
  rep->stop.store(1);
  const Exit e = wait_exit(pid, kWaitS);
  drainer.release();
  CHECK_MESSAGE(e.exited_ok(), e.describe(), ": ", slurp(err));
}

TEST_CASE("a traced program that may not open the segment runs on untraced with one stderr line naming the segment, uid and mode") {
  if (::geteuid() != 0) {
    std::fprintf(stderr, "SKIP: needs root, to run the producer as another uid\n");
    std::exit(77);
  }
  TempDir tmp;
  // The producer runs as uid 65534, which must be able to reach and run the program: a
  // statically linked emitter copied into a directory open to all.
  REQUIRE(::chmod(tmp.path().c_str(), 0755) == 0);
  const std::string emitter = tmp.file("fault_emitter");
  std::filesystem::copy_file(spanring_test::exe_from_env("FAULT_EMITTER_STATIC"), emitter);
  REQUIRE(::chmod(emitter.c_str(), 0755) == 0);

  const std::string name = test_segment_name("perm");
  SegmentGuard guard(name);
  create_segment(name);  // root's, 0600
  const std::string before = shm_bytes(name);
  constexpr int kNobody = 65534;
  SpawnOptions nobody{{emitter, "--threads", "2", "--count", "1000"},
                      {{"SPANRING_SEGMENT", name}},
                      tmp.file("nobody.out"),
                      tmp.file("nobody.err")};
  nobody.uid = kNobody;
  const pid_t pid = spawn(nobody);
  const Exit e = wait_exit(pid, kWaitS);
  const std::string out = slurp(tmp.file("nobody.out"));
  const std::string err = slurp(tmp.file("nobody.err"));
  INFO("stdout: ", out, "stderr: ", err);
  CHECK_MESSAGE(e.exited_ok(), "the untraced program: ", e.describe());
  CHECK_MESSAGE(out.find("enabled=0 threads=2 emitted=2000 stored=0") != std::string::npos,
                "the program did not run its whole workload untraced");
  const auto lines = lines_starting(err, "spanring: tracing disabled:");
  REQUIRE_MESSAGE(lines.size() == 1, lines.size(), " 'spanring: tracing disabled:' lines");
  size_t stderr_lines = 0;
  for (const char c : err) stderr_lines += c == '\n' ? 1 : 0;
  CHECK_MESSAGE(stderr_lines == 1, "stderr holds ", stderr_lines, " lines, want only the one");
  const std::string& l = lines[0];
  CHECK_MESSAGE(l.find(name) != std::string::npos, "the line does not name the segment");
  CHECK_MESSAGE(l.find("0600") != std::string::npos, "the line does not give the mode 0600");
  CHECK_MESSAGE(l.find("uid 0") != std::string::npos, "the line does not name the owner uid 0");
  CHECK_MESSAGE(l.find(std::to_string(kNobody)) != std::string::npos,
                "the line does not name the process' uid ", kNobody);
  CHECK_MESSAGE(shm_bytes(name) == before, "the refused producer changed the segment");

  // Control: as root the same program traces into the segment, without the line.
  // (4 two-slot records per thread fit the 16-slot rings with no drainer running.)
  SpawnOptions root{{emitter, "--threads", "2", "--count", "4"},
                    {{"SPANRING_SEGMENT", name}},
                    tmp.file("root.out"),
                    tmp.file("root.err")};
  const Exit r = wait_exit(spawn(root), kWaitS);
  CHECK_MESSAGE(r.exited_ok(), "as root: ", r.describe());
  CHECK_MESSAGE(slurp(tmp.file("root.out")).find("enabled=1 threads=2 emitted=8 stored=8") !=
                    std::string::npos,
                "as root the program did not trace: ", slurp(tmp.file("root.out")),
                slurp(tmp.file("root.err")));
  CHECK(lines_starting(slurp(tmp.file("root.err")), "spanring: tracing disabled:").empty());
}

}  // TEST_SUITE
