// dying_emitter: many short traced processes that end in every way a process ends
// (test_mp_fault_dying.cpp).
//
//   dying_emitter --out FILE.jsonl --procs N --parallel P [--modes m1,m2,...]
//   dying_emitter --out FILE.jsonl --child MODE --index I            (started by the above)
//
// The coordinator never emits (it holds no ring). It starts N children (posix_spawn of itself),
// the i-th with mode modes[i % len], keeping at most P alive, and reaps them as they end.
// It paces the launches by the ring table, seen through a read-only mapping of the segment: a
// child is started only when a ring is free for it beyond the ones the live children that have
// not claimed theirs yet will take. So with fewer rings than children the run can only finish
// without no_ring drops if the rings of dead children are freed and reused. The coordinator
// measures, for every child, the time from reaping it to seeing its ring free, and at the end
// waits (up to 10 s) until every ring is free: a ring that stays taken is leaked.
//
// Child: emits K = 3 + I % 5 pairs of `die.work` (depth 0) around `die.work.step` (depth 1),
// attrs `i=<I>`; writes its JSON line; emits `die.last`; then, by mode:
//   return    returns from main             _exit    calls _exit(0)
//   raise     raise(SIGKILL)                kill     kill(getpid(), SIGKILL)
//   open      opens `die.open.outer` (inside Invocation 1000+I) with `die.open.inner`
//             nested in it (Invocation 2000+I, hid 0xd1e), writes its line after them and
//             SIGKILLs itself with both open (no `die.last` in this mode)
//   deep      opens 10 nested spans (more than the 8 a ring describes), the first two with
//             names longer than the 32 bytes a ring keeps, then dies like `open`
//   names     opens spans whose names are cut at 32 raw bytes in the ring: 40 plain bytes,
//             exactly 32 bytes, 16 plain bytes + 16 `%` + more (32 raw bytes that encode to
//             exactly 64), and 31 plain bytes + `~` + more; then dies like `open`
// Child JSON line: {"role": "child", "index", "mode", "pid", "tid", "counts": {name: n},
// "open": [{"depth", "name" (raw, as hex), "inv", "ts_min", "ts_max"}]}; "open" lists what was
// open at the kill, outermost first.
// Coordinator line: {"role": "coordinator", "procs", "rings", "rings_free_at_end",
// "bad_status": [...], "reap_to_free_ms": [...], "launch_waits", "launch_wait_ms"}.
#include "emitter_util.h"

#include <CLI/CLI.hpp>
#include "segment_peek.h"

#include <spanring/span.h>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

using fault_emitter::append_json_line;
using fault_emitter::fail;
using fault_emitter::gettid_now;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

std::string hex(const std::string& raw) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  for (const unsigned char c : raw) {
    s += kDigits[c >> 4];
    s += kDigits[c & 15];
  }
  return s;
}

// ---- child

struct OpenNote {
  int depth;
  std::string name;
  uint64_t inv;
  int64_t ts_min;
  int64_t ts_max;
};

json open_json(const std::vector<OpenNote>& open) {
  json a = json::array();
  for (const OpenNote& o : open) {
    a.push_back({{"depth", o.depth},
                 {"name_hex", hex(o.name)},
                 {"inv", o.inv},
                 {"ts_min", o.ts_min},
                 {"ts_max", o.ts_max}});
  }
  return a;
}

// Opens `names.size()` nested spans, each in its own Invocation (inv = base + depth), then
// writes the child's line and kills the process with all of them open.
[[noreturn]] void die_with_open(const std::string& out, json line,
                                const std::vector<std::string>& names, uint64_t inv_base) {
  std::vector<OpenNote> notes;
  std::vector<std::unique_ptr<spanring::Invocation>> invs;
  std::vector<std::unique_ptr<spanring::Span>> spans;
  for (size_t d = 0; d < names.size(); ++d) {
    invs.push_back(std::make_unique<spanring::Invocation>(inv_base + d, 0xd1e));
    const int64_t before = spanring::now_ns();
    spans.push_back(std::make_unique<spanring::Span>(names[d].c_str()));
    const int64_t after = spanring::now_ns();
    notes.push_back({static_cast<int>(d), names[d], inv_base + d, before, after});
  }
  line["open"] = open_json(notes);
  append_json_line(out, line);
  ::raise(SIGKILL);
  std::abort();  // unreachable
}

int child_main(const std::string& out, const std::string& mode, int index) {
  const int k = 3 + index % 5;
  for (int n = 0; n < k; ++n) {
    spanring::Span work{"die.work"};
    work.attr("i", index);
    spanring::Span step{"die.work.step"};
    step.attr("i", index);
  }
  json line = {{"role", "child"},
               {"index", index},
               {"mode", mode},
               {"pid", ::getpid()},
               {"tid", gettid_now()},
               {"counts", {{"die.work", k}, {"die.work.step", k}}},
               {"open", json::array()}};
  const uint64_t inv_base = 1000 + 100 * static_cast<uint64_t>(index);
  if (mode == "open") {
    die_with_open(out, line, {"die.open.outer", "die.open.inner"}, inv_base);
  }
  if (mode == "deep") {
    std::vector<std::string> names = {"die.deep.d0.a-name-longer-than-thirty-two-bytes",
                                      "die.deep.d1.another-name-longer-than-32-bytes"};
    for (int d = 2; d < 10; ++d) names.push_back("die.deep.d" + std::to_string(d));
    die_with_open(out, line, names, inv_base);
  }
  if (mode == "names") {
    die_with_open(out, line,
                  {"die.names.forty-bytes-of-plain-text-here",  // 40 bytes
                   "die.names.exactly-thirty-two-byt",          // 32 bytes
                   "die.names.pct.x" + std::string(1, '.') + std::string(16, '%') + "tail",
                   "die.names.tilde-at-byte-32-----~more"},  // a literal `~` as byte 32
                  inv_base);
  }
  line["counts"]["die.last"] = 1;
  append_json_line(out, line);
  { spanring::Span last{"die.last"}; }
  if (mode == "return") return 0;
  if (mode == "_exit") ::_exit(0);
  if (mode == "raise") ::raise(SIGKILL);
  if (mode == "kill") ::kill(::getpid(), SIGKILL);
  fail("unknown mode %s", mode.c_str());
}

// ---- coordinator

struct Child {
  int index;
  std::string mode;
};

struct Dead {
  pid_t pid;
  Clock::time_point reaped;
};

bool status_matches(const std::string& mode, int status) {
  if (mode == "return" || mode == "_exit") return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

int coordinator(const std::string& out, int procs, int parallel,
                const std::vector<std::string>& modes, const char* self) {
  fault_emitter::SegmentPeek seg;
  std::string why;
  if (!seg.open_from_environment(&why)) fail("cannot view the segment: %s", why.c_str());
  const uint32_t rings = seg.ring_count();

  std::map<pid_t, Child> alive;
  std::vector<Dead> dead;  // reaped, ring not yet seen free
  std::vector<double> reap_to_free_ms;
  json bad_status = json::array();
  uint64_t launch_waits = 0;
  double launch_wait_ms = 0;

  // One pass over the ring table: rings free, and which pids own a taken ring.
  const auto scan = [&](std::map<pid_t, int>* owners) {
    uint32_t free = 0;
    for (uint32_t i = 0; i < rings; ++i) {
      const fault_emitter::RingSnapshot r = seg.ring(i);
      if (r.state == spanring::kRingFree) {
        ++free;
      } else {
        ++(*owners)[static_cast<pid_t>(r.owner_pid)];
      }
    }
    return free;
  };
  const auto reap = [&] {
    for (;;) {
      int status = 0;
      const pid_t p = ::waitpid(-1, &status, WNOHANG);
      if (p <= 0) break;
      const auto it = alive.find(p);
      if (it == alive.end()) continue;
      if (!status_matches(it->second.mode, status)) {
        bad_status.push_back({{"index", it->second.index},
                              {"mode", it->second.mode},
                              {"status", status}});
      }
      dead.push_back({p, Clock::now()});
      alive.erase(it);
    }
  };
  const auto note_freed = [&](const std::map<pid_t, int>& owners) {
    const auto now = Clock::now();
    for (size_t i = 0; i < dead.size();) {
      if (owners.count(dead[i].pid) == 0) {
        reap_to_free_ms.push_back(
            std::chrono::duration<double, std::milli>(now - dead[i].reaped).count());
        dead[i] = dead.back();
        dead.pop_back();
      } else {
        ++i;
      }
    }
  };
  const auto pause = [] {
    const timespec ts{0, 200 * 1000};
    ::nanosleep(&ts, nullptr);
  };

  for (int index = 0; index < procs; ++index) {
    const Child c{index, modes[static_cast<size_t>(index) % modes.size()]};
    const auto wait_start = Clock::now();
    bool waited = false;
    for (;;) {
      reap();
      std::map<pid_t, int> owners;
      const uint32_t free = scan(&owners);
      note_freed(owners);
      uint32_t unclaimed = 0;
      for (const auto& [pid, child] : alive) unclaimed += owners.count(pid) == 0 ? 1 : 0;
      if (static_cast<int>(alive.size()) < parallel && free > unclaimed) break;
      waited = true;
      pause();
    }
    if (waited) {
      ++launch_waits;
      launch_wait_ms +=
          std::chrono::duration<double, std::milli>(Clock::now() - wait_start).count();
    }
    const std::string idx = std::to_string(index);
    std::vector<std::string> args = {self, "--out", out, "--child", c.mode, "--index", idx};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, self, nullptr, nullptr, argv.data(), environ);
    if (rc != 0) fail("posix_spawn: %s", std::strerror(rc));
    alive[pid] = c;
  }
  // Reap the rest, then wait for every ring to be free again.
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  uint32_t free = 0;
  for (;;) {
    reap();
    std::map<pid_t, int> owners;
    free = scan(&owners);
    note_freed(owners);
    if ((alive.empty() && free == rings) || Clock::now() > deadline) break;
    pause();
  }
  std::sort(reap_to_free_ms.begin(), reap_to_free_ms.end());
  json leaked = json::array();
  for (const Dead& d : dead) leaked.push_back(d.pid);
  append_json_line(out, json{{"role", "coordinator"},
                             {"pid", ::getpid()},
                             {"procs", procs},
                             {"parallel", parallel},
                             {"rings", rings},
                             {"rings_free_at_end", free},
                             {"still_alive", alive.size()},
                             {"rings_never_freed_of", leaked},
                             {"bad_status", bad_status},
                             {"reap_to_free_ms", reap_to_free_ms},
                             {"launch_waits", launch_waits},
                             {"launch_wait_ms", launch_wait_ms}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  std::string child;
  int index = 0;
  int procs = 200;
  int parallel = 20;
  std::string mode_list = "return,_exit,raise,kill,open,deep";
  CLI::App app{"dying_emitter: processes that die in every way, with spans open"};
  app.add_option("--out", out, "JSON lines file")->required();
  app.add_option("--child", child, "run as the child that dies this way (set by the coordinator)");
  app.add_option("--index", index, "the child's index");
  app.add_option("--procs", procs, "children in all");
  app.add_option("--parallel", parallel, "children alive at a time");
  app.add_option("--modes", mode_list, "comma-separated ways to die, used in turn");
  CLI11_PARSE(app, argc, argv);
  if (!child.empty()) return child_main(out, child, index);
  std::vector<std::string> modes;
  std::istringstream list(mode_list);
  for (std::string m; std::getline(list, m, ',');) modes.push_back(m);
  if (modes.empty() || procs <= 0 || parallel <= 0) fail("bad arguments");
  char self[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) fail("readlink /proc/self/exe: %s", std::strerror(errno));
  self[len] = '\0';
  return coordinator(out, procs, parallel, modes, self);
}
