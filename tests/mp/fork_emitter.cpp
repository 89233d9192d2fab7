// fork_emitter: a traced program for test_mp_fork.cpp that forks from a non-main thread while
// other threads are emitting.
//
//   fork_emitter --out FILE.json [--children K] [--child-spans N] [--parent-cap M] [--tight 1]
//
// Parent: 4 threads emit `fork.parent.t<i>` spans with attribute `seq=<n>` (n = 0, 1, ... per
// thread). Thread t0 is also the forking thread: once every thread has emitted kWarmup spans
// (so t0 holds a claimed ring that a child inherits in its thread-local state), t0 forks K
// children one after another while all four keep emitting, then emits until every child is
// reaped. Each thread stops at M spans at most: with 2 slots per record (see below) M = 1500
// uses 3000 of a default ring's 65,536 slots, so the parent cannot drop a record however slowly
// the drainer runs (the test wants zero drops at default sizes, deterministically).
// Child: the forking thread (now the child's only thread, tid == pid) emits N `fork.child`
// spans, then 2 new threads emit N each; all with `seq=<n>` per thread; then exit(0).
// Finally the parent writes what it emitted (every Span constructed, stored or not) as JSON:
//   {"parent_pid": P, "child_pids": [...], "child_threads": 3, "child_spans_per_thread": N,
//    "counts": {"fork.parent.t0": n0, ..., "fork.child": K*3*N},
//    "parent_tids": {"fork.parent.t0": tid0, ...}}
// --tight 1: no pauses at all (the stress variant: rings overflow and drops must be accounted).
// Exit status 0 when every child exited 0 and the file was written, else 1 (CLI11's code on
// bad usage).
//
// Record size: name `fork.parent.t0` (14 bytes) + `seq=1499` (8 bytes) = 22 raw bytes, more
// than the 12 inline payload bytes, so 2 slots (segment_layout.h, record_slots()).
#include <spanring/span.h>

#include <CLI/CLI.hpp>

#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kParentThreads = 4;
constexpr int kChildThreads = 3;   // the forking thread + 2 new ones
constexpr uint64_t kWarmup = 100;  // spans per parent thread before the first fork
constexpr const char* kParentNames[kParentThreads] = {"fork.parent.t0", "fork.parent.t1",
                                                      "fork.parent.t2", "fork.parent.t3"};
constexpr const char* kChildName = "fork.child";

struct Options {
  std::string out;
  int children = 3;
  uint64_t child_spans = 1000;
  uint64_t parent_cap = 1500;
  bool tight = false;
};

bool g_tight = false;  // set once in main() before any thread starts

pid_t gettid_now() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// Spaces a parent thread's spans out (~20 us apart, up to M spans = tens of ms) so that they
// overlap the forks and the children's lives rather than all landing before the first fork;
// correctness does not depend on it, only how much of the run overlaps.
void pause_between_spans() {
  if (g_tight) return;
  const struct timespec ts = {0, 20 * 1000};
  ::nanosleep(&ts, nullptr);
}

void emit_span(const char* name, uint64_t seq) {
  spanring::Span span{name};
  span.attr("seq", seq);
}

// The child: its only thread is the one that forked.
[[noreturn]] void child_main(const Options& o) {
  // Paced like the parent's threads, so that the parent keeps emitting through the children's
  // lives (the timer slack is inherited by the child and its new threads).
  const auto emit_n = [&o] {
    for (uint64_t n = 0; n < o.child_spans; ++n) {
      emit_span(kChildName, n);
      if (n % 4 == 3) pause_between_spans();
    }
  };
  emit_n();
  std::vector<std::thread> threads;
  for (int i = 1; i < kChildThreads; ++i) threads.emplace_back(emit_n);
  for (auto& t : threads) t.join();
  // _exit: a child forked from a multi-threaded parent must not run the parent's exit handlers
  // or static destructors, and the parent's heap objects it inherited are not its own to free
  // (LeakSanitizer would report them in the ASan configuration).
  ::_exit(0);
}

struct Shared {
  std::atomic<uint64_t> warmed{0};  // parent threads past their warm-up
  std::atomic<bool> stop{false};    // set by t0 once every child is reaped
  uint64_t counts[kParentThreads] = {};
  pid_t tids[kParentThreads] = {};
  std::vector<pid_t> child_pids;
  std::string error;  // written by t0 only, read after join
};

void parent_thread(int index, const Options& o, Shared& sh) {
  sh.tids[index] = gettid_now();
  // The default 50 us timer slack would stretch every pause to ~70 us.
  ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  uint64_t n = 0;
  for (; n < kWarmup && n < o.parent_cap; ++n) emit_span(kParentNames[index], n);
  sh.warmed.fetch_add(1, std::memory_order_acq_rel);

  if (index == 0) {
    // Forking thread: wait until every thread is emitting, then fork while they do.
    while (sh.warmed.load(std::memory_order_acquire) < kParentThreads) pause_between_spans();
    for (int k = 0; k < o.children; ++k) {
      const pid_t pid = ::fork();
      if (pid < 0) {
        sh.error = std::string("fork: ") + std::strerror(errno);
        break;
      }
      if (pid == 0) child_main(o);
      sh.child_pids.push_back(pid);
      if (n < o.parent_cap) emit_span(kParentNames[index], n++);
    }
    size_t reaped = 0;
    while (reaped < sh.child_pids.size()) {
      // Emit while children run; once at the cap, just wait.
      int status = 0;
      const pid_t w = ::waitpid(-1, &status, n < o.parent_cap ? WNOHANG : 0);
      if (w > 0) {
        ++reaped;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
          sh.error +=
              "child " + std::to_string(w) + " exited with status " + std::to_string(status) + "; ";
        }
        continue;
      }
      if (w < 0 && errno != EINTR) {
        sh.error += std::string("waitpid: ") + std::strerror(errno) + "; ";
        break;
      }
      emit_span(kParentNames[index], n++);
      pause_between_spans();
    }
    sh.stop.store(true, std::memory_order_release);
  } else {
    while (!sh.stop.load(std::memory_order_acquire) && n < o.parent_cap) {
      emit_span(kParentNames[index], n++);
      pause_between_spans();
    }
  }
  sh.counts[index] = n;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"fork_emitter: fork from a non-main thread while others emit"};
  app.add_option("--out", o.out, "JSON file (one line)")->required();
  app.add_option("--children", o.children, "children to fork")->check(CLI::PositiveNumber);
  app.add_option("--child-spans", o.child_spans, "spans per child thread");
  app.add_option("--parent-cap", o.parent_cap, "at most this many spans per parent thread");
  app.add_option("--tight", o.tight, "1: no pause between spans");
  CLI11_PARSE(app, argc, argv);
  g_tight = o.tight;
  Shared sh;
  std::vector<std::thread> threads;
  for (int i = 0; i < kParentThreads; ++i) {
    threads.emplace_back(parent_thread, i, std::cref(o), std::ref(sh));
  }
  for (auto& t : threads) t.join();

  // The JSON is written by hand: the emitter needs nothing but libspanring.
  std::string json = "{\"parent_pid\": " + std::to_string(::getpid()) + ", \"child_pids\": [";
  for (size_t i = 0; i < sh.child_pids.size(); ++i) {
    json += (i ? ", " : "") + std::to_string(sh.child_pids[i]);
  }
  json += "], \"child_threads\": " + std::to_string(kChildThreads) +
          ", \"child_spans_per_thread\": " + std::to_string(o.child_spans) + ", \"counts\": {";
  for (int i = 0; i < kParentThreads; ++i) {
    json += "\"" + std::string(kParentNames[i]) + "\": " + std::to_string(sh.counts[i]) + ", ";
  }
  json += "\"" + std::string(kChildName) +
          "\": " + std::to_string(sh.child_pids.size() * kChildThreads * o.child_spans) +
          "}, \"parent_tids\": {";
  for (int i = 0; i < kParentThreads; ++i) {
    json +=
        (i ? ", \"" : "\"") + std::string(kParentNames[i]) + "\": " + std::to_string(sh.tids[i]);
  }
  json += "}}\n";

  FILE* f = std::fopen(o.out.c_str(), "w");
  if (f == nullptr || std::fputs(json.c_str(), f) < 0 || std::fclose(f) != 0) {
    std::fprintf(stderr, "fork_emitter: cannot write %s: %s\n", o.out.c_str(),
                 std::strerror(errno));
    return 1;
  }
  if (!sh.error.empty() || static_cast<int>(sh.child_pids.size()) != o.children) {
    std::fprintf(stderr, "fork_emitter: %s\n", sh.error.c_str());
    return 1;
  }
  return 0;
}
