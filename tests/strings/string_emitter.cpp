// The traced program of the string-table tests (test_mp_strings.cpp), run under `spanring run`.
// Built with -O2 (tests/strings/meson.build): Span's literal names and keys take the compact
// path (one slot, interned ids) only in optimized builds (literal detection).
//
// Every process appends one JSON line to --out saying what it did: its pid, role, the spans it
// emitted by name (each name's spans carry `i=<k> neg=-<k>` for k = 0..n-1, so the expected
// attribute text is known), how many compact records it saw in its own ring's slots after
// emitting (compact_slots: proof that the compact path ran), and role-specific facts.
//
// Roles (--role):
//   emit     emit --count spans of each name of --names (comma-separated, from a fixed list)
//   victim   the same, run with SPANRING_TEST_POINT=string_writing (by its parent): killed
//            inside intern(), its entry left kStringWriting
//   kill     (a) run a `victim` child (exec'd with the test point armed), wait for its SIGKILL,
//            then two `emit` children and itself emit every name, the victim's too
//   attack   (b) deterministic phase: stop the drainer (SIGSTOP to `spanring run`, our
//            parent), emit `str.doomed` spans, overwrite that name's table entry with random
//            bytes and the name id of some of our other compact records with ids that cannot
//            resolve, continue the drainer: exactly those records are corrupt drops. Random
//            phase: threads emit while another thread writes random bytes over random table
//            entries
//   full     (c) fill the table through intern() with junk strings until it refuses, then emit
//            names never interned before (ordinary records), and run `spanring stat --json`
//   fork     (d) emit, fork two children that emit with the inherited ids, one of which execs
//            an `emit` child emitting the same names (re-interned: the same ids)
#include "src/string_table.h"
#include "tests/fault_producers/emitter_util.h"

#include <spanring/segment_layout.h>
#include <spanring/segment_view.h>
#include <spanring/span.h>

#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using fault_emitter::append_json_line;
using fault_emitter::fail;
using fault_emitter::gettid_now;
using nlohmann::json;

namespace {

std::string g_out;
std::string g_self;

// The segment this process is attached to, mapped read-write (the attacker writes into it;
// the others only read their ring's slots and the table).
struct Mapped {
  spanring::SegmentView view;
  bool open() {
    const char* name = std::getenv("SPANRING_SEGMENT");
    if (name == nullptr) return false;
    const int fd = ::shm_open((std::string("/") + name).c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) return false;
    struct stat st {};
    if (::fstat(fd, &st) != 0) return false;
    void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE,
                     MAP_SHARED, fd, 0);
    ::close(fd);
    if (p == MAP_FAILED) return false;
    std::string why;
    return spanring::SegmentView::validate(static_cast<std::byte*>(p),
                                           static_cast<uint64_t>(st.st_size), view, why);
  }
  int64_t my_ring() const {
    const auto pid = static_cast<uint32_t>(::getpid());
    const auto tid = static_cast<uint32_t>(gettid_now());
    for (uint32_t i = 0; i < view.ring_count(); ++i) {
      const spanring::RingHeader& r = view.ring(i);
      if (r.state.load(std::memory_order_acquire) == spanring::kRingActive &&
          r.owner_pid == pid && r.owner_tid == tid)
        return i;
    }
    return -1;
  }
  // Compact records among the calling thread's ring's slots (the last lap's records).
  uint64_t compact_slots() const {
    const int64_t ring = my_ring();
    if (ring < 0) return 0;
    uint64_t n = 0;
    const std::byte* slots = view.ring_slots(static_cast<uint32_t>(ring));
    for (uint64_t s = 0; s < view.ring_capacity(); ++s) {
      spanring::CompactRecord c;
      std::memcpy(&c, slots + s * spanring::kSlotBytes, sizeof c);
      if ((c.flags & spanring::kRecordCompact) != 0 && c.slots == 1) ++n;
    }
    return n;
  }
};

// One span of a literal name, index k, in a function of its own: GCC inlines Span's
// constructor and attr() calls (and so sees the literals) in a small function; in one large
// function with many of them its inlining limits may leave some calls out of line.
#define DEFINE_EMIT(fn, lit)                                                      \
  __attribute__((noinline)) void fn(int64_t k) {                                 \
    spanring::Span s(lit);                                                       \
    s.attr("i", k).attr("neg", -k);                                              \
  }
DEFINE_EMIT(emit_a, "str.a")
DEFINE_EMIT(emit_b, "str.b")
DEFINE_EMIT(emit_victim, "str.victim")
DEFINE_EMIT(emit_doomed, "str.doomed")
DEFINE_EMIT(emit_late, "str.late")
DEFINE_EMIT(emit_fork, "str.fork")

// Emits `count` spans of the named literal.
void emit_name(const std::string& name, int count) {
  void (*fn)(int64_t) = nullptr;
  if (name == "str.a") fn = emit_a;
  else if (name == "str.b") fn = emit_b;
  else if (name == "str.victim") fn = emit_victim;
  else if (name == "str.doomed") fn = emit_doomed;
  else if (name == "str.late") fn = emit_late;
  else if (name == "str.fork") fn = emit_fork;
  else fail("unknown name %s", name.c_str());
  for (int k = 0; k < count; ++k) fn(k);
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) if (!part.empty()) out.push_back(part);
  return out;
}

json emit_names(const std::vector<std::string>& names, int count) {
  json emitted = json::object();
  for (const auto& n : names) {
    emit_name(n, count);
    emitted[n] = emitted.value(n, 0) + count;
  }
  return emitted;
}

void report(const std::string& role, const json& emitted, uint64_t compact, json extra = {}) {
  json j = {{"pid", ::getpid()}, {"tid", gettid_now()}, {"role", role},
            {"emitted", emitted}, {"compact_slots", compact}};
  if (extra.is_object()) j.update(extra);
  append_json_line(g_out, j);
}

// Runs this program again with `args` (and extra environment), waits, returns the wait status.
int run_self(const std::vector<std::string>& args, const char* env_assign = nullptr) {
  const pid_t pid = ::fork();
  if (pid < 0) fail("fork failed");
  if (pid == 0) {
    if (env_assign != nullptr) ::putenv(const_cast<char*>(env_assign));
    std::vector<std::string> all = {g_self, "--out", g_out};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(g_self.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  return status;
}

json stat_json() {
  const char* exe = std::getenv("SPANRING_EXE");
  const char* seg = std::getenv("SPANRING_SEGMENT");
  if (exe == nullptr || seg == nullptr) fail("SPANRING_EXE or SPANRING_SEGMENT unset");
  const std::string cmd = std::string(exe) + " stat --json --segment " + seg;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) fail("popen %s", cmd.c_str());
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  if (::pclose(p) != 0) fail("%s failed", cmd.c_str());
  return json::parse(text);
}

// Waits until the drainer has consumed (committed) everything the calling thread's ring holds.
void wait_drained(const Mapped& m) {
  const int64_t ring = m.my_ring();
  if (ring < 0) return;
  const spanring::RingHeader& r = m.view.ring(static_cast<uint32_t>(ring));
  for (int i = 0; i < 20000; ++i) {
    if (r.tail.load(std::memory_order_acquire) == r.head.load(std::memory_order_acquire)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  fail("the drainer did not catch up");
}

// The table entry holding `s` (ready, bytes equal), or 0.
uint32_t find_entry(const Mapped& m, const std::string& s) {
  const spanring::StringEntry* t = m.view.strings();
  for (uint32_t id = 1; id < spanring::kStringTableEntries; ++id) {
    if (t[id].state.load(std::memory_order_acquire) == spanring::kStringReady &&
        t[id].len == s.size() && std::memcmp(t[id].bytes, s.data(), s.size()) == 0)
      return id;
  }
  return 0;
}

int role_attack(int count) {
  Mapped m;
  if (!m.open()) fail("cannot map the segment");
  std::mt19937_64 rng(static_cast<uint64_t>(::getpid()));
  // ---- deterministic phase, this thread.
  json emitted = emit_names({"str.a"}, count);  // names the drainer resolves and keeps
  wait_drained(m);
  const pid_t drainer = ::getppid();
  if (::kill(drainer, SIGSTOP) != 0) fail("SIGSTOP the drainer");
  emit_name("str.doomed", count);
  emitted["str.doomed"] = count;
  const uint32_t doomed_id = find_entry(m, "str.doomed");
  if (doomed_id == 0) fail("str.doomed is not in the table");
  auto* raw = reinterpret_cast<unsigned char*>(&m.view.strings()[doomed_id]);
  for (size_t i = 0; i < sizeof(spanring::StringEntry); ++i) raw[i] = static_cast<unsigned char>(rng());
  // The entry could read as valid again only if random bytes made a consistent entry.
  spanring::StringTableReader check(m.view.strings());
  std::string_view sv;
  std::string why;
  uint64_t doomed = check.resolve(doomed_id, sv, why) ? 0 : count;
  // str.a spans whose name id is overwritten with an id that cannot resolve.
  emit_name("str.a", count);
  emitted["str.a"] = 2 * count;
  const int64_t ring = m.my_ring();
  if (ring < 0) fail("no ring");
  const spanring::RingHeader& r = m.view.ring(static_cast<uint32_t>(ring));
  const uint64_t head = r.head.load(std::memory_order_acquire);
  const uint64_t tail = r.tail.load(std::memory_order_acquire);
  std::byte* slots = m.view.ring_slots(static_cast<uint32_t>(ring));
  uint64_t ids_spoiled = 0;
  const uint64_t cap = m.view.ring_capacity();
  for (uint64_t pos = tail; pos != head; ++pos) {
    auto* c = reinterpret_cast<spanring::CompactRecord*>(slots + (pos & (cap - 1)) * spanring::kSlotBytes);
    if ((c->flags & spanring::kRecordCompact) == 0) continue;
    if (c->name == doomed_id || pos % 3 != 0) continue;
    c->name = static_cast<uint16_t>(spanring::kStringTableEntries + rng() % 60000);
    ++ids_spoiled;
  }
  const uint64_t compact = m.compact_slots();
  if (::kill(drainer, SIGCONT) != 0) fail("SIGCONT the drainer");
  report("attack", emitted, compact,
         {{"doomed", doomed}, {"ids_spoiled", ids_spoiled}, {"phase", "deterministic"}});
  wait_drained(m);

  // ---- random phase: two emitting threads, one thread writing random bytes over the table.
  std::atomic<bool> stop{false};
  std::thread attacker([&] {
    std::mt19937_64 arng(rng());
    auto* table = reinterpret_cast<unsigned char*>(m.view.strings());
    const size_t bytes = sizeof(spanring::StringEntry) * spanring::kStringTableEntries;
    while (!stop.load(std::memory_order_relaxed)) {
      const size_t at = arng() % bytes;
      table[at] = static_cast<unsigned char>(arng());
    }
  });
  std::vector<std::thread> workers;
  for (int w = 0; w < 2; ++w) {
    workers.emplace_back([&, w] {
      const json e = emit_names(w == 0 ? std::vector<std::string>{"str.b", "str.late"}
                                       : std::vector<std::string>{"str.fork", "str.a"},
                                count);
      report("attack", e, m.compact_slots(), {{"phase", "random"}});
    });
  }
  for (auto& t : workers) t.join();
  stop.store(true);
  attacker.join();
  return 0;
}

int role_full(int count) {
  Mapped m;
  if (!m.open()) fail("cannot map the segment");
  json emitted = emit_names({"str.a"}, count);  // interned before the fill: compact
  const uint64_t compact_before = m.compact_slots();
  uint32_t refused = 0;
  for (uint32_t n = 0; refused < 64 && n < 100000; ++n) {
    const std::string junk = "junk." + std::to_string(n);
    if (spanring::intern(m.view.strings(), junk.data(), static_cast<uint32_t>(junk.size()),
                         &m.view.header().strings_full) == 0)
      ++refused;
  }
  const json late = emit_names({"str.late"}, count);  // cannot be interned: ordinary records
  emitted["str.late"] = late["str.late"];
  const json st = stat_json();
  report("full", emitted, compact_before, {{"stat", st}});
  return 0;
}

int role_kill(int count) {
  const int status = run_self({"--role", "victim", "--count", std::to_string(count)},
                              "SPANRING_TEST_POINT=string_writing");
  const bool killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  Mapped m;
  if (!m.open()) fail("cannot map the segment");
  const std::vector<std::string> all = {"str.victim", "str.a", "str.b"};
  for (int c = 0; c < 2; ++c) {
    const int st = run_self({"--role", "emit", "--names", "str.victim,str.a,str.b", "--count",
                             std::to_string(count)});
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail("emit child failed");
  }
  const json emitted = emit_names(all, count);
  const json st = stat_json();
  report("kill", emitted, m.compact_slots(), {{"victim_killed", killed}, {"stat", st}});
  return 0;
}

int role_fork(int count) {
  Mapped m;
  if (!m.open()) fail("cannot map the segment");
  json emitted = emit_names({"str.fork", "str.a"}, count);
  report("fork-parent", emitted, m.compact_slots());
  std::vector<pid_t> kids;
  for (int c = 0; c < 2; ++c) {
    const pid_t pid = ::fork();
    if (pid < 0) fail("fork failed");
    if (pid == 0) {
      // Inherited ids: the child's first records use the parent's cached ids.
      json e = emit_names({"str.fork", "str.a", "str.b"}, count);
      report("fork-child", e, m.compact_slots());
      if (c == 1) {
        const int st = run_self({"--role", "emit", "--names", "str.fork,str.a,str.b",
                                 "--count", std::to_string(count)});
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  int failed = 0;
  for (const pid_t k : kids) {
    int st = 0;
    while (::waitpid(k, &st, 0) < 0) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ++failed;
  }
  if (failed != 0) fail("%d fork children failed", failed);
  json ids = json::object();
  for (const char* n : {"str.fork", "str.a", "str.b"}) ids[n] = find_entry(m, n);
  report("fork-ids", json::object(), 0, {{"ids", ids}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"string-table test emitter"};
  std::string role = "emit";
  std::string names = "str.a";
  int count = 200;
  app.add_option("--out", g_out)->required();
  app.add_option("--role", role);
  app.add_option("--names", names);
  app.add_option("--count", count);
  CLI11_PARSE(app, argc, argv);
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) fail("readlink /proc/self/exe");
  g_self.assign(self, static_cast<size_t>(n));

  if (role == "attack") return role_attack(count);
  if (role == "full") return role_full(count);
  if (role == "kill") return role_kill(count);
  if (role == "fork") return role_fork(count);
  if (role == "emit" || role == "victim") {
    Mapped m;
    const bool mapped = m.open();
    const json emitted = emit_names(split(names), count);
    report(role, emitted, mapped ? m.compact_slots() : 0);
    return 0;
  }
  fail("unknown role %s", role.c_str());
}
