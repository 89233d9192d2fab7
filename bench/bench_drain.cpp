// bench_drain: how many records per second does the drainer sustain to [STRACE] text (and to
// its binary format, when this build of `spanring` has one), with how many drops, and what does
// it cost when there is nothing to drain?
//
// Each run: this process creates a segment (default sizes: 256 rings of 65,536 slots), starts
// the real drainer (`spanring drain --segment NAME -o FILE`, pinned to the drainer CPU; its
// io_uring writer thread inherits the pin, so the whole drainer has one core), then forks a
// producer process whose threads (pinned together to the other CPU) emit spans, either flat out
// or paced at a fixed total rate. The record is bench_record's: a 16-byte name and 4 integer
// attributes (as text, through emit() with caller-supplied ts/dur, the cheapest producer), a
// compact one-slot record (the slots a record takes are measured and printed). Rates are read
// from the segment while the producers run, over a window that leaves out the start and the
// end: records the drainer committed (each ring's committed sequence number less the drops it
// reported; committed only once the bytes are in the file) and the output file's growth. Drops
// are the producers' ring_full counters in the same window, and the drainer's own summary for
// the whole run. --formats picks the outputs (text, binary or both).
//
// The output file's page cache: a configuration must not inherit the previous one's dirty
// pages (a text run writes GBs; the kernel throttles a writer to the disk's writeback rate once
// the dirty pages pass its limits, balance_dirty_pages). So each configuration starts after the
// previous file is deleted and the output filesystem synced (syncfs, timed, not counted), and
// reports the system's Dirty and Writeback (/proc/meminfo) at its start and end and the peak
// Dirty seen during the run (sampled every 100 ms) against the kernel's throttle point (half
// way between nr_dirty_background_threshold and nr_dirty_threshold, /proc/vmstat), and how long
// the drainer's stop took (it fsyncs its file). Once per bench, --disk-probe-mb MB are written
// through the page cache (the write(2)s and their fdatasync timed apart: the kernel's copy into
// the page cache and the writeback) and with O_DIRECT. A run whose peak Dirty reached the
// throttle point was limited by the writeback, one whose MB/s is near the buffered write rate
// maybe by the page-cache copy, not by the drainer's own work.
//
// Idle: a drainer on a segment with no producer, its CPU use over a few seconds, from
// /proc/PID/stat (utime+stime, 10 ms ticks) and /proc/PID/task/*/schedstat (ns). Then the same
// with --idle-owners silent owners: one process whose threads each emit one record (so each
// holds a ring the drainer must watch for its owner's death) and then sleep; the drainer's
// liveness checks are then all it does (issue 23: <= 0.5% of a core with 256 of them).
#include "bench_util.h"

#include <spanring/segment.h>
#include <spanring/span.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <atomic>
#include <memory>
#include <filesystem>
#include <thread>

#ifndef SPANRING_EXE_DEFAULT
#define SPANRING_EXE_DEFAULT "spanring"
#endif

namespace {

constexpr const char kName[] = "bench.span.rec16";
constexpr const char kAttrsText[] = "run_id=7 task_slot=42 worker_id=1 dispatch_id=1234567";
constexpr uint32_t kAttrsBytes = sizeof(kAttrsText) - 1;

struct Options {
  double seconds = 2.0;
  std::vector<int> threads = {1, 4};
  double paced_rate = 2e6;  // records/s, all producer threads together; 0 = no paced runs
  double paced_rate_binary = 4e6;  // the same for the binary output (a target, docs/performance.md)
  double idle_seconds = 3.0;
  uint32_t idle_owners = 256;  // silent owner threads of the second idle measurement (0 = skip)
  uint32_t ring_records = spanring::SegmentOptions{}.ring_capacity;
  std::string spanring_exe = SPANRING_EXE_DEFAULT;
  int cpu_producer = 0;
  int cpu_drainer = 1;
  std::string json_path;
  uint32_t disk_probe_mb = 512;  // 0 = no probe of the output filesystem's sustained rate
};

// The page cache's dirty state, system-wide (other processes' writes count too).
struct DirtyState {
  uint64_t dirty_kb = 0;      // /proc/meminfo Dirty
  uint64_t writeback_kb = 0;  // /proc/meminfo Writeback
};

DirtyState read_dirty() {
  DirtyState d;
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t v = 0;
  std::string unit;
  while (in >> key >> v) {
    std::getline(in, unit);
    if (key == "Dirty:") d.dirty_kb = v;
    else if (key == "Writeback:") d.writeback_kb = v;
  }
  return d;
}

// The kernel's dirty-page thresholds now, in kB (/proc/vmstat, pages): background writeback
// starts above `background`; a writer is throttled (balance_dirty_pages) above the midpoint of
// the two and stopped at `limit`.
struct DirtyLimits {
  uint64_t background_kb = 0;
  uint64_t limit_kb = 0;
  uint64_t throttle_kb() const noexcept { return (background_kb + limit_kb) / 2; }
};

DirtyLimits read_dirty_limits() {
  DirtyLimits l;
  std::ifstream in("/proc/vmstat");
  std::string key;
  uint64_t v = 0;
  const uint64_t page_kb = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) / 1024;
  while (in >> key >> v) {
    if (key == "nr_dirty_threshold") l.limit_kb = v * page_kb;
    else if (key == "nr_dirty_background_threshold") l.background_kb = v * page_kb;
  }
  return l;
}

// Flushes the filesystem holding `dir` (syncfs: every dirty page of it, not only ours).
// Returns the seconds it took, -1 when it failed.
double sync_filesystem(const std::string& dir) {
  const int64_t t0 = bench::mono_ns();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  const int r = ::syncfs(fd);
  ::close(fd);
  return r == 0 ? static_cast<double>(bench::mono_ns() - t0) / 1e9 : -1;
}

// What the output filesystem takes, measured once before the runs (`mb` MB each, 1 MiB writes,
// from a clean page cache): `copy` the buffered write(2)s alone (the kernel's copy into the page
// cache, CPU-bound: what a drainer writing through the page cache pays per byte, before any
// writeback), `writeback` the fdatasync that follows (the dirty pages to the disk), `direct`
// the same bytes with O_DIRECT from an aligned buffer (no page cache; 0 where the filesystem
// refuses O_DIRECT, as tmpfs does). MB/s; -1 when a step failed.
struct DiskProbe {
  double copy = -1;
  double writeback = -1;
  double direct = -1;
};

DiskProbe probe_disk(const std::string& dir, uint32_t mb) {
  DiskProbe p;
  const std::string path = dir + "/disk-probe";
  const size_t block = size_t{1} << 20;
  void* mem = nullptr;
  if (::posix_memalign(&mem, 4096, block) != 0) return p;
  std::unique_ptr<char, decltype(&std::free)> buf(static_cast<char*>(mem), &std::free);
  for (size_t i = 0; i < block; ++i) buf.get()[i] = static_cast<char>('a' + i % 26);
  const double bytes_mb = static_cast<double>(mb) * 1.048576;
  auto secs = [](int64_t t0, int64_t t1) { return static_cast<double>(t1 - t0) / 1e9; };
  auto write_all = [&](int fd) {
    for (uint32_t i = 0; i < mb; ++i)
      if (::write(fd, buf.get(), block) != static_cast<ssize_t>(block)) return false;
    return true;
  };
  sync_filesystem(dir);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    const int64_t t0 = bench::mono_ns();
    const bool wrote = write_all(fd);
    const int64_t t1 = bench::mono_ns();
    const bool synced = wrote && ::fdatasync(fd) == 0;
    const int64_t t2 = bench::mono_ns();
    ::close(fd);
    if (wrote) p.copy = bytes_mb / secs(t0, t1);
    if (synced) p.writeback = bytes_mb / secs(t1, t2);
  }
  ::unlink(path.c_str());
  fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
  if (fd >= 0) {
    const int64_t t0 = bench::mono_ns();
    const bool wrote = write_all(fd) && ::fdatasync(fd) == 0;
    const int64_t t1 = bench::mono_ns();
    ::close(fd);
    p.direct = wrote ? bytes_mb / secs(t0, t1) : -1;
  } else {
    p.direct = 0;
  }
  ::unlink(path.c_str());
  sync_filesystem(dir);
  return p;
}

// Sleeps `us` in 100 ms steps, keeping the highest Dirty seen.
void sleep_watching_dirty(int64_t us, uint64_t& peak_dirty_kb) {
  const int64_t end = bench::mono_ns() + us * 1000;
  for (;;) {
    peak_dirty_kb = std::max(peak_dirty_kb, read_dirty().dirty_kb);
    const int64_t left = end - bench::mono_ns();
    if (left <= 0) return;
    bench::sleep_us(std::min<int64_t>(left / 1000, 100000));
  }
}

// What the producer process reports back through a pipe.
struct ProducerReport {
  uint64_t attempted;
  int64_t started_ns;
  int64_t stopped_ns;
  // Paced: the most records one thread wrote in one catch-up (after a sleep that lasted longer
  // than asked, it writes what it owes back to back) and the longest time between two of its
  // catch-ups. A catch-up of more records than a ring holds drops whatever the drainer does:
  // the producer was descheduled (its CPU is shared), not the drainer.
  uint64_t max_burst;
  int64_t max_gap_ns;
};

// One producer thread: spans until `stop`, at `rate` records/s (0 = flat out).
void producer_thread(int cpu, double rate, const std::atomic<bool>& go,
                     const std::atomic<bool>& stop, std::atomic<uint64_t>& attempted,
                     std::atomic<uint64_t>& max_burst, std::atomic<int64_t>& max_gap_ns) {
  bench::pin_this_thread(cpu);
  while (!go.load(std::memory_order_acquire)) {
  }
  spanring::Invocation inv{42, 0x9f3c2a1b5d7e6f01ULL};
  uint64_t n = 0;
  const int64_t start = bench::mono_ns();
  // emit() with caller-supplied ts/dur: the cheapest way to make a record (no clock read), so
  // one CPU of producers can offer more than the drainer takes.
  auto one = [&n, start] {
    spanring::emit(kName, start + static_cast<int64_t>(n) * 100, 50, kAttrsText);
    ++n;
  };
  if (rate <= 0) {
    while (!stop.load(std::memory_order_relaxed)) {
      for (int i = 0; i < 64; ++i) one();
    }
  } else {
    // Paced: catch up to rate x elapsed, then sleep 50 us. Sleeping (not spinning) lets several
    // producer threads share one CPU without the scheduler turning them into bursts.
    uint64_t burst = 0;
    int64_t gap = 0;
    int64_t last = start;
    while (!stop.load(std::memory_order_relaxed)) {
      const int64_t now = bench::mono_ns();
      gap = std::max(gap, now - last);
      last = now;
      const double due = rate * static_cast<double>(now - start) / 1e9;
      const uint64_t before = n;
      while (static_cast<double>(n) < due) one();
      burst = std::max(burst, n - before);
      bench::sleep_us(50);
    }
    uint64_t b = max_burst.load(std::memory_order_relaxed);
    while (burst > b && !max_burst.compare_exchange_weak(b, burst, std::memory_order_relaxed)) {
    }
    int64_t g = max_gap_ns.load(std::memory_order_relaxed);
    while (gap > g && !max_gap_ns.compare_exchange_weak(g, gap, std::memory_order_relaxed)) {
    }
  }
  attempted.fetch_add(n, std::memory_order_relaxed);
}

// The producer process: attaches, runs `threads` producers for `seconds`, reports, exits.
[[noreturn]] void producer_main(const std::string& segment, int threads, double total_rate,
                                double seconds, int cpu, int report_fd) {
  if (!spanring::attach(segment.c_str())) ::_exit(3);
  std::atomic<bool> go{false}, stop{false};
  std::atomic<uint64_t> attempted{0};
  std::atomic<uint64_t> max_burst{0};
  std::atomic<int64_t> max_gap_ns{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < threads; ++i)
    ts.emplace_back(producer_thread, cpu, total_rate / threads, std::cref(go), std::cref(stop),
                    std::ref(attempted), std::ref(max_burst), std::ref(max_gap_ns));
  ProducerReport rep{};
  rep.started_ns = bench::mono_ns();
  go.store(true, std::memory_order_release);
  const char started = 's';
  (void)!::write(report_fd, &started, 1);
  bench::sleep_us(static_cast<int64_t>(seconds * 1e6));
  stop.store(true);
  for (auto& t : ts) t.join();
  rep.stopped_ns = bench::mono_ns();
  rep.attempted = attempted.load();
  rep.max_burst = max_burst.load();
  rep.max_gap_ns = max_gap_ns.load();
  (void)!::write(report_fd, &rep, sizeof rep);
  ::_exit(0);
}

struct Sample {
  int64_t ns = 0;
  uint64_t tail_slots = 0;  // sum of every ring's tail
  // Records committed (in the file), summed over the rings: each ring's committed next
  // sequence number less the drops its drainer reported (a drop takes a sequence number too).
  // Counted in records, not slots: a record takes 1 slot or more (bench_record's is a compact
  // one-slot record since the producer interns names; counting 2 slots a record halved every
  // drained rate this bench printed).
  uint64_t committed_records = 0;
  uint64_t drops = 0;       // sum of every ring's producer drop counter
  uint64_t file_bytes = 0;
  long long drainer_cpu_ns = 0;
  long long producer_cpu_ns = 0;  // every thread of the producer process, on its CPU
};

Sample sample(const spanring::Segment& seg, const std::string& out, pid_t drainer,
              pid_t producer) {
  Sample s;
  s.ns = bench::mono_ns();
  for (uint32_t i = 0; i < seg.ring_count(); ++i) {
    // acquire: pairs with the drainer's release of tail (and the producer's of drops); only
    // a count is read, nothing that the stores publish.
    s.tail_slots += seg.ring(i).tail.load(std::memory_order_acquire);
    s.drops += seg.ring(i).drops.load(std::memory_order_acquire);
    // The drainer's commit stores next_seq and drops_reported (plain fields) before its
    // release of tail; read here relaxed, as atomics, since a later commit may store them
    // again meanwhile (the window is long: one commit off is noise).
    spanring::RingHeader& r = seg.ring(i);
    s.committed_records += __atomic_load_n(&r.next_seq, __ATOMIC_RELAXED) -
                           __atomic_load_n(&r.drops_reported, __ATOMIC_RELAXED);
  }
  struct stat st {};
  if (::stat(out.c_str(), &st) == 0) s.file_bytes = static_cast<uint64_t>(st.st_size);
  s.drainer_cpu_ns = bench::proc_cpu_ns(drainer);
  s.producer_cpu_ns = bench::proc_cpu_ns(producer);
  return s;
}

struct RunResult {
  std::string format;  // "strace" or "binary"
  int threads = 0;
  bool paced = false;
  double offered_rate = 0;   // attempted / producer time
  double drained_rate = 0;   // records/s the drainer committed, in the window
  double mb_per_s = 0;
  double bytes_per_line = 0;
  uint64_t window_drops = 0;
  long long total_written = -1;
  long long total_dropped = -1;
  uint64_t attempted = 0;
  uint64_t max_burst = 0;    // paced: ProducerReport::max_burst
  double max_gap_ms = 0;     // paced: ProducerReport::max_gap_ns, in ms
  double drainer_cpu = 0;    // fraction of one core, in the window
  // The producers' share of their CPU in the window (all threads together; one core = 1). A
  // flat-out producer below 1 was descheduled for the rest (its CPU is shared): then the
  // drained rate measures how much of each of its time slices a ring holds, not the drainer.
  double producer_cpu = 0;
  double slots_per_record = 0;  // ring slots the drainer consumed per record, in the window
  double window_s = 0;
  double sync_before_s = 0;  // syncfs of the output filesystem before the drainer started
  double stop_s = 0;         // the drainer's stop (it drains what is left and fsyncs)
  DirtyState dirty_start;    // after that syncfs
  DirtyState dirty_end;      // before the drainer's stop
  uint64_t peak_dirty_kb = 0;  // highest Dirty while the producers ran
  DirtyLimits limits;        // at the start
  bool ok = true;
  std::string error;
};

RunResult run_one(const Options& o, const std::string& tmp, const std::string& format,
                  int threads, double rate) {
  RunResult r;
  r.format = format;
  r.threads = threads;
  r.paced = rate > 0;
  const std::string name = "spanring-bench-drain-" + std::to_string(::getpid());
  const std::string out = tmp + (format == "binary" ? "/drain.sptrace" : "/drain.strace");
  // A clean page cache for this configuration: no file of an earlier one, nothing dirty on
  // the output filesystem (timed, outside every measured figure).
  {
    std::error_code ec;
    std::filesystem::remove(out, ec);
  }
  r.sync_before_s = sync_filesystem(tmp);
  r.dirty_start = read_dirty();
  r.limits = read_dirty_limits();
  r.peak_dirty_kb = r.dirty_start.dirty_kb;
  spanring::SegmentOptions so;
  so.ring_capacity = o.ring_records;
  spanring::Segment seg = spanring::Segment::create(name, so);
  bench::DrainerProcess drainer;
  if (!drainer.start(o.spanring_exe, name, out, o.cpu_drainer, tmp + "/drainer.stderr",
                     format == "binary" ? "binary" : "")) {
    r.ok = false;
    r.error = "fork failed";
    spanring::Segment::remove(name);
    return r;
  }
  bench::sleep_us(200000);

  int fds[2];
  if (::pipe(fds) != 0) std::abort();
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(fds[0]);
    producer_main(name, threads, rate, o.seconds, o.cpu_producer, fds[1]);
  }
  ::close(fds[1]);
  char started = 0;
  (void)!::read(fds[0], &started, 1);
  // The window: from 20% into the run to 90% of it (the start fills empty rings; the end
  // races the producers' stop).
  sleep_watching_dirty(static_cast<int64_t>(o.seconds * 0.2e6), r.peak_dirty_kb);
  const Sample a = sample(seg, out, drainer.pid, child);
  sleep_watching_dirty(static_cast<int64_t>(o.seconds * 0.7e6), r.peak_dirty_kb);
  const Sample b = sample(seg, out, drainer.pid, child);
  sleep_watching_dirty(static_cast<int64_t>(o.seconds * 0.1e6), r.peak_dirty_kb);
  ProducerReport rep{};
  size_t got = 0;
  while (got < sizeof rep) {
    const ssize_t n = ::read(fds[0], reinterpret_cast<char*>(&rep) + got, sizeof rep - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fds[0]);
  int st = 0;
  ::waitpid(child, &st, 0);
  if (got != sizeof rep || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    r.ok = false;
    r.error = "the producer process failed";
  }
  r.dirty_end = read_dirty();
  const int64_t stop_t0 = bench::mono_ns();
  const bool stopped = drainer.stop();
  r.stop_s = static_cast<double>(bench::mono_ns() - stop_t0) / 1e9;
  if (!stopped) {
    r.ok = false;
    r.error += (r.error.empty() ? "" : "; ") + std::string("the drainer did not exit cleanly: ") +
               drainer.stderr_text();
  }
  spanring::Segment::remove(name);

  const double dt = static_cast<double>(b.ns - a.ns) / 1e9;
  r.window_s = dt;
  const double recs = static_cast<double>(b.committed_records - a.committed_records);
  r.drained_rate = recs / dt;
  r.slots_per_record = recs > 0 ? static_cast<double>(b.tail_slots - a.tail_slots) / recs : 0;
  r.mb_per_s = static_cast<double>(b.file_bytes - a.file_bytes) / 1e6 / dt;
  r.bytes_per_line = recs > 0 ? static_cast<double>(b.file_bytes - a.file_bytes) / recs : 0;
  r.window_drops = b.drops - a.drops;
  r.drainer_cpu = static_cast<double>(b.drainer_cpu_ns - a.drainer_cpu_ns) / 1e9 / dt;
  r.producer_cpu = static_cast<double>(b.producer_cpu_ns - a.producer_cpu_ns) / 1e9 / dt;
  r.attempted = rep.attempted;
  r.max_burst = rep.max_burst;
  r.max_gap_ms = static_cast<double>(rep.max_gap_ns) / 1e6;
  r.offered_rate = rep.stopped_ns > rep.started_ns
                       ? static_cast<double>(rep.attempted) /
                             (static_cast<double>(rep.stopped_ns - rep.started_ns) / 1e9)
                       : 0;
  r.total_written = drainer.summary_field("written");
  r.total_dropped = drainer.summary_field("dropped");
  std::error_code ec;
  std::filesystem::remove(out, ec);
  return r;
}

struct IdleResult {
  double seconds = 0;
  long long ticks = 0;
  long ticks_per_s = 100;
  double cpu_schedstat = 0;  // fraction of one core
  double cpu_ticks = 0;
};

// The owner process of the idle measurement: `owners` threads each emit one record (claiming a
// ring) and then sleep until the process is killed. Writes one byte to `ready_fd` once every
// thread holds its ring.
[[noreturn]] void silent_owners_main(const std::string& segment, uint32_t owners, int ready_fd) {
  if (!spanring::attach(segment.c_str())) ::_exit(3);
  std::atomic<uint32_t> claimed{0};
  std::vector<std::thread> ts;
  for (uint32_t i = 0; i < owners; ++i)
    ts.emplace_back([&claimed] {
      spanring::emit(kName, bench::mono_ns(), 1, "");
      claimed.fetch_add(1, std::memory_order_release);
      for (;;) ::pause();
    });
  while (claimed.load(std::memory_order_acquire) < owners) bench::sleep_us(1000);
  const char ready = 'r';
  (void)!::write(ready_fd, &ready, 1);
  for (;;) ::pause();
}

// The drainer's CPU while nothing is emitted, with `owners` silent ring owners (0: none).
IdleResult run_idle(const Options& o, const std::string& tmp, uint32_t owners) {
  IdleResult r;
  const std::string name = "spanring-bench-idle-" + std::to_string(::getpid());
  spanring::SegmentOptions so;
  so.ring_count = std::max(so.ring_count, owners);
  spanring::Segment seg = spanring::Segment::create(name, so);
  bench::DrainerProcess drainer;
  drainer.start(o.spanring_exe, name, tmp + "/idle.strace", o.cpu_drainer,
                tmp + "/idle.stderr");
  pid_t child = -1;
  if (owners != 0) {
    int fds[2];
    if (::pipe(fds) != 0) std::abort();
    child = ::fork();
    if (child == 0) {
      ::close(fds[0]);
      silent_owners_main(name, owners, fds[1]);
    }
    ::close(fds[1]);
    char ready = 0;
    (void)!::read(fds[0], &ready, 1);
    ::close(fds[0]);
  }
  // Past start-up, the first record of every owner and the back-off's ramp to its longest sleep.
  bench::sleep_us(1000000);
  const int64_t t0 = bench::mono_ns();
  const long long k0 = bench::proc_cpu_ticks(drainer.pid);
  const long long n0 = bench::proc_cpu_ns(drainer.pid);
  bench::sleep_us(static_cast<int64_t>(o.idle_seconds * 1e6));
  const int64_t t1 = bench::mono_ns();
  const long long k1 = bench::proc_cpu_ticks(drainer.pid);
  const long long n1 = bench::proc_cpu_ns(drainer.pid);
  if (child > 0) {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
  }
  drainer.stop();
  spanring::Segment::remove(name);
  r.seconds = static_cast<double>(t1 - t0) / 1e9;
  r.ticks = k1 - k0;
  r.ticks_per_s = ::sysconf(_SC_CLK_TCK);
  r.cpu_ticks = static_cast<double>(r.ticks) / static_cast<double>(r.ticks_per_s) / r.seconds;
  r.cpu_schedstat = static_cast<double>(n1 - n0) / 1e9 / r.seconds;
  return r;
}

// True when `spanring drain --help` offers a binary output (--format ... binary).
bool drainer_has_binary(const std::string& exe) {
  const std::string cmd = "'" + exe + "' drain --help 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return false;
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p) != nullptr) text += buf;
  ::pclose(p);
  const auto f = text.find("--format");
  return f != std::string::npos && text.find("binary", f) != std::string::npos;
}

std::string rate_str(double r) {
  if (r >= 1e6) return bench::fmt("%.2f M", r / 1e6);
  if (r >= 1e3) return bench::fmt("%.1f k", r / 1e3);
  return bench::fmt("%.0f", r);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string threads_csv = "1,4";
  CLI::App app{"bench_drain: the drainer's sustained throughput to [STRACE] text, its drops, "
               "and its idle CPU"};
  app.add_option("--seconds", o.seconds, "producer run time per configuration, seconds")
      ->check(CLI::Range(0.5, 600.0))->capture_default_str();
  app.add_option("--threads", threads_csv, "producer thread counts to run, comma-separated")
      ->capture_default_str();
  app.add_option("--paced-rate", o.paced_rate,
                 "also run each thread count paced at this total rate, records/s (0 = only "
                 "flat out)")->capture_default_str();
  app.add_option("--paced-rate-binary", o.paced_rate_binary,
                 "the paced rate of the binary runs, records/s (0 = only flat out)")
      ->capture_default_str();
  app.add_option("--idle-seconds", o.idle_seconds, "idle drainer measurement, seconds (0 = skip)")
      ->capture_default_str();
  app.add_option("--idle-owners", o.idle_owners,
                 "silent ring owner threads of the second idle measurement (0 = skip it)")
      ->capture_default_str();
  app.add_option("--ring-records", o.ring_records, "ring capacity in 64-byte slots")
      ->capture_default_str();
  app.add_option("--spanring", o.spanring_exe, "the spanring CLI")->capture_default_str();
  app.add_option("--cpu-producer", o.cpu_producer, "CPU of every producer thread")
      ->capture_default_str();
  app.add_option("--cpu-drainer", o.cpu_drainer, "CPU of the drainer process")
      ->capture_default_str();
  app.add_option("--json", o.json_path, "write the results as JSON");
  app.add_option("--disk-probe-mb", o.disk_probe_mb,
                 "MB written and fdatasync'ed once, before the runs, to measure the output "
                 "filesystem's sustained write rate (0 = skip)")->capture_default_str();
  std::string formats_csv = "strace,binary";
  app.add_option("--formats", formats_csv,
                 "outputs to run, comma-separated: strace, binary (binary only where the "
                 "drainer has it)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  if (spanring::enabled()) {
    ::unsetenv("SPANRING_SEGMENT");
    ::execv("/proc/self/exe", argv);
    return 2;
  }
  o.threads.clear();
  {
    std::stringstream ss(threads_csv);
    for (std::string t; std::getline(ss, t, ',');)
      if (!t.empty()) o.threads.push_back(std::max(1, std::atoi(t.c_str())));
  }
  o.cpu_producer %= bench::online_cpus();
  o.cpu_drainer %= bench::online_cpus();
  const std::string tmp = bench::make_temp_dir("spanring-bench-drain");
  const std::string started = bench::now_utc();

  std::vector<std::string> formats;
  const bool binary = drainer_has_binary(o.spanring_exe);
  {
    std::stringstream ss(formats_csv);
    for (std::string f; std::getline(ss, f, ',');) {
      if (f == "strace" || (f == "binary" && binary)) {
        formats.push_back(f);
      } else if (f != "binary") {
        std::fprintf(stderr, "bench_drain: --formats: unknown output '%s'\n", f.c_str());
        return 2;
      }
    }
  }
  const DiskProbe disk = o.disk_probe_mb > 0 ? probe_disk(tmp, o.disk_probe_mb) : DiskProbe{};
  std::vector<RunResult> runs;
  try {
    for (const auto& f : formats) {
      for (int t : o.threads) {
        runs.push_back(run_one(o, tmp, f, t, 0));
        const double rate = f == "binary" ? o.paced_rate_binary : o.paced_rate;
        if (rate > 0) runs.push_back(run_one(o, tmp, f, t, rate));
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_drain: %s\n", e.what());
    return 1;
  }
  IdleResult idle;
  IdleResult idle_owned;
  if (o.idle_seconds > 0) idle = run_idle(o, tmp, 0);
  if (o.idle_seconds > 0 && o.idle_owners > 0) idle_owned = run_idle(o, tmp, o.idle_owners);
  std::filesystem::remove_all(tmp);

  std::printf("### bench_drain: drainer throughput to [STRACE] text%s, drops, idle cost\n\n",
              binary ? " and binary" : "");
  std::printf("- CPU: %s, %d CPUs online; date %s\n", bench::cpu_model().c_str(),
              bench::online_cpus(), started.c_str());
  double slots = 0;  // slots per record as measured (the first run that drained any)
  for (const auto& r : runs)
    if (slots == 0) slots = r.slots_per_record;
  std::printf("- Options: %.1f s per configuration, rings of %u slots, "
              "256 rings; producers pinned to CPU %d, the drainer (drain thread and io_uring "
              "writer) to CPU %d; output file on %s\n",
              o.seconds, o.ring_records, o.cpu_producer,
              o.cpu_drainer, tmp.substr(0, tmp.rfind('/')).c_str());
  std::printf("- Record: 16-byte name + 4 integer attributes (%.2f ring slots each, measured), "
              "made with spanring::emit (caller-supplied ts/dur). Rates are measured over "
              "the middle 70%% of each run, from the records the drainer committed (each "
              "ring's committed sequence number less its reported drops; committed only once "
              "the bytes are in the file) and the file's growth.\n\n", slots);
  std::printf("| output | producers | mode | offered rec/s | drained rec/s | MB/s | bytes/record | "
              "drops (window) | written / dropped (drainer summary) | drainer CPU (one core = "
              "100%%) | rec/s per drainer CPU-s | paced: largest catch-up, records (longest "
              "producer gap) | producer CPU (its core = 100%%) |\n");
  std::printf("|---|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|\n");
  for (const auto& r : runs) {
    std::printf("| %s | %d | %s | %s | %s | %.0f | %.0f | %llu | %lld / %lld | %.0f%% | %s | %s | %.0f%% |%s\n",
                r.format == "binary" ? "binary" : "[STRACE] text", r.threads,
                r.paced ? bench::fmt("paced %.1f M/s",
                                     (r.format == "binary" ? o.paced_rate_binary : o.paced_rate) /
                                         1e6).c_str()
                        : "flat out",
                rate_str(r.offered_rate).c_str(), rate_str(r.drained_rate).c_str(), r.mb_per_s,
                r.bytes_per_line, static_cast<unsigned long long>(r.window_drops),
                r.total_written, r.total_dropped, r.drainer_cpu * 100,
                rate_str(r.drainer_cpu > 0 ? r.drained_rate / r.drainer_cpu : 0).c_str(),
                r.paced ? (std::to_string(r.max_burst) + bench::fmt(" (%.1f ms)", r.max_gap_ms) +
                           (r.max_burst > o.ring_records ? ", more than a ring" : ""))
                              .c_str()
                        : "",
                r.producer_cpu * 100, r.ok ? "" : (" ERROR: " + r.error).c_str());
  }
  // The page cache of each configuration: was it the drainer or the disk?
  std::printf("\nThe output filesystem (%s): ", tmp.substr(0, tmp.rfind('/')).c_str());
  if (o.disk_probe_mb > 0)
    std::printf("%u MB in 1 MiB writes, once before the runs: buffered write(2)s %.0f MB/s (the "
                "kernel's copy into the page cache, on the writer's CPU), their fdatasync %.0f "
                "MB/s (writeback), O_DIRECT %s. ",
                o.disk_probe_mb, disk.copy, disk.writeback,
                disk.direct > 0 ? bench::fmt("%.0f MB/s", disk.direct).c_str()
                : disk.direct == 0 ? "refused" : "failed");
  if (!runs.empty())
    std::printf("The kernel throttles a writer once Dirty passes %.0f MB (background writeback "
                "from %.0f MB, limit %.0f MB). Each configuration starts after the previous "
                "file is deleted and the filesystem synced (syncfs, timed, not counted). A row "
                "whose peak Dirty reached the throttle point measured the writeback, not the "
                "drainer; one whose MB/s is near the buffered write rate may have measured the "
                "page-cache copy (its cost moves between minutes on a VM).\n\n",
                static_cast<double>(runs.front().limits.throttle_kb()) / 1024,
                static_cast<double>(runs.front().limits.background_kb) / 1024,
                static_cast<double>(runs.front().limits.limit_kb) / 1024);
  std::printf("| output | mode | syncfs before (s) | Dirty / Writeback at start (MB) | peak "
              "Dirty (MB) | Dirty / Writeback at end (MB) | drainer stop incl. fsync (s) | "
              "MB/s | limited by |\n|---|---|---:|---|---:|---|---:|---:|---|\n");
  for (const auto& r : runs) {
    const bool throttled = r.limits.throttle_kb() > 0 && r.peak_dirty_kb >= r.limits.throttle_kb();
    const bool near_copy = disk.copy > 0 && r.mb_per_s >= 0.8 * disk.copy;
    std::printf("| %s | %s | %.2f | %.0f / %.0f | %.0f | %.0f / %.0f | %.2f | %.0f | %s |\n",
                r.format == "binary" ? "binary" : "[STRACE] text",
                r.paced ? "paced" : "flat out", r.sync_before_s,
                static_cast<double>(r.dirty_start.dirty_kb) / 1024,
                static_cast<double>(r.dirty_start.writeback_kb) / 1024,
                static_cast<double>(r.peak_dirty_kb) / 1024,
                static_cast<double>(r.dirty_end.dirty_kb) / 1024,
                static_cast<double>(r.dirty_end.writeback_kb) / 1024, r.stop_s, r.mb_per_s,
                throttled   ? "writeback: Dirty reached the throttle point"
                : near_copy ? "the page-cache copy? (MB/s near the buffered write rate)"
                            : "not shown by these figures");
  }
  if (!binary)
    std::printf("\nbinary: not built yet (`spanring drain` offers no binary output; these rows "
                "appear once it does)\n");
  std::printf("\n");
  if (o.idle_seconds > 0)
    std::printf("Idle drainer (segment with no producer, %.1f s): %.3f%% of one core by "
                "schedstat (%lld ns), %.2f%% by /proc/PID/stat (%lld ticks of 1/%ld s).\n\n",
                idle.seconds, idle.cpu_schedstat * 100,
                static_cast<long long>(idle.cpu_schedstat * idle.seconds * 1e9),
                idle.cpu_ticks * 100, idle.ticks, idle.ticks_per_s);
  if (o.idle_seconds > 0 && o.idle_owners > 0)
    std::printf("Idle drainer with %u silent ring owners (threads of one process that emitted "
                "one record each, %.1f s): %.3f%% of one core by schedstat (%lld ns), %.2f%% by "
                "/proc/PID/stat (%lld ticks of 1/%ld s).\n\n",
                o.idle_owners, idle_owned.seconds, idle_owned.cpu_schedstat * 100,
                static_cast<long long>(idle_owned.cpu_schedstat * idle_owned.seconds * 1e9),
                idle_owned.cpu_ticks * 100, idle_owned.ticks, idle_owned.ticks_per_s);

  // ---- targets (docs/performance.md): paced 2 M/s text and 4 M/s binary with zero drops at the default
  // ring size, binary >= 20 M records/s flat out on one core, idle < 0.5% of a core
  std::printf("Targets, from this run:\n\n| target | result | measured |\n|---|---|---|\n");
  for (const auto& f : formats) {
    const bool bin = f == "binary";
    const double paced_goal = bin ? 4e6 : 2e6;
    const char* what = bin ? "binary" : "[STRACE] text";
    double best_flat = 0;
    for (const auto& r : runs)
      if (r.format == f && !r.paced) best_flat = std::max(best_flat, r.drained_rate);
    const double paced = bin ? o.paced_rate_binary : o.paced_rate;
    for (const auto& r : runs) {
      if (r.format != f || !r.paced) continue;
      const bool rate_ok = r.drained_rate >= 0.98 * paced;  // the window's sampling jitter
      const bool pass =
          r.window_drops == 0 && r.total_dropped == 0 && rate_ok && paced >= paced_goal;
      std::printf("| >= %s records/s to %s, zero drops, default ring size (%d producer%s, "
                  "offered %s/s) | %s | drained %s rec/s, drops %llu in the window, %lld in the "
                  "whole run%s |\n",
                  rate_str(paced_goal).c_str(), what, r.threads, r.threads == 1 ? "" : "s",
                  rate_str(paced).c_str(), pass ? "PASS" : "MISS",
                  rate_str(r.drained_rate).c_str(),
                  static_cast<unsigned long long>(r.window_drops), r.total_dropped,
                  paced < paced_goal ? " (offered below the target)" : "");
    }
    // Issue 23: >= 20 M records/s flat out on one core (issue 11's was 8 M).
    constexpr double kFlatGoal = 20e6;
    if (bin)
      std::printf("| drainer peak to binary (flat out) >= 20.00 M records/s | %s | best %s rec/s%s "
                  "|\n",
                  best_flat >= kFlatGoal ? "PASS" : "MISS", rate_str(best_flat).c_str(),
                  best_flat >= kFlatGoal
                      ? ""
                      : bench::fmt(", %.2fx short", kFlatGoal / best_flat).c_str());
  }
  if (!binary)
    std::printf("| >= 20 M records/s to binary | NOT MEASURED | binary: not built yet |\n");
  if (o.idle_seconds > 0)
    std::printf("| idle drainer < 0.5%% of a core | %s | %.3f%% (schedstat) |\n",
                idle.cpu_schedstat < 0.005 ? "PASS" : "MISS", idle.cpu_schedstat * 100);
  if (o.idle_seconds > 0 && o.idle_owners > 0)
    std::printf("| idle drainer with %u silent owners < 0.5%% of a core (issue 23) | %s | "
                "%.3f%% (schedstat) |\n",
                o.idle_owners, idle_owned.cpu_schedstat < 0.005 ? "PASS" : "MISS",
                idle_owned.cpu_schedstat * 100);
  std::printf("\n");

  if (!o.json_path.empty()) {
    nlohmann::json j;
    j["bench"] = "bench_drain";
    j["cpu"] = bench::cpu_model();
    j["started"] = started;
    j["seconds"] = o.seconds;
    j["ring_records"] = o.ring_records;
    j["disk_probe"] = {{"mb", o.disk_probe_mb}, {"buffered_write_mb_per_s", disk.copy},
                       {"writeback_mb_per_s", disk.writeback},
                       {"direct_mb_per_s", disk.direct}};
    for (const auto& r : runs)
      j["runs"].push_back({{"format", r.format}, {"threads", r.threads}, {"paced", r.paced},
                           {"offered_rate", r.offered_rate}, {"drained_rate", r.drained_rate},
                           {"mb_per_s", r.mb_per_s}, {"bytes_per_line", r.bytes_per_line},
                           {"window_drops", r.window_drops}, {"written", r.total_written},
                           {"max_burst", r.max_burst}, {"max_gap_ms", r.max_gap_ms},
                           {"dropped", r.total_dropped}, {"drainer_cpu", r.drainer_cpu},
                           {"producer_cpu", r.producer_cpu},
                           {"slots_per_record", r.slots_per_record},
                           {"sync_before_s", r.sync_before_s}, {"stop_s", r.stop_s},
                           {"dirty_start_kb", r.dirty_start.dirty_kb},
                           {"writeback_start_kb", r.dirty_start.writeback_kb},
                           {"dirty_end_kb", r.dirty_end.dirty_kb},
                           {"writeback_end_kb", r.dirty_end.writeback_kb},
                           {"peak_dirty_kb", r.peak_dirty_kb},
                           {"dirty_throttle_kb", r.limits.throttle_kb()},
                           {"ok", r.ok}, {"error", r.error}});
    j["binary"] = binary ? "measured" : "not built yet";
    j["idle"] = {{"seconds", idle.seconds}, {"cpu_schedstat", idle.cpu_schedstat},
                 {"cpu_ticks", idle.cpu_ticks}, {"ticks", idle.ticks}};
    j["idle_owners"] = {{"owners", o.idle_owners}, {"seconds", idle_owned.seconds},
                        {"cpu_schedstat", idle_owned.cpu_schedstat},
                        {"cpu_ticks", idle_owned.cpu_ticks}, {"ticks", idle_owned.ticks}};
    std::ofstream(o.json_path) << j.dump(1) << '\n';
  }
  return 0;
}
