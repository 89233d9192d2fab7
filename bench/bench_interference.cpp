// bench_interference: does a producer feel the drainer? The p50 per record of a batch of 20
// `Span`s (and of 20 `emit`s) while the real drainer (`spanring drain`, on the other CPU) runs,
// over the same while that drainer is stopped (SIGSTOP), for 1 and for 16 producer threads.
// The drainer's reads are what differ: it takes the lines of each ring's head and of the slots
// it reads to its own core, and the producer's next store to one of them must take it back.
//
// Method: one segment, one drainer process, one binary. Phases alternate, live then stopped
// then live..., `--rounds` times each (the order flips every round), so that drifts of a noisy
// VM land on both. In a phase every producer thread (all pinned to --cpu-producer) writes
// `--batches` batches of 20 records, a `Span` batch and an `emit` batch in turn, each timed with
// rdtsc and divided by 20, with a pause (--pause-us, a sleep) after each batch. A stopped phase
// must not fill a ring (a dropped record is cheaper than a written one): the rings hold
// --ring-records slots, and the run fails when any record was dropped. After a stopped phase
// the drainer is resumed and given --settle-ms to catch up before the next phase.
//
// The record: the 16-byte literal name and 4 integer attributes of bench_record's
// spanring_span arm (one compact slot), and its emit (a literal name and literal attribute
// text, caller-supplied ts/dur: one compact slot).
#include "bench_util.h"

#include <spanring/segment.h>
#include <spanring/span.h>
#include <spanring/spanring.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#ifndef SPANRING_EXE_DEFAULT
#define SPANRING_EXE_DEFAULT "spanring"
#endif

namespace {

constexpr int kBatch = 20;  // records per timed sample, as in bench_record
constexpr const char kName[] = "bench.span.rec16";
constexpr const char kAttrsText[] = "run_id=7 task_slot=42 worker_id=1 dispatch_id=1234567";

__attribute__((noinline)) void batch_span(uint64_t& n) {
  for (int i = 0; i < kBatch; ++i, ++n) {
    spanring::Span s{kName};
    s.attr("run_id", 7 + (n & 1))
        .attr("task_slot", 10 + n % 54)
        .attr("worker_id", n & 1)
        .attr("dispatch_id", 1000000 + n % 9000000);
  }
}

__attribute__((noinline)) void batch_emit(uint64_t& n) {
  for (int i = 0; i < kBatch; ++i, ++n)
    spanring::emit(kName, static_cast<int64_t>(1'000'000'000 + n * 1000), 500, kAttrsText);
}

struct Options {
  std::string threads = "1,16";
  int rounds = 10;
  int batches = 200;
  int64_t pause_us = 200;
  int settle_ms = 100;
  uint32_t ring_records = 65536;
  std::string spanring_exe = SPANRING_EXE_DEFAULT;
  int cpu_producer = 0;
  int cpu_consumer = 1;
  std::string json_path;
};

// Samples (ns per record) of one arm in one kind of phase.
struct Samples {
  std::vector<double> live, stopped;
};

struct Phase {
  std::atomic<int> number{0};  // producers start phase k when number becomes k
  std::atomic<int> done{0};    // producers finished with the current phase
  std::atomic<bool> quit{false};
};

void producer(const Options& o, Phase& ph, double ns_per_tick, std::vector<double>& span_out,
              std::vector<double>& emit_out, std::vector<int>& kinds) {
  bench::pin_this_thread(o.cpu_producer);
  uint64_t n = 0;
  batch_span(n);  // the thread's first record claims its ring, outside any phase
  int seen = 0;
  for (;;) {
    int k;
    while ((k = ph.number.load(std::memory_order_acquire)) == seen) {
      if (ph.quit.load(std::memory_order_acquire)) return;
      bench::sleep_us(200);
    }
    seen = k;
    for (int b = 0; b < o.batches; ++b) {
      uint64_t t0 = bench::tsc_begin();
      batch_span(n);
      uint64_t t1 = bench::tsc_end();
      span_out.push_back(static_cast<double>(t1 - t0) * ns_per_tick / kBatch);
      bench::sleep_us(o.pause_us);
      t0 = bench::tsc_begin();
      batch_emit(n);
      t1 = bench::tsc_end();
      emit_out.push_back(static_cast<double>(t1 - t0) * ns_per_tick / kBatch);
      kinds.push_back(k);
      bench::sleep_us(o.pause_us);
    }
    ph.done.fetch_add(1, std::memory_order_acq_rel);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"bench_interference: producer p50 per record with the drainer running / stopped"};
  app.add_option("--threads", o.threads, "comma-separated producer thread counts")
      ->capture_default_str();
  app.add_option("--rounds", o.rounds, "live and stopped phases of each thread count")
      ->capture_default_str();
  app.add_option("--batches", o.batches, "Span batches (and as many emit batches) per thread "
                 "per phase")->capture_default_str();
  app.add_option("--pause-us", o.pause_us, "sleep after each batch")->capture_default_str();
  app.add_option("--settle-ms", o.settle_ms, "the drainer's time to catch up after a stopped "
                 "phase")->capture_default_str();
  app.add_option("--ring-records", o.ring_records, "slots per ring: a stopped phase must fit")
      ->capture_default_str();
  app.add_option("--spanring", o.spanring_exe, "the spanring CLI (runs `spanring drain`)")
      ->capture_default_str();
  app.add_option("--cpu-producer", o.cpu_producer)->capture_default_str();
  app.add_option("--cpu-consumer", o.cpu_consumer)->capture_default_str();
  app.add_option("--json", o.json_path, "write the results as JSON");
  CLI11_PARSE(app, argc, argv);

  std::vector<int> counts;
  for (size_t at = 0; at < o.threads.size();) {
    const size_t comma = o.threads.find(',', at);
    counts.push_back(std::stoi(o.threads.substr(at, comma - at)));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  // Every record of a stopped phase must fit: 2 records per batch pair, one slot each.
  if (uint64_t{2} * kBatch * static_cast<uint64_t>(o.batches) + 1 > o.ring_records) {
    std::fprintf(stderr, "bench_interference: --batches %d does not fit a ring of %u slots\n",
                 o.batches, o.ring_records);
    return 2;
  }

  const std::string tmp = bench::make_temp_dir("bench-interference");
  const std::string name = "spanring-bench-intf-" + std::to_string(::getpid());
  spanring::SegmentOptions so;
  so.ring_count = 64;
  so.ring_capacity = o.ring_records;
  spanring::Segment seg = spanring::Segment::create(name, so);
  bench::DrainerProcess drainer;
  if (!drainer.start(o.spanring_exe, name, tmp + "/intf.strace", o.cpu_consumer,
                     tmp + "/drainer.stderr")) {
    std::fprintf(stderr, "bench_interference: cannot start %s\n", o.spanring_exe.c_str());
    return 1;
  }
  bench::sleep_us(200000);  // let the drainer take the segment
  if (!spanring::attach(name.c_str())) {
    std::fprintf(stderr, "bench_interference: cannot attach to %s\n", name.c_str());
    return 1;
  }
  const bench::TscPoint a = bench::tsc_point();
  bench::sleep_us(100000);
  const bench::TscPoint b = bench::tsc_point();
  const double ns_per_tick = bench::tsc_scale(a, b).ns_per_tick;

  nlohmann::json results = nlohmann::json::array();
  std::printf("### bench_interference: producer p50 per record, drainer running / stopped\n\n");
  std::printf("CPU: %s; producers on CPU %d, drainer on CPU %d; %d rounds of %d batches of %d "
              "per thread and arm, %lld us pauses\n\n",
              bench::cpu_model().c_str(), o.cpu_producer, o.cpu_consumer, o.rounds, o.batches,
              kBatch, static_cast<long long>(o.pause_us));
  std::printf("| threads | arm | p50 live | p50 stopped | live / stopped | p99 live | p99 "
              "stopped |\n|---:|---|---:|---:|---:|---:|---:|\n");
  for (const int threads : counts) {
    Phase ph;
    std::vector<std::vector<double>> span_s(threads), emit_s(threads);
    std::vector<std::vector<int>> kinds(threads);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t)
      ts.emplace_back(producer, std::cref(o), std::ref(ph), ns_per_tick, std::ref(span_s[t]),
                      std::ref(emit_s[t]), std::ref(kinds[t]));
    bench::sleep_us(100000);
    // Phase k (from 1) is live or stopped as stopped_phase[k] says: pairs of phases, the
    // order flipping every round.
    std::vector<bool> stopped_phase{false};
    for (int r = 0; r < 2 * o.rounds; ++r) {
      const bool stop = (r % 2 == 0) == ((r / 2) % 2 == 0);
      stopped_phase.push_back(stop);
      if (stop) ::kill(drainer.pid, SIGSTOP);
      ph.done.store(0, std::memory_order_relaxed);
      ph.number.store(r + 1, std::memory_order_release);
      while (ph.done.load(std::memory_order_acquire) < threads) bench::sleep_us(1000);
      if (stop) ::kill(drainer.pid, SIGCONT);
      bench::sleep_us(int64_t{o.settle_ms} * 1000);
    }
    ph.quit.store(true, std::memory_order_release);
    for (auto& t : ts) t.join();
    Samples span, emit;
    for (int t = 0; t < threads; ++t)
      for (size_t i = 0; i < kinds[t].size(); ++i) {
        const bool stop = stopped_phase[static_cast<size_t>(kinds[t][i])];
        (stop ? span.stopped : span.live).push_back(span_s[t][i]);
        (stop ? emit.stopped : emit.live).push_back(emit_s[t][i]);
      }
    for (auto [arm, s] : {std::pair{"Span", &span}, std::pair{"emit", &emit}}) {
      std::sort(s->live.begin(), s->live.end());
      std::sort(s->stopped.begin(), s->stopped.end());
      const double l50 = bench::percentile(s->live, 50), s50 = bench::percentile(s->stopped, 50);
      const double l99 = bench::percentile(s->live, 99), s99 = bench::percentile(s->stopped, 99);
      std::printf("| %d | %s | %.1f ns | %.1f ns | %.3f | %.1f ns | %.1f ns |\n", threads, arm,
                  l50, s50, l50 / s50, l99, s99);
      results.push_back({{"threads", threads}, {"arm", arm}, {"p50_live_ns", l50},
                         {"p50_stopped_ns", s50}, {"ratio", l50 / s50}, {"p99_live_ns", l99},
                         {"p99_stopped_ns", s99}});
    }
  }
  const bool ok = drainer.stop();
  const long long written = drainer.summary_field("written");
  const long long dropped = drainer.summary_field("dropped");
  std::printf("\nThe drainer wrote %lld records, dropped %lld%s.\n", written, dropped,
              ok ? "" : " (it did not exit cleanly)");
  spanring::Segment::remove(name);
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path);
    out << nlohmann::json{{"results", results}, {"written", written}, {"dropped", dropped}}.dump(1)
        << "\n";
  }
  std::filesystem::remove_all(tmp);
  // A dropped record is cheaper than a written one: the comparison does not hold then.
  return ok && dropped == 0 ? 0 : 1;
}
