// leader_emitter: the main thread leaves with pthread_exit while other threads keep tracing
// (test_mp_fault_leader_exit.cpp). The process lives on until its last thread exits; meanwhile
// /proc/<pid>/stat shows the thread-group leader as a zombie (state Z).
//
//   leader_emitter --out FILE.jsonl [--workers W] [--spans N] [--pause-ms P] [--intruder 1]
//
// main emits 20 `leader.main` spans, starts W workers and calls pthread_exit. Each worker
// holds a `leader.worker.hold` span open while it emits N `leader.worker` spans (attrs
// `t=<worker> k=<n>`), P ms apart (default 60 x 10 ms: several of the drainer's 100 ms owner
// checks happen while it runs). Through a read-only view of the segment each worker watches its
// own ring and notes when it stops being its own (freed or given to another owner) while it is
// still alive and tracing.
// --intruder 1: main emits nothing (it never takes a ring), one worker only; half-way through
// its spans, that worker starts a thread that emits 50 `leader.intruder` records with
// spanring::emit (counting the ones it says were stored) and joins it. Run with --rings 1: the
// worker holds the only ring throughout, so every intruder record must be a no_ring drop.
// The last worker to finish writes the JSON line:
// {"pid", "counts": {name: n}, "intruder_stored",
//  "tids": {"leader.main": tid, "leader.intruder": tid, "worker<i>": tid},
//  "ring_lost_while_alive": [{"worker", "tid", "after_ms", "state", "owner_tid"}]}.
#include "emitter_util.h"

#include <CLI/CLI.hpp>
#include "segment_peek.h"

#include <spanring/span.h>

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using fault_emitter::append_json_line;
using fault_emitter::fail;
using fault_emitter::gettid_now;
using nlohmann::json;

namespace {

struct Shared {
  std::string out;
  bool intruder = false;
  uint64_t intruder_stored = 0;
  pid_t intruder_tid = 0;
  int intruder_spans = 50;
  int workers = 2;
  int spans = 60;
  int pause_ms = 10;
  fault_emitter::SegmentPeek seg;
  pid_t main_tid = 0;
  std::atomic<int> done{0};
  std::mutex mu;  // guards the fields below
  std::vector<pid_t> tids;
  json lost = json::array();
};

Shared* g_shared = nullptr;

void worker(int index) {
  Shared& sh = *g_shared;
  const pid_t tid = gettid_now();
  const uint32_t pid = static_cast<uint32_t>(::getpid());
  const auto start = std::chrono::steady_clock::now();
  bool lost = false;
  {
    spanring::Span hold{"leader.worker.hold"};  // claims this thread's ring
    hold.attr("t", index);
    int64_t ring = -1;
    uint32_t generation = 0;
    for (uint32_t i = 0; i < sh.seg.ring_count(); ++i) {
      const auto r = sh.seg.ring(i);
      if (r.state == spanring::kRingActive && r.owner_pid == pid &&
          r.owner_tid == static_cast<uint32_t>(tid)) {
        ring = i;
        generation = r.generation;
      }
    }
    if (ring < 0) fail("worker %d: no ring of mine in the segment", index);
    std::thread intruder;
    for (int k = 0; k < sh.spans; ++k) {
      if (sh.intruder && index == 0 && k == sh.spans / 2) {
        // Half-way, while this worker still holds its ring and a span in it: a new thread
        // emits. With one ring in the segment it must find none free.
        intruder = std::thread([&sh] {
          sh.intruder_tid = gettid_now();
          for (int n = 0; n < sh.intruder_spans; ++n) {
            sh.intruder_stored +=
                spanring::emit("leader.intruder", spanring::now_ns(), 1, "x=1") ? 1 : 0;
          }
        });
        intruder.join();
      }
      {
        spanring::Span s{"leader.worker"};
        s.attr("t", index).attr("k", k);
      }
      const auto r = sh.seg.ring(static_cast<uint32_t>(ring));
      if (!lost && (r.state != spanring::kRingActive || r.generation != generation ||
                    r.owner_tid != static_cast<uint32_t>(tid))) {
        lost = true;
        const double ms = std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - start).count();
        std::lock_guard<std::mutex> g(sh.mu);
        sh.lost.push_back({{"worker", index},
                           {"tid", tid},
                           {"after_ms", ms},
                           {"state", r.state},
                           {"owner_tid", r.owner_tid}});
      }
      const timespec ts{0, static_cast<long>(sh.pause_ms) * 1000000L};
      ::nanosleep(&ts, nullptr);
    }
  }
  {
    std::lock_guard<std::mutex> g(sh.mu);
    sh.tids[static_cast<size_t>(index)] = tid;
  }
  if (sh.done.fetch_add(1) + 1 == sh.workers) {
    std::lock_guard<std::mutex> g(sh.mu);
    json tids = {{"leader.main", sh.main_tid}, {"leader.intruder", sh.intruder_tid}};
    for (int i = 0; i < sh.workers; ++i) tids["worker" + std::to_string(i)] = sh.tids[i];
    append_json_line(sh.out, json{{"pid", ::getpid()},
                                  {"counts",
                                   {{"leader.main", sh.intruder ? 0 : 20},
                                    {"leader.worker", sh.workers * sh.spans},
                                    {"leader.worker.hold", sh.workers},
                                    {"leader.intruder", sh.intruder ? sh.intruder_spans : 0}}},
                                  {"intruder_stored", sh.intruder_stored},
                                  {"tids", tids},
                                  {"ring_lost_while_alive", sh.lost}});
  }
}

}  // namespace

int main(int argc, char** argv) {
  static Shared sh;  // outlives main's pthread_exit
  g_shared = &sh;
  CLI::App app{"leader_emitter: the main thread leaves while the others trace on"};
  app.add_option("--out", sh.out, "JSON lines file")->required();
  app.add_option("--workers", sh.workers, "worker threads")->check(CLI::PositiveNumber);
  app.add_option("--spans", sh.spans, "spans per worker")->check(CLI::PositiveNumber);
  app.add_option("--pause-ms", sh.pause_ms, "pause between a worker's spans, ms");
  app.add_option("--intruder", sh.intruder, "1: one worker, which starts a ringless thread");
  CLI11_PARSE(app, argc, argv);
  if (sh.intruder) sh.workers = 1;
  std::string why;
  if (!sh.seg.open_from_environment(&why)) fail("cannot view the segment: %s", why.c_str());
  sh.main_tid = gettid_now();
  sh.tids.resize(static_cast<size_t>(sh.workers));
  for (int i = 0; i < (sh.intruder ? 0 : 20); ++i) {
    spanring::Span s{"leader.main"};
    s.attr("i", i);
  }
  for (int i = 0; i < sh.workers; ++i) std::thread(worker, i).detach();
  // The process goes on until the last worker returns; its exit status is then 0.
  pthread_exit(nullptr);
}
