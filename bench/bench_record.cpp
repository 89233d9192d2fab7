// bench_record: what does one span record cost the traced thread, next to this machine's floor
// and next to the paths spanring replaces or competes with?
//
// Method (the same for every arm): a sample is one batch of 20 consecutive records timed with
// rdtsc (lfence-fenced) and divided by 20; a pause (default 1 ms, a sleep) separates batches;
// percentiles are over the batches. TSC ticks are converted to ns with a calibration against
// CLOCK_MONOTONIC taken at the start and the end of this run. The producer (this thread) is
// pinned to one CPU, every consumer (the real `spanring drain` process, the moodycamel consumer
// thread) to the other. Arms run interleaved in rounds, so slow drifts of a noisy VM spread over
// all arms instead of landing on one; the disabled arms run first, before this process attaches
// to its segment (attaching cannot be undone).
//
// The record: a 16-byte literal name, inv=42, a callable hash, depth 0, ts/dur, and 4 integer
// attributes of fixed width ("run_id=7 task_slot=42 worker_id=1 dispatch_id=1234567", 53 bytes),
// shaped like the l3 demo's dispatch spans. In spanring that is a 2-slot record (16 + 53 raw
// bytes, 12 inline in the first slot).
#include "bench_util.h"
#include "strace_line.h"

#include <spanring/segment.h>
#include <spanring/span.h>
#include <spanring/spanring.h>

#include <spanring/simpler_host_span.h>

#include <CLI/CLI.hpp>
#include <concurrentqueue/concurrentqueue.h>
#include <nlohmann/json.hpp>

#include <sys/syscall.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#ifdef SPANRING_BENCH_LTTNG
#include "bench_tp.h"
#endif

#ifndef SPANRING_EXE_DEFAULT
#define SPANRING_EXE_DEFAULT "spanring"
#endif

namespace {

using bench::mono_ns;

constexpr int kBatch = 20;  // records per timed sample (shared/design.md: 20 records per timed batch)
// As macros too, for SPANRING_EMIT, which takes string literals only.
#define BENCH_NAME "bench.span.rec16"
#define BENCH_ATTRS_TEXT "run_id=7 task_slot=42 worker_id=1 dispatch_id=1234567"
alignas(256) constexpr const char kName[] = BENCH_NAME;  // see kCAttrsText
static_assert(sizeof(kName) - 1 == 16, "the benchmark's name is 16 bytes");
constexpr uint64_t kInv = 42;
constexpr uint64_t kHid = 0x9f3c2a1b5d7e6f01ULL;
// The text the 4 integer attributes of record n format to, for the arms that take text.
constexpr const char kAttrsText[] = BENCH_ATTRS_TEXT;

// The 4 attribute values of record n; fixed digit counts keep every record the same size.
struct Vals {
  uint64_t run_id, task_slot, worker_id, dispatch_id;
};
inline Vals vals(uint64_t n) noexcept {
  return {7 + (n & 1), 10 + n % 54, n & 1, 1000000 + n % 9000000};
}
// Records made so far (values vary from record to record). Each batch copies it into a local
// and stores it back once: a global updated through memory on every record would chain the
// records of a batch through a store-to-load forward (~5 cycles), which the disabled arm
// would otherwise mostly measure.
uint64_t g_n = 0;

// ---- floor: two clock reads + one 64-byte store into an L1-resident thread-local ring + a
// release store of the ring's head. No consumer: the least one span record can cost here.

struct Rec64 {  // the shape of spanring's RecordHeader, 64 bytes
  uint64_t seq, ts, dur, inv, hid;
  uint32_t depth;
  uint16_t name_len, attrs_len, slots, flags;
  char payload[12];
};
static_assert(sizeof(Rec64) == 64);

constexpr uint32_t kFloorSlots = 64;  // 4 KiB: stays in L1
struct alignas(64) FloorRing {
  Rec64 slots[kFloorSlots];
  alignas(64) std::atomic<uint64_t> head{0};
  uint64_t head_private = 0;
};
__attribute__((tls_model("initial-exec"))) thread_local FloorRing t_floor;

inline Rec64 make_rec(uint64_t seq, uint64_t ts, uint64_t dur) noexcept {
  Rec64 r;
  r.seq = seq;
  r.ts = ts;
  r.dur = dur;
  r.inv = kInv;
  r.hid = kHid;
  r.depth = 0;
  r.name_len = 16;
  r.attrs_len = 53;
  r.slots = 1;
  r.flags = 0;
  std::memcpy(r.payload, kName, sizeof r.payload);
  return r;
}

inline void floor_store(uint64_t t0, uint64_t t1) noexcept {
  FloorRing& r = t_floor;
  const uint64_t h = r.head_private;
  r.slots[h & (kFloorSlots - 1)] = make_rec(h, t0, t1 - t0);
  r.head_private = h + 1;
  // release: what a consumer would pair with; on x86 a plain store, kept for its ordering.
  r.head.store(h + 1, std::memory_order_release);
}

__attribute__((noinline)) void batch_floor() {
  for (int i = 0; i < kBatch; ++i) {
    const uint64_t t0 = __rdtsc();
    const uint64_t t1 = __rdtsc();
    floor_store(t0, t1);
  }
}

__attribute__((noinline)) void batch_floor_clock() {
  for (int i = 0; i < kBatch; ++i) {
    const uint64_t t0 = static_cast<uint64_t>(mono_ns());
    const uint64_t t1 = static_cast<uint64_t>(mono_ns());
    floor_store(t0, t1);
  }
}

// ---- the benchmark's own share: the loops of the spanring arms with nothing recorded. Every
// arm's per-record count (bench/ir-per-record) includes its loop; these two arms say how much
// of it is the benchmark's. The empty asm keeps each iteration, and the 4 values, in the code
// without adding an instruction.

// batch_span's loop with its 4 attribute values computed and nothing recorded.
__attribute__((noinline)) void batch_loop_values() {
  uint64_t n = g_n;
  for (int i = 0; i < kBatch; ++i) {
    const Vals v = vals(n++);
    asm volatile("" : : "r"(v.run_id), "r"(v.task_slot), "r"(v.worker_id), "r"(v.dispatch_id));
  }
  g_n = n;
}

// batch_span's loop as the disabled arm runs it: the record counter and the loop, no values
// (in the disabled arm GCC computes them only on the traced path).
__attribute__((noinline)) void batch_loop() {
  uint64_t n = g_n;
  for (int i = 0; i < kBatch; ++i) {
    const uint64_t k = n++;
    asm volatile("" : : "r"(k));
  }
  g_n = n;
}

// ---- spanring

// The RAII span; also the two disabled arms (the same code, with tracing off).
__attribute__((noinline)) void batch_span() {
  uint64_t n = g_n;
  for (int i = 0; i < kBatch; ++i) {
    const Vals v = vals(n++);
    spanring::Span s{kName};
    s.attr("run_id", v.run_id)
        .attr("task_slot", v.task_slot)
        .attr("worker_id", v.worker_id)
        .attr("dispatch_id", v.dispatch_id);
  }
  g_n = n;
}

__attribute__((noinline)) void batch_span_noattr() {
  for (int i = 0; i < kBatch; ++i) {
    spanring::Span s{kName};
  }
}

// The same spans through the call-site form (SPANRING_SPAN: the name's and keys' ids kept in
// a static descriptor of this site).
__attribute__((noinline)) void batch_span_site() {
  uint64_t n = g_n;
  for (int i = 0; i < kBatch; ++i) {
    const Vals v = vals(n++);
    SPANRING_SPAN(s, "bench.span16.xyz");
    s.attr("run_id", v.run_id)
        .attr("task_slot", v.task_slot)
        .attr("worker_id", v.worker_id)
        .attr("dispatch_id", v.dispatch_id);
  }
  g_n = n;
}

__attribute__((noinline)) void batch_span_site_noattr() {
  for (int i = 0; i < kBatch; ++i) {
    SPANRING_SPAN(s, "bench.span16.xyz");
  }
}

__attribute__((noinline)) void batch_emit() {
  uint64_t n = g_n;
  for (int i = 0; i < kBatch; ++i, ++n)
    spanring::emit(kName, static_cast<int64_t>(1'000'000'000 + n * 1000), 500, kAttrsText);
  g_n = n;
}

// The same records through the call-site form (SPANRING_EMIT: both ids kept in a static
// descriptor of this site).
__attribute__((noinline)) void batch_emit_site() {
  uint64_t n = g_n;
  for (int i = 0; i < kBatch; ++i, ++n)
    SPANRING_EMIT(BENCH_NAME, static_cast<int64_t>(1'000'000'000 + n * 1000), 500,
                  BENCH_ATTRS_TEXT);
  g_n = n;
}

// ---- the C ABI (spanring_emit with a 60-byte attribute string): the struct a
// [STRACE] producer fills today, caller-supplied ts/dur, the attributes as one text.

// The C ABI copies a runtime string 16 bytes at a time while all the steps its cap allows stay in
// the string's page (src/text_copy.h): a string that starts in the last 208 bytes of a page takes
// the slower, page-tested way. Where the linker puts a literal moves with every change to this
// file, so the text arms' strings are 256-byte aligned (never in a page's last 208 bytes): the
// counts measure the common case and do not move with unrelated code. The
// spanring_c_emit_page_end arm measures the other case.
alignas(256) constexpr const char kCAttrsText[] = "run_id=7 task_slot=42 worker_id=1 dispatch_id=1234567 slot=3";
static_assert(sizeof(kCAttrsText) - 1 == 60, "the C ABI arm emits a 60-byte attribute string");

__attribute__((noinline)) void batch_c_emit() {
  uint64_t n = g_n;
  spanring_span s{};
  s.invocation_id = kInv;
  s.callable_hash = kHid;
  s.name = kName;
  s.attributes = kCAttrsText;
  for (int i = 0; i < kBatch; ++i, ++n) {
    s.timestamp_ns = static_cast<int64_t>(1'000'000'000 + n * 1000);
    s.duration_ns = 500;
    spanring_emit(&s);
  }
  g_n = n;
}

// The same records with the attribute string in the last 64 bytes of a page (its NUL 4 bytes
// before the page's end): copied the page-tested way (see kCAttrsText).
alignas(4096) char g_page_end_attrs[4096];
constexpr size_t kPageEndAt = sizeof g_page_end_attrs - 64;

__attribute__((noinline)) void batch_c_emit_page_end() {
  uint64_t n = g_n;
  spanring_span s{};
  s.invocation_id = kInv;
  s.callable_hash = kHid;
  s.name = kName;
  s.attributes = g_page_end_attrs + kPageEndAt;
  for (int i = 0; i < kBatch; ++i, ++n) {
    s.timestamp_ns = static_cast<int64_t>(1'000'000'000 + n * 1000);
    s.duration_ns = 500;
    spanring_emit(&s);
  }
  g_n = n;
}

// ---- the host-span adapter seam (target: <= 150 Ir with a literal name and a 40-byte attribute
// string, docs/adapter.md): the runtime's struct through libspanring-simpler, gate first, as the
// runtime's host code calls it.

alignas(256) constexpr const char kSimplerAttrs[] = "run_id=7 task_slot=42 worker_id=1 dsp=12";
static_assert(sizeof(kSimplerAttrs) - 1 == 40, "the target is set for a 40-byte attribute string");

__attribute__((noinline)) void batch_simpler() {
  uint64_t n = g_n;
  SimplerHostSpan s{};
  s.abi_version = SIMPLER_HOST_SPAN_ABI_VERSION;
  s.struct_size = sizeof(SimplerHostSpan);
  s.invocation_id = kInv;
  s.callable_hash = kHid;
  s.name = kName;
  s.attributes = kSimplerAttrs;
  for (int i = 0; i < kBatch; ++i, ++n) {
    if (!unified_log_host_span_enabled()) continue;
    s.timestamp_ns = static_cast<int64_t>(1'000'000'000 + n * 1000);
    s.duration_ns = 500;
    unified_log_host_span(&s);
  }
  g_n = n;
}

// ---- write(2) under a mutex: the path spanring replaces

struct StraceLogger {
  int fd = -1;
  std::mutex mu;
  uint32_t pid = 0;
  uint32_t tid = 0;
  unsigned long self = 0;
};
StraceLogger g_log_file;
StraceLogger g_log_null;

inline void strace_record(StraceLogger& log, uint64_t n) noexcept {
  const Vals v = vals(n);
  const uint64_t t0 = static_cast<uint64_t>(mono_ns());
  const uint64_t t1 = static_cast<uint64_t>(mono_ns());
  char attrs[96];
  const int al = std::snprintf(attrs, sizeof attrs,
                               "run_id=%llu task_slot=%llu worker_id=%llu dispatch_id=%llu",
                               static_cast<unsigned long long>(v.run_id),
                               static_cast<unsigned long long>(v.task_slot),
                               static_cast<unsigned long long>(v.worker_id),
                               static_cast<unsigned long long>(v.dispatch_id));
  char line[bench::kStraceLineMax];
  const size_t len = bench::format_strace_line(line, log.pid, log.tid, log.self, kInv, kHid, 0,
                                               kName, sizeof(kName) - 1, t0, t1 - t0, attrs,
                                               static_cast<size_t>(al), t1);
  bench::locked_write(log.mu, log.fd, line, len);
}

__attribute__((noinline)) void batch_write_file() {
  uint64_t n = g_n;
  for (int i = 0; i < kBatch; ++i) strace_record(g_log_file, n++);
  g_n = n;
}
__attribute__((noinline)) void batch_write_null() {
  uint64_t n = g_n;
  for (int i = 0; i < kBatch; ++i) strace_record(g_log_null, n++);
  g_n = n;
}

// ---- moodycamel::ConcurrentQueue: floor_clock with the store replaced by an enqueue (with a
// producer token) of the 64-byte record; a consumer thread on the other CPU dequeues in bulk
// with the drainer's idle back-off (busy while there is work, then sleeps of 50 us doubling to
// 4 ms), so both consumers treat the producer's cache lines alike.

struct Mc {
  moodycamel::ConcurrentQueue<Rec64> queue{64 * 1024};
  std::unique_ptr<moodycamel::ProducerToken> token;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> consumed{0};
  std::thread consumer;
};
Mc* g_mc = nullptr;

__attribute__((noinline)) void batch_moodycamel() {
  Mc& mc = *g_mc;
  uint64_t n = g_n;
  for (int i = 0; i < kBatch; ++i) {
    const uint64_t t0 = static_cast<uint64_t>(mono_ns());
    const uint64_t t1 = static_cast<uint64_t>(mono_ns());
    mc.queue.enqueue(*mc.token, make_rec(n++, t0, t1 - t0));
  }
  g_n = n;
}

// The same enqueue timed with 2 rdtsc, as spanring's Span and the floor read the clock: the
// instruction-count anchor ("moodycamel enqueue, producer token, 2 rdtsc").
__attribute__((noinline)) void batch_moodycamel_tsc() {
  Mc& mc = *g_mc;
  uint64_t n = g_n;
  for (int i = 0; i < kBatch; ++i) {
    const uint64_t t0 = __rdtsc();
    const uint64_t t1 = __rdtsc();
    mc.queue.enqueue(*mc.token, make_rec(n++, t0, t1 - t0));
  }
  g_n = n;
}

void mc_consumer(Mc& mc, int cpu) {
  bench::pin_this_thread(cpu);
  moodycamel::ConsumerToken ctok(mc.queue);
  std::vector<Rec64> buf(256);
  int64_t sleep_us = 0;
  uint64_t sum = 0;
  while (!mc.stop.load(std::memory_order_relaxed)) {
    const size_t n = mc.queue.try_dequeue_bulk(ctok, buf.data(), buf.size());
    if (n != 0) {
      for (size_t i = 0; i < n; ++i) sum += buf[i].seq;
      mc.consumed.fetch_add(n, std::memory_order_relaxed);
      sleep_us = 0;
      continue;
    }
    sleep_us = sleep_us == 0 ? 50 : std::min<int64_t>(sleep_us * 2, 4000);
    bench::sleep_us(sleep_us);
  }
  asm volatile("" ::"r"(sum));
}

// ---- LTTng-UST: the same fields through a tracepoint, with the two clock reads of a span.

#ifdef SPANRING_BENCH_LTTNG
__attribute__((noinline)) void batch_lttng() {
  uint64_t n = g_n;
  for (int i = 0; i < kBatch; ++i) {
    const Vals v = vals(n++);
    const uint64_t t0 = static_cast<uint64_t>(mono_ns());
    const uint64_t t1 = static_cast<uint64_t>(mono_ns());
    lttng_ust_tracepoint(spanring_bench, span, kName, kInv, kHid, 0u, t0, t1 - t0, v.run_id,
                         v.task_slot, v.worker_id, v.dispatch_id);
  }
  g_n = n;
}
bool lttng_active() { return lttng_ust_tracepoint_enabled(spanring_bench, span); }
#endif

// ---- the harness

struct Arm {
  std::string name;
  std::string what;
  void (*batch)() = nullptr;
  bool before_attach = false;  // the disabled arms: measured before this process attaches
  std::string skipped;         // non-empty: why the arm was not measured
  std::vector<uint64_t> ticks;  // one per batch
  uint64_t batches_run = 0;     // warm-up and timed batches, for slots per record
  std::vector<double> ns;       // per record, sorted (filled at the end)
  double p50 = NAN, p99 = NAN, p999 = NAN, max = NAN, mean = NAN;
};

struct Options {
  int batches = 10000;
  int64_t pause_us = 1000;
  int warmup = 200;
  int rounds = 5;
  std::string arms = "all";
  std::string json_path;
  std::string cdf_path;
  std::string spanring_exe = SPANRING_EXE_DEFAULT;
  int cpu_producer = 0;
  int cpu_consumer = 1;
  bool keep = false;
  std::string pause_mode = "spin";
  // Diagnostics: the segment's shape, and whether a drainer runs at all (without one, records
  // only fill the ring; make it large enough for every record of the run, or they drop).
  uint32_t rings = spanring::SegmentOptions{}.ring_count;
  uint32_t ring_records = spanring::SegmentOptions{}.ring_capacity;
  std::string drainer = "live";
};

bool g_spin_pause = true;

// The pause between batches. Spinning keeps this CPU busy, as a traced program's own work
// between two spans would; sleeping lets the vCPU go idle (a halt to the hypervisor), after which
// the next batch runs on cold caches and predictors.
void pause(int64_t us) noexcept {
  if (us <= 0) return;
  if (!g_spin_pause) {
    bench::sleep_us(us);
    return;
  }
  const int64_t end = mono_ns() + us * 1000;
  while (mono_ns() < end) _mm_pause();
}

void run_batches(Arm& arm, int count, int warmup, int64_t pause_us) {
  arm.batches_run += static_cast<uint64_t>(warmup + count);
  for (int i = 0; i < warmup; ++i) {
    arm.batch();
    pause(pause_us);
  }
  for (int i = 0; i < count; ++i) {
    const uint64_t t0 = bench::tsc_begin();
    arm.batch();
    const uint64_t t1 = bench::tsc_end();
    arm.ticks.push_back(t1 - t0);
    pause(pause_us);
  }
}

// The cost of the timing itself (tsc_begin + tsc_end around nothing), in ticks: included in
// every sample, reported, not subtracted.
uint64_t timer_overhead_ticks() {
  std::vector<double> v;
  for (int i = 0; i < 20000; ++i) {
    const uint64_t t0 = bench::tsc_begin();
    const uint64_t t1 = bench::tsc_end();
    v.push_back(static_cast<double>(t1 - t0));
  }
  return static_cast<uint64_t>(bench::median(v));
}

std::string join_args(int argc, char** argv) {
  std::string s;
  for (int i = 0; i < argc; ++i) {
    if (i) s += ' ';
    s += argv[i];
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"bench_record: per-record cost of a span, side by side with the machine's floor "
               "and the alternatives"};
  app.add_option("--batches", o.batches, "timed batches of 20 records per arm")
      ->check(CLI::Range(10, 10'000'000))->capture_default_str();
  app.add_option("--pause-us", o.pause_us, "sleep between batches, microseconds")
      ->check(CLI::Range(0, 1'000'000))->capture_default_str();
  app.add_option("--warmup", o.warmup, "untimed batches per arm and round before timing")
      ->capture_default_str();
  app.add_option("--rounds", o.rounds, "rounds the batches of each arm are spread over")
      ->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_option("--arms", o.arms, "comma-separated arms to run, or all")->capture_default_str();
  app.add_option("--json", o.json_path, "write percentiles and a CDF of every arm as JSON");
  app.add_option("--cdf", o.cdf_path,
                 "write every arm's sorted per-record samples for plotting (gnuplot blocks: "
                 "a title line, then `ns cdf 1-cdf+1/n` rows; blocks separated by 2 blank lines)");
  app.add_option("--spanring", o.spanring_exe, "the spanring CLI (runs `spanring drain`)")
      ->capture_default_str();
  app.add_option("--cpu-producer", o.cpu_producer, "CPU of the producer (this thread)")
      ->capture_default_str();
  app.add_option("--cpu-consumer", o.cpu_consumer, "CPU of the drainer / consumer")
      ->capture_default_str();
  app.add_option("--pause-mode", o.pause_mode, "spin (busy-wait, the CPU stays busy) or sleep "
                 "(nanosleep, the CPU idles)")
      ->check(CLI::IsMember({"spin", "sleep"}))->capture_default_str();
  app.add_option("--rings", o.rings, "diagnostic: rings in the segment")->capture_default_str();
  app.add_option("--ring-records", o.ring_records,
                 "diagnostic: ring capacity in 64-byte slots (a record here takes 2)")
      ->capture_default_str();
  app.add_option("--drainer", o.drainer,
                 "diagnostic: live (a `spanring drain` process on the consumer CPU) or none (no "
                 "consumer: shows what the drainer's reads cost the producer)")
      ->check(CLI::IsMember({"live", "none"}))->capture_default_str();
  app.add_flag("--keep", o.keep, "keep the temporary directory (the traces written)");
  CLI11_PARSE(app, argc, argv);

  if (spanring::enabled()) {
    // The disabled arm needs a process that is not attached, and this one was attached at load
    // because SPANRING_SEGMENT is set: start again without it.
    ::unsetenv("SPANRING_SEGMENT");
    ::execv("/proc/self/exe", argv);
    std::fprintf(stderr, "bench_record: SPANRING_SEGMENT is set and re-exec failed\n");
    return 2;
  }

  std::memcpy(g_page_end_attrs + kPageEndAt, kCAttrsText, sizeof kCAttrsText);
  g_spin_pause = o.pause_mode == "spin";
  const int producer_cpu = bench::pin_this_thread(o.cpu_producer);
  const int consumer_cpu = o.cpu_consumer % bench::online_cpus();

  std::vector<Arm> arms;
  auto add = [&](std::string name, std::string what, void (*fn)(), bool before = false) {
    Arm a;
    a.name = std::move(name);
    a.what = std::move(what);
    a.batch = fn;
    a.before_attach = before;
    arms.push_back(std::move(a));
  };
  add("floor", "2x rdtsc + one 64-byte store to an L1 thread-local ring + release store",
      batch_floor);
  add("floor_clock", "the same with 2x clock_gettime(CLOCK_MONOTONIC)", batch_floor_clock);
  add("loop_values", "the spanring_span arm's loop computing its 4 values, nothing recorded: "
      "the benchmark's share of that arm (diagnostic)", batch_loop_values, true);
  add("loop", "the loop alone (a record counter), nothing recorded: the benchmark's share of "
      "the disabled arm (diagnostic)", batch_loop, true);
  add("spanring_span", "spanring::Span, 16-byte name, 4 integer attrs; live drainer on the other "
      "CPU", batch_span);
  add("spanring_span_noattr", "spanring::Span, 16-byte name, no attrs (diagnostic)",
      batch_span_noattr);
  add("spanring_span_site", "SPANRING_SPAN (call-site descriptor), 16-byte name, 4 integer "
      "attrs", batch_span_site);
  add("spanring_span_site_noattr", "SPANRING_SPAN, 16-byte name, no attrs (diagnostic)",
      batch_span_site_noattr);
  add("spanring_emit", "spanring::emit(name, ts, dur, attrs), caller-supplied ts/dur",
      batch_emit);
  add("spanring_emit_site", "SPANRING_EMIT (call-site descriptor), the same records",
      batch_emit_site);
  add("spanring_c_emit", "C ABI spanring_emit(&span), caller-supplied ts/dur, 60-byte "
      "attribute string", batch_c_emit);
  add("spanring_c_emit_page_end", "spanring_c_emit with the attribute string in the last 64 "
      "bytes of a page (diagnostic: its page-tested copy)", batch_c_emit_page_end);
  add("spanring_simpler", "host-span adapter seam: gate + unified_log_host_span(&span), "
      "16-byte literal name, 40-byte attribute string", batch_simpler);
  add("spanring_disabled", "the spanring_span code with tracing disabled (not attached)",
      batch_span, true);
  add("spanring_disabled_noattr", "the same without the 4 attr() calls (diagnostic)",
      batch_span_noattr, true);
  add("write_strace_file", "[STRACE] line (snprintf) + std::mutex + write(2) to a file",
      batch_write_file);
  add("write_strace_devnull", "the same to /dev/null", batch_write_null);
  add("moodycamel", "floor_clock with the store replaced by ConcurrentQueue::enqueue (producer "
      "token); bulk consumer on the other CPU", batch_moodycamel);
  add("moodycamel_tsc", "the moodycamel arm with 2x rdtsc instead of 2x clock_gettime",
      batch_moodycamel_tsc);
#ifdef SPANRING_BENCH_LTTNG
  add("lttng_ust", "LTTng-UST tracepoint with the same fields + 2x clock_gettime; active "
      "session", batch_lttng);
#else
  add("lttng_ust", "LTTng-UST tracepoint", nullptr);
  arms.back().skipped = "not built: liblttng-ust-dev was not found at configure time";
#endif

  // --arms
  if (o.arms != "all") {
    std::set<std::string> wanted;
    std::stringstream ss(o.arms);
    for (std::string a; std::getline(ss, a, ',');)
      if (!a.empty()) wanted.insert(a);
    for (const auto& w : wanted) {
      if (std::none_of(arms.begin(), arms.end(), [&](const Arm& a) { return a.name == w; })) {
        std::fprintf(stderr, "bench_record: unknown arm %s\n", w.c_str());
        return 2;
      }
    }
    std::erase_if(arms, [&](const Arm& a) { return !wanted.count(a.name); });
  }
  auto find = [&](const std::string& n) -> Arm* {
    for (auto& a : arms)
      if (a.name == n) return &a;
    return nullptr;
  };
  auto wants = [&](const std::string& n) {
    const Arm* a = find(n);
    return a != nullptr && a->skipped.empty();
  };

  const std::string tmp = bench::make_temp_dir("spanring-bench-record");
  if (tmp.empty()) {
    std::perror("bench_record: mkdtemp");
    return 1;
  }
  const bench::TscPoint cal_start = bench::tsc_point();
  const uint64_t timer_ticks = timer_overhead_ticks();
  const std::string started = bench::now_utc();

  // ---- the disabled arms: before attaching
  for (auto& a : arms)
    if (a.before_attach && a.skipped.empty())
      run_batches(a, o.batches, o.warmup, o.pause_us);

  // ---- the rest: set up every consumer, then interleave the arms in rounds
  const std::string segment_name = "spanring-bench-" + std::to_string(::getpid());
  bench::DrainerProcess drainer;
  bool segment_made = false;
  std::string drainer_note;
  const bool need_spanring = wants("spanring_span") || wants("spanring_span_noattr") ||
                             wants("spanring_span_site") || wants("spanring_span_site_noattr") ||
                             wants("spanring_emit") || wants("spanring_emit_site") ||
                             wants("spanring_c_emit") || wants("spanring_c_emit_page_end") ||
                             wants("spanring_simpler");
  if (need_spanring) {
    try {
      spanring::SegmentOptions so;
      so.ring_count = o.rings;
      so.ring_capacity = o.ring_records;
      spanring::Segment::create(segment_name, so);
      segment_made = true;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_record: cannot create segment: %s\n", e.what());
      return 1;
    }
    if (o.drainer == "live" &&
        !drainer.start(o.spanring_exe, segment_name, tmp + "/spanring.strace", consumer_cpu,
                       tmp + "/drainer.stderr")) {
      std::perror("bench_record: fork");
      return 1;
    }
    bench::sleep_us(200000);  // let the drainer take the segment before the first record
    if (!spanring::attach(segment_name.c_str())) {
      std::fprintf(stderr, "bench_record: cannot attach to %s\n", segment_name.c_str());
      drainer.stop();
      spanring::Segment::remove(segment_name);
      return 1;
    }
  }
  spanring::Invocation invocation{kInv, kHid};  // inv/hid of the spans below

  const uint32_t tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  for (StraceLogger* log : {&g_log_file, &g_log_null}) {
    log->pid = static_cast<uint32_t>(::getpid());
    log->tid = tid;
    log->self = static_cast<unsigned long>(pthread_self());
  }
  g_log_file.fd = ::open((tmp + "/write.strace").c_str(),
                         O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  g_log_null.fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);

  Mc mc;
  if (wants("moodycamel") || wants("moodycamel_tsc")) {
    mc.token = std::make_unique<moodycamel::ProducerToken>(mc.queue);
    g_mc = &mc;
    mc.consumer = std::thread(mc_consumer, std::ref(mc), consumer_cpu);
  }

#ifdef SPANRING_BENCH_LTTNG
  if (Arm* a = find("lttng_ust"); a != nullptr && !lttng_active())
    a->skipped = "no active LTTng session has spanring_bench:span enabled (bench/run starts "
                 "one)";
#endif

  const int per_round = (o.batches + o.rounds - 1) / o.rounds;
  const int warm_round = o.warmup > 0 ? std::max(1, o.warmup / o.rounds) : 0;
  for (int r = 0; r < o.rounds; ++r) {
    for (auto& a : arms) {
      if (a.before_attach || !a.skipped.empty()) continue;
      const int left = o.batches - static_cast<int>(a.ticks.size());
      if (left > 0) run_batches(a, std::min(per_round, left), warm_round, o.pause_us);
    }
  }

  // ---- tear down the consumers
  long long drain_written = -1, drain_dropped = -1;
  bool drainer_ok = true;
  uint64_t ring_drops = 0;
  uint64_t ring_slots = 0;  // slots the producers published (sum of the ring heads)
  if (need_spanring) {
    if (o.drainer == "live") {
      drainer_ok = drainer.stop();
      drain_written = drainer.summary_field("written");
      drain_dropped = drainer.summary_field("dropped");
    }
    try {
      // The producers' own drop counters (ring_full), whether or not a drainer ran.
      spanring::Segment seg = spanring::Segment::open(segment_name);
      for (uint32_t i = 0; i < seg.ring_count(); ++i) {
        ring_drops += seg.ring(i).drops.load(std::memory_order_acquire);
        ring_slots += seg.ring(i).head.load(std::memory_order_acquire);
      }
    } catch (const std::exception&) {
    }
    if (segment_made) spanring::Segment::remove(segment_name);
  }
  if (mc.consumer.joinable()) {
    mc.stop.store(true);
    mc.consumer.join();
  }
  const bench::TscPoint cal_end = bench::tsc_point();
  const bench::TscScale scale = bench::tsc_scale(cal_start, cal_end);
  const std::string finished = bench::now_utc();

  // ---- statistics
  for (auto& a : arms) {
    if (a.ticks.empty()) continue;
    a.ns.reserve(a.ticks.size());
    double sum = 0;
    for (uint64_t t : a.ticks) {
      const double v = static_cast<double>(t) * scale.ns_per_tick / kBatch;
      a.ns.push_back(v);
      sum += v;
    }
    std::sort(a.ns.begin(), a.ns.end());
    a.p50 = bench::percentile(a.ns, 50);
    a.p99 = bench::percentile(a.ns, 99);
    a.p999 = bench::percentile(a.ns, 99.9);
    a.max = a.ns.back();
    a.mean = sum / static_cast<double>(a.ns.size());
  }
  const Arm* floor_arm = find("floor");
  const double floor_p50 = floor_arm ? floor_arm->p50 : NAN;
  const Arm* floor_clock_arm = find("floor_clock");
  const double floor_clock_p50 = floor_clock_arm ? floor_clock_arm->p50 : NAN;

  // ---- report (Markdown)
  std::printf("### bench_record: per-record cost on the traced thread\n\n");
  std::printf("- CPU: %s, %d CPUs online; TSC %.4f GHz (calibrated against CLOCK_MONOTONIC over "
              "this run); clocksource %s\n",
              bench::cpu_model().c_str(), bench::online_cpus(), scale.ghz(),
              bench::read_first_line(
                  "/sys/devices/system/clocksource/clocksource0/current_clocksource").c_str());
  std::printf("- Date: %s to %s\n", started.c_str(), finished.c_str());
  std::printf("- Command: `%s`\n", join_args(argc, argv).c_str());
  std::printf("- Options: %d batches of %d records per arm, %lld us pause between batches%s "
              "(%s), %d warm-up batches per arm, spread over %d interleaved rounds; producer on "
              "CPU %d, drainer / consumer on CPU %d\n",
              o.batches, kBatch, static_cast<long long>(o.pause_us),
              o.pause_us < 1000 ? " (shorter than ~1 ms, to keep the run short)" : "",
              g_spin_pause ? "--pause-mode spin: a busy-wait, the CPU stays busy as in a traced "
                             "program between spans"
                           : "--pause-mode sleep: nanosleep, the vCPU idles between batches",
              o.warmup, o.rounds, producer_cpu, consumer_cpu);
  std::printf("- A sample is one batch of %d consecutive records timed with rdtsc, divided by "
              "%d; percentiles are over batches. The timer pair itself costs %.1f ns per batch "
              "(%.2f ns per record), included, not subtracted.\n\n",
              kBatch, kBatch, static_cast<double>(timer_ticks) * scale.ns_per_tick,
              static_cast<double>(timer_ticks) * scale.ns_per_tick / kBatch);
  std::printf("| arm | p50 ns | p99 ns | p99.9 ns | max ns | p50 / floor p50 | what |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---|\n");
  for (const auto& a : arms) {
    if (!a.skipped.empty()) {
      std::printf("| %s | - | - | - | - | - | not measured: %s |\n", a.name.c_str(),
                  a.skipped.c_str());
      continue;
    }
    std::printf("| %s | %s | %s | %s | %s | %s | %s |\n", a.name.c_str(),
                bench::fmt_ns(a.p50).c_str(), bench::fmt_ns(a.p99).c_str(),
                bench::fmt_ns(a.p999).c_str(), bench::fmt_ns(a.max).c_str(),
                bench::fmt("%.2fx", a.p50 / floor_p50).c_str(), a.what.c_str());
  }
  std::printf("\n");
  if (!std::isnan(floor_clock_p50)) {
    std::printf("Ratios to `floor_clock` (the floor with the clock spanring reads today): ");
    bool first = true;
    for (const auto& a : arms) {
      if (!a.skipped.empty() || a.name == "floor" || a.name == "floor_clock") continue;
      std::printf("%s%s %.2fx", first ? "" : ", ", a.name.c_str(), a.p50 / floor_clock_p50);
      first = false;
    }
    std::printf(".\n\n");
  }
  if (need_spanring && o.drainer == "live") {
    std::printf("The live drainer (`spanring drain`, CPU %d) wrote %lld records, dropped %lld%s.\n\n",
                consumer_cpu, drain_written, drain_dropped,
                drainer_ok ? "" : " (it did not exit cleanly; see its stderr)");
  } else if (need_spanring) {
    // Records of the arms that write to the segment (the disabled arms ran before attaching).
    uint64_t records = 0;
    for (const auto& a : arms)
      if (!a.before_attach && a.name.rfind("spanring_", 0) == 0) records += a.batches_run * kBatch;
    std::printf("No drainer ran (--drainer none; %u rings of %u slots): the producers dropped "
                "%llu records on full rings. The rings hold %llu slots for %llu records "
                "(%.3f slots per record).\n\n",
                o.rings, o.ring_records, static_cast<unsigned long long>(ring_drops),
                static_cast<unsigned long long>(ring_slots),
                static_cast<unsigned long long>(records),
                records ? static_cast<double>(ring_slots) / static_cast<double>(records) : 0.0);
  }
  if (wants("moodycamel") || wants("moodycamel_tsc"))
    std::printf("The moodycamel consumer dequeued %llu records.\n\n",
                static_cast<unsigned long long>(mc.consumed.load()));

  // ---- targets (the timing targets of the producer, docs/performance.md; bench/run takes the median of 3
  // runs and checks the instruction counts, which do not vary, separately)
  struct Target {
    std::string what;
    bool measured;
    bool pass;
    std::string detail;
  };
  std::vector<Target> targets;
  const Arm* span = find("spanring_span");
  const Arm* wfile = find("write_strace_file");
  const Arm* lt = find("lttng_ust");
  auto ok = [](const Arm* a) { return a != nullptr && a->skipped.empty() && !a->ns.empty(); };
  auto over = [](double measured, double limit) {
    return bench::fmt("%.2fx the limit", measured / limit);
  };
  if (ok(span) && ok(floor_arm)) {
    // Issue 20's limit (issue 11's was 1.5x).
    constexpr double kSpanOverFloor = 1.3;
    const double lim = kSpanOverFloor * floor_p50;
    const bool pass = span->p50 <= lim;
    targets.push_back({"spanring_span p50 <= 1.3 x floor p50", true, pass,
                       bench::fmt_ns(span->p50) + " ns vs 1.3 x " + bench::fmt_ns(floor_p50) +
                           " = " + bench::fmt_ns(lim) + " ns (" +
                           bench::fmt("%.2fx floor", span->p50 / floor_p50) + ")" +
                           (pass ? "" : ", " + over(span->p50, lim))});
  }
  if (ok(span) && ok(wfile)) {
    const double r = wfile->p50 / span->p50;
    targets.push_back({"write_strace_file p50 / spanring_span p50 >= 70", true, r >= 70,
                       bench::fmt_ns(wfile->p50) + " / " + bench::fmt_ns(span->p50) + " = " +
                           bench::fmt("%.1f", r) +
                           (ok(floor_arm) ? bench::fmt(" (write_strace_file / floor = %.1f)",
                                                       wfile->p50 / floor_p50)
                                          : "") +
                           (r >= 70 ? "" : bench::fmt(", %.2fx short", 70 / r))});
  }
  if (ok(span) && ok(lt)) {
    const double r = lt->p50 / span->p50;
    targets.push_back({"lttng_ust p50 / spanring_span p50 >= 5", true, r >= 5,
                       bench::fmt_ns(lt->p50) + " / " + bench::fmt_ns(span->p50) + " = " +
                           bench::fmt("%.2f", r) +
                           (r >= 5 ? "" : bench::fmt(", %.2fx short", 5 / r))});
  } else if (lt != nullptr && !lt->skipped.empty()) {
    targets.push_back({"lttng_ust p50 / spanring_span p50 >= 5", false, false,
                       "not measured: " + lt->skipped});
  }
  std::printf("Targets, from this run:\n\n| target | result | measured |\n|---|---|---|\n");
  for (const auto& t : targets)
    std::printf("| %s | %s | %s |\n", t.what.c_str(),
                !t.measured ? "NOT MEASURED" : t.pass ? "PASS" : "MISS", t.detail.c_str());
  std::printf("\n");
  std::fflush(stdout);

  // ---- machine-readable output
  if (!o.json_path.empty()) {
    nlohmann::json j;
    j["bench"] = "bench_record";
    j["cpu"] = bench::cpu_model();
    j["cpus_online"] = bench::online_cpus();
    j["tsc_ghz"] = scale.ghz();
    j["started"] = started;
    j["finished"] = finished;
    j["options"] = {{"batches", o.batches}, {"batch_records", kBatch},
                    {"pause_us", o.pause_us}, {"warmup", o.warmup}, {"rounds", o.rounds},
                    {"cpu_producer", producer_cpu}, {"cpu_consumer", consumer_cpu}};
    j["timer_overhead_ns_per_batch"] = static_cast<double>(timer_ticks) * scale.ns_per_tick;
    j["drainer"] = {{"written", drain_written}, {"dropped", drain_dropped}};
    for (const auto& a : arms) {
      nlohmann::json ja;
      ja["name"] = a.name;
      ja["what"] = a.what;
      if (!a.skipped.empty()) {
        ja["skipped"] = a.skipped;
      } else {
        ja["p50_ns"] = a.p50;
        ja["p99_ns"] = a.p99;
        ja["p999_ns"] = a.p999;
        ja["max_ns"] = a.max;
        ja["mean_ns"] = a.mean;
        ja["ratio_p50_to_floor"] = a.p50 / floor_p50;
        // The CDF at 1000 evenly spaced ranks plus the top 20 samples.
        nlohmann::json cdf = nlohmann::json::array();
        const size_t n = a.ns.size();
        for (size_t k = 0; k < 1000; ++k) {
          const size_t i = k * n / 1000;
          cdf.push_back({a.ns[i], static_cast<double>(i + 1) / static_cast<double>(n)});
        }
        for (size_t i = n > 20 ? n - 20 : 0; i < n; ++i)
          cdf.push_back({a.ns[i], static_cast<double>(i + 1) / static_cast<double>(n)});
        ja["cdf"] = cdf;
      }
      j["arms"].push_back(ja);
    }
    for (const auto& t : targets)
      j["targets"].push_back({{"target", t.what},
                              {"result", !t.measured ? "not measured" : t.pass ? "PASS" : "MISS"},
                              {"detail", t.detail}});
    std::ofstream(o.json_path) << j.dump(1) << '\n';
  }
  if (!o.cdf_path.empty()) {
    std::ofstream out(o.cdf_path);
    bool first = true;
    for (const auto& a : arms) {
      if (a.ns.empty()) continue;
      if (!first) out << "\n\n";
      first = false;
      const size_t n = a.ns.size();
      out << a.name << " cdf tail\n";
      for (size_t i = 0; i < n; ++i)
        out << a.ns[i] << ' ' << static_cast<double>(i + 1) / static_cast<double>(n) << ' '
            << static_cast<double>(n - i) / static_cast<double>(n) << '\n';
    }
  }

  if (o.keep) std::fprintf(stderr, "bench_record: kept %s\n", tmp.c_str());
  else std::filesystem::remove_all(tmp);
  return 0;
}
