// fault_emitter: the traced program of the fault tests. Threads emit `fault.t<i>` spans with the
// attribute `seq=<n>` (n = 0, 1, ... per thread, one per emit() call, stored or not) and publish
// their progress in a shared report page (fault_report.h) that the test reads while it stops,
// kills or corrupts the drainer.
//
//   fault_emitter [--threads N] [--report FILE] [--out FILE.json] [--count N] [--seconds S]
//                 [--until-stop 1] [--pace-us U] [--pace-every K] [--victim K]
//                 [--victim-busy 1] [--rss 1] [--leak BYTES]
//
// Each thread stops at the first of: N records (--count), S seconds after start (--seconds),
// the report's stop flag (--until-stop 1). --pace-us U sleeps U us after every K-th record
// (default K = 1); without it the threads emit flat out.
// --victim K: thread 0 emits K records, sets victim_ready in the report, then idles (sleeps
//   1 ms at a time) until it must stop; with --victim-busy 1 it keeps emitting (paced) instead.
//   The corrupt-segment test feeds garbage into this thread's ring.
// --rss 1: a monitor thread (not emitting) copies the resident set size from /proc/self/statm
//   into the report every 2 ms.
// --leak BYTES: allocates and touches BYTES per record (the negative control of the RSS check).
//
// At the end it writes (with --out) {"pid": P, "enabled": 0|1, "segment": "...",
//   "threads": [{"name": "fault.t0", "tid": T, "emitted": E, "stored": S}, ...]}
// and without --out prints `fault_emitter: enabled=E threads=N emitted=X stored=Y` on stdout.
// Exit 0, CLI11's code on bad usage, 1 when the report or JSON file cannot be written.
#include "fault_report.h"

#include <CLI/CLI.hpp>

#include <spanring/span.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Options {
  uint32_t threads = 2;
  std::string report;
  std::string out;
  uint64_t count = 0;       // 0: no limit
  double seconds = 0;       // 0: no limit
  bool until_stop = false;
  uint64_t pace_us = 0;
  uint64_t pace_every = 1;
  uint64_t victim = 0;      // 0: no victim thread
  bool victim_busy = false;
  bool rss = false;
  uint64_t leak = 0;
};

fault::Report g_local{};
fault::Report* g_report = &g_local;
std::chrono::steady_clock::time_point g_deadline = std::chrono::steady_clock::time_point::max();
std::atomic<uint32_t> g_started{0};
std::atomic<bool> g_monitor_stop{false};

void sleep_us(uint64_t us) {
  const struct timespec ts = {static_cast<time_t>(us / 1000000),
                              static_cast<long>(us % 1000000) * 1000};
  ::nanosleep(&ts, nullptr);
}

bool must_stop(const Options& o, uint64_t n) {
  if (o.count != 0 && n >= o.count) return true;
  if (o.until_stop && g_report->stop.load(std::memory_order_relaxed) != 0) return true;
  return g_deadline != std::chrono::steady_clock::time_point::max() &&
         std::chrono::steady_clock::now() >= g_deadline;
}

void emitter_thread(uint32_t index, const Options& o) {
  fault::ThreadReport& r = g_report->t[index];
  r.tid.store(static_cast<uint32_t>(::syscall(SYS_gettid)), std::memory_order_relaxed);
  char name[32];
  std::snprintf(name, sizeof name, "fault.t%u", index);
  const bool victim = o.victim != 0 && index == 0;
  char attrs[32];
  uint64_t n = 0;
  uint64_t stored = 0;
  std::vector<char*> leaked;
  const auto one = [&] {
    std::snprintf(attrs, sizeof attrs, "seq=%llu", static_cast<unsigned long long>(n));
    const bool ok = spanring::emit(name, spanring::now_ns(), 100, attrs);
    ++n;
    stored += ok ? 1 : 0;
    // relaxed: progress counters; the test reads them as a lower bound of what happened.
    r.emitted.store(n, std::memory_order_relaxed);
    r.stored.store(stored, std::memory_order_relaxed);
    if (o.leak != 0) {
      char* p = static_cast<char*>(std::malloc(o.leak));
      if (p != nullptr) {
        std::memset(p, 0x5a, o.leak);
        leaked.push_back(p);
      }
    }
  };
  // The first record claims the thread's ring; the test starts once every thread has one.
  if (!must_stop(o, n)) one();
  g_started.fetch_add(1, std::memory_order_acq_rel);
  if (victim) {
    while (n < o.victim && !must_stop(o, n)) one();
    g_report->victim_ready.store(1, std::memory_order_release);
    while (!must_stop(o, n)) {
      if (o.victim_busy) {
        one();
        sleep_us(50);
      } else {
        sleep_us(1000);
      }
    }
  } else {
    while (!must_stop(o, n)) {
      one();
      if (o.pace_us != 0 && n % o.pace_every == 0) sleep_us(o.pace_us);
    }
  }
  for (char* p : leaked) std::free(p);
}

void monitor_thread() {
  while (!g_monitor_stop.load(std::memory_order_relaxed)) {
    // statm: size resident shared text lib data dt (pages). open/read: no stdio buffer.
    const int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char buf[128];
      const ssize_t got = ::read(fd, buf, sizeof buf - 1);
      ::close(fd);
      if (got > 0) {
        buf[got] = '\0';
        unsigned long long size = 0;
        unsigned long long resident = 0;
        if (std::sscanf(buf, "%llu %llu", &size, &resident) == 2) {
          g_report->rss_pages.store(resident, std::memory_order_relaxed);
          g_report->rss_samples.fetch_add(1, std::memory_order_release);
        }
      }
    }
    sleep_us(2000);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"fault_emitter: the traced program of the fault tests"};
  app.add_option("--threads", o.threads, "emitting threads")
      ->check(CLI::Range(1u, static_cast<unsigned>(fault::kMaxThreads)));
  CLI::Option* report = app.add_option("--report", o.report, "report page to map (fault_report.h)");
  app.add_option("--out", o.out, "JSON file of what each thread emitted");
  app.add_option("--count", o.count, "records per thread");
  app.add_option("--seconds", o.seconds, "stop after this many seconds");
  app.add_option("--until-stop", o.until_stop, "1: stop at the report's stop flag")->needs(report);
  app.add_option("--pace-us", o.pace_us, "sleep after every K-th record, us");
  app.add_option("--pace-every", o.pace_every, "K for --pace-us");
  app.add_option("--victim", o.victim, "thread 0 emits K records, then idles");
  app.add_option("--victim-busy", o.victim_busy, "1: the victim keeps emitting");
  app.add_option("--rss", o.rss, "1: sample the RSS into the report");
  app.add_option("--leak", o.leak, "bytes allocated per record");
  CLI11_PARSE(app, argc, argv);
  if (o.pace_every == 0) o.pace_every = 1;
  if (!o.report.empty()) {
    // The test created the file at the report's size; map it shared.
    const int fd = ::open(o.report.c_str(), O_RDWR | O_CLOEXEC);
    void* p = fd < 0 ? MAP_FAILED
                     : ::mmap(nullptr, sizeof(fault::Report), PROT_READ | PROT_WRITE, MAP_SHARED,
                              fd, 0);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "fault_emitter: cannot map report %s: %s\n", o.report.c_str(),
                   std::strerror(errno));
      return 1;
    }
    if (fd >= 0) ::close(fd);
    g_report = static_cast<fault::Report*>(p);
  }
  if (o.seconds > 0) {
    g_deadline = std::chrono::steady_clock::now() +
                 std::chrono::microseconds(static_cast<int64_t>(o.seconds * 1e6));
  }
  g_report->pid.store(static_cast<uint32_t>(::getpid()), std::memory_order_relaxed);
  g_report->threads.store(o.threads, std::memory_order_relaxed);
  g_report->enabled.store(spanring::enabled() ? 1 : 0, std::memory_order_relaxed);
  // release: pid/threads/enabled above are set before the test sees the magic.
  g_report->magic.store(fault::kReportMagic, std::memory_order_release);

  std::thread monitor;
  if (o.rss) monitor = std::thread(monitor_thread);
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < o.threads; ++i) threads.emplace_back(emitter_thread, i, std::cref(o));
  while (g_started.load(std::memory_order_acquire) < o.threads) sleep_us(100);
  g_report->phase.store(fault::kPhaseEmitting, std::memory_order_release);
  for (auto& t : threads) t.join();
  g_report->phase.store(fault::kPhaseDone, std::memory_order_release);
  g_monitor_stop.store(true, std::memory_order_relaxed);
  if (monitor.joinable()) monitor.join();

  uint64_t emitted = 0;
  uint64_t stored = 0;
  const char* segment = std::getenv("SPANRING_SEGMENT");
  std::string json = "{\"pid\": " + std::to_string(::getpid()) +
                     ", \"enabled\": " + std::to_string(spanring::enabled() ? 1 : 0) +
                     ", \"segment\": \"" + (segment != nullptr ? segment : "") +
                     "\", \"threads\": [";
  for (uint32_t i = 0; i < o.threads; ++i) {
    const fault::ThreadReport& r = g_report->t[i];
    const uint64_t e = r.emitted.load(std::memory_order_relaxed);
    const uint64_t s = r.stored.load(std::memory_order_relaxed);
    emitted += e;
    stored += s;
    json += std::string(i ? ", " : "") + "{\"name\": \"fault.t" + std::to_string(i) +
            "\", \"tid\": " + std::to_string(r.tid.load(std::memory_order_relaxed)) +
            ", \"emitted\": " + std::to_string(e) + ", \"stored\": " + std::to_string(s) + "}";
  }
  json += "]}\n";
  if (!o.out.empty()) {
    FILE* f = std::fopen(o.out.c_str(), "w");
    if (f == nullptr || std::fputs(json.c_str(), f) < 0 || std::fclose(f) != 0) {
      std::fprintf(stderr, "fault_emitter: cannot write %s: %s\n", o.out.c_str(),
                   std::strerror(errno));
      return 1;
    }
  } else {
    std::printf("fault_emitter: enabled=%d threads=%u emitted=%llu stored=%llu\n",
                spanring::enabled() ? 1 : 0, o.threads, static_cast<unsigned long long>(emitted),
                static_cast<unsigned long long>(stored));
  }
  g_report->phase.store(fault::kPhaseExited, std::memory_order_release);
  return 0;
}
