// churn_emitter: many short-lived threads, or more live threads than rings
// (test_mp_fault_thread_churn.cpp).
//
//   churn_emitter --mode churn --out FILE.jsonl --threads N --alive A
//     Starts N threads, at most A alive at a time (thread i reuses the slot of thread i - A,
//     joining it first). Thread i emits spans_of(i) = 1 + splitmix64(i) % 100 records named
//     `churn.n<i % 8>`, alternately a Span (attrs `t=<i> a=s`) and spanring::emit (attrs
//     `t=<i> a=e`; emit() returns whether the record was stored, counted per thread). Every
//     record of a thread fits its ring many times over (at most 100 records of 2 slots), so a
//     thread either has a ring and loses nothing, or finds none free and loses everything
//     (reason no_ring: it retries only after 1024 records).
//   churn_emitter --mode noring --out FILE.jsonl --threads T --spans M
//     T threads start together; each opens a Span `noring.hold` (its first record-to-be, which
//     claims a ring) and waits until all T hold theirs, then emits M `noring.emit` records
//     (attrs `t=<i>`) and closes the span. Run with fewer rings than T: the threads beyond the
//     ring count have no ring, and their M + 1 records each are dropped (reason no_ring).
//
// JSON line: {"mode", "pid", "threads", "per_thread": [records emitted by thread i],
// "stored_emits": [emit() calls that returned true, per thread], "tids": [tid of thread i],
// "counts": {name: records emitted}}.
#include "emitter_util.h"

#include <CLI/CLI.hpp>

#include <spanring/span.h>

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

using fault_emitter::append_json_line;
using fault_emitter::gettid_now;
using nlohmann::json;

namespace {

constexpr const char* kNames[8] = {"churn.n0", "churn.n1", "churn.n2", "churn.n3",
                                   "churn.n4", "churn.n5", "churn.n6", "churn.n7"};

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t spans_of(uint64_t i) { return 1 + splitmix64(i) % 100; }

struct PerThread {
  std::vector<uint64_t> emitted;
  std::vector<uint64_t> stored_emits;
  std::vector<int64_t> tids;
  explicit PerThread(size_t n) : emitted(n), stored_emits(n), tids(n) {}
};

void churn_thread(uint64_t i, PerThread& pt) {
  pt.tids[i] = gettid_now();
  const char* name = kNames[i % 8];
  const std::string t = std::to_string(i);
  const std::string attrs_e = "t=" + t + " a=e";
  const uint64_t n = spans_of(i);
  uint64_t stored = 0;
  for (uint64_t k = 0; k < n; ++k) {
    if (k % 2 == 0) {
      spanring::Span s{name};
      s.attr("t", i).attr("a", "s");
    } else {
      const int64_t now = spanring::now_ns();
      stored += spanring::emit(name, now, 5, attrs_e.c_str()) ? 1 : 0;
    }
  }
  pt.emitted[i] = n;
  pt.stored_emits[i] = stored;
}

// Spins until `count` reaches `target` (threads of one test, seconds at most).
void arrive_and_wait(std::atomic<uint64_t>& count, uint64_t target) {
  count.fetch_add(1, std::memory_order_acq_rel);
  while (count.load(std::memory_order_acquire) < target) sched_yield();
}

void noring_thread(uint64_t i, uint64_t m, uint64_t threads, std::atomic<uint64_t>& started,
                   std::atomic<uint64_t>& holding, PerThread& pt) {
  pt.tids[i] = gettid_now();
  const std::string attrs = "t=" + std::to_string(i);
  arrive_and_wait(started, threads);
  uint64_t stored = 0;
  {
    spanring::Span hold{"noring.hold"};
    hold.attr("t", i);
    arrive_and_wait(holding, threads);
    for (uint64_t k = 0; k < m; ++k) {
      stored += spanring::emit("noring.emit", spanring::now_ns(), 1, attrs.c_str()) ? 1 : 0;
    }
  }
  pt.emitted[i] = m + 1;
  pt.stored_emits[i] = stored;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  std::string mode;
  uint64_t threads = 0;
  uint64_t alive = 64;
  uint64_t m = 100;
  CLI::App app{"churn_emitter: short-lived threads, or more threads than rings"};
  app.add_option("--out", out, "JSON lines file")->required();
  app.add_option("--mode", mode, "churn or noring")
      ->required()
      ->check(CLI::IsMember({"churn", "noring"}));
  app.add_option("--threads", threads, "threads in all")->required()->check(CLI::PositiveNumber);
  app.add_option("--alive", alive, "churn: threads alive at a time");
  app.add_option("--spans", m, "noring: records per thread besides its held span");
  CLI11_PARSE(app, argc, argv);
  PerThread pt(threads);
  json counts = json::object();
  if (mode == "churn") {
    std::vector<std::thread> slots(alive);
    for (uint64_t i = 0; i < threads; ++i) {
      std::thread& slot = slots[i % alive];
      if (slot.joinable()) slot.join();
      slot = std::thread(churn_thread, i, std::ref(pt));
    }
    for (auto& s : slots) {
      if (s.joinable()) s.join();
    }
    std::vector<uint64_t> by_name(8);
    for (uint64_t i = 0; i < threads; ++i) by_name[i % 8] += pt.emitted[i];
    for (int k = 0; k < 8; ++k) counts[kNames[k]] = by_name[k];
  } else {
    std::atomic<uint64_t> started{0};
    std::atomic<uint64_t> holding{0};
    std::vector<std::thread> ts;
    for (uint64_t i = 0; i < threads; ++i) {
      ts.emplace_back(noring_thread, i, m, threads, std::ref(started), std::ref(holding),
                      std::ref(pt));
    }
    for (auto& t : ts) t.join();
    counts["noring.hold"] = threads;
    counts["noring.emit"] = threads * m;
  }
  append_json_line(out, json{{"mode", mode},
                             {"pid", ::getpid()},
                             {"threads", threads},
                             {"per_thread", pt.emitted},
                             {"stored_emits", pt.stored_emits},
                             {"tids", pt.tids},
                             {"counts", counts}});
  return 0;
}
