// ir_guest_loop: N records of one arm on a fresh thread of a fresh segment, for counting the
// instructions a record costs on a target that callgrind cannot run here (aarch64 under
// qemu-user: bench/ir-aarch64 counts what qemu executes). The arms are bench_record's, with
// its name, attribute text and values (bench_record.cpp), without its timing, so that the two
// runs bench/ir-aarch64 makes (N1 and N2 records) differ only by N2 - N1 records.
//
//   ir_guest_loop ARM N      ARM: emit, emit_site, span, span_noattr, span_site, span_site_noattr
//
// Each arm's batch runs twice first (the thread's first record claims its ring, every site
// and string id is resolved), then N times. The segment has 4 rings of 65,536 slots, so up to
// 65,534 records are never dropped; N is refused above that. Exits 1, saying so, when a
// record was dropped (a dropped record costs less and would pull the count down) or the
// thread's ring holds fewer than N + 2 records' slots.
#include <spanring/segment.h>
#include <spanring/span.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {
#define NAME "bench.span.rec16"
#define ATTRS_TEXT "run_id=7 task_slot=42 worker_id=1 dispatch_id=1234567"

struct Vals {
  uint64_t run_id, task_slot, worker_id, dispatch_id;
};
inline Vals vals(uint64_t n) noexcept {
  return {7 + (n & 1), 10 + n % 54, n & 1, 1000000 + n % 9000000};
}

__attribute__((noinline)) void batch_emit(int count, uint64_t n) {
  for (int i = 0; i < count; ++i, ++n)
    spanring::emit(NAME, static_cast<int64_t>(1'000'000'000 + n * 1000), 500, ATTRS_TEXT);
}
__attribute__((noinline)) void batch_emit_site(int count, uint64_t n) {
  for (int i = 0; i < count; ++i, ++n)
    SPANRING_EMIT(NAME, static_cast<int64_t>(1'000'000'000 + n * 1000), 500, ATTRS_TEXT);
}
__attribute__((noinline)) void batch_span(int count, uint64_t n) {
  for (int i = 0; i < count; ++i) {
    const Vals v = vals(n++);
    spanring::Span s{NAME};
    s.attr("run_id", v.run_id)
        .attr("task_slot", v.task_slot)
        .attr("worker_id", v.worker_id)
        .attr("dispatch_id", v.dispatch_id);
  }
}
__attribute__((noinline)) void batch_span_noattr(int count, uint64_t) {
  for (int i = 0; i < count; ++i) {
    spanring::Span s{NAME};
  }
}
__attribute__((noinline)) void batch_span_site(int count, uint64_t n) {
  for (int i = 0; i < count; ++i) {
    const Vals v = vals(n++);
    SPANRING_SPAN(s, NAME);
    s.attr("run_id", v.run_id)
        .attr("task_slot", v.task_slot)
        .attr("worker_id", v.worker_id)
        .attr("dispatch_id", v.dispatch_id);
  }
}
__attribute__((noinline)) void batch_span_site_noattr(int count, uint64_t) {
  for (int i = 0; i < count; ++i) {
    SPANRING_SPAN(s, NAME);
  }
}

struct Arm {
  const char* name;
  void (*batch)(int, uint64_t);
};
constexpr Arm kArms[] = {{"emit", batch_emit},
                         {"emit_site", batch_emit_site},
                         {"span", batch_span},
                         {"span_noattr", batch_span_noattr},
                         {"span_site", batch_span_site},
                         {"span_site_noattr", batch_span_site_noattr}};
}  // namespace

int main(int argc, char** argv) {
  const Arm* arm = nullptr;
  for (const Arm& a : kArms)
    if (argc == 3 && std::strcmp(argv[1], a.name) == 0) arm = &a;
  const long n = argc == 3 ? std::strtol(argv[2], nullptr, 10) : -1;
  if (arm == nullptr || n < 0 || n > 65534) {
    std::fprintf(stderr, "usage: ir_guest_loop ARM N (N <= 65534); ARM: emit emit_site span "
                         "span_noattr span_site span_site_noattr\n");
    return 2;
  }
  const std::string name = "spanring-ir-guest-" + std::to_string(::getpid());
  spanring::Segment seg = spanring::Segment::create(name, spanring::SegmentOptions{4, 65536});
  if (!spanring::attach(name.c_str())) {
    spanring::Segment::remove(name);
    return 1;
  }
  std::thread([&] {
    arm->batch(2, 0);
    arm->batch(static_cast<int>(n), 2);
  }).join();
  uint64_t dropped = 0, head = 0;
  for (uint32_t i = 0; i < seg.ring_count(); ++i) {
    // acquire: the thread has been joined; these pair with its stores all the same.
    dropped += seg.ring(i).drops.load(std::memory_order_acquire);
    const uint64_t h = seg.ring(i).head.load(std::memory_order_acquire);
    head = h > head ? h : head;
  }
  spanring::Segment::remove(name);
  if (dropped != 0 || head < static_cast<uint64_t>(n) + 2) {
    std::fprintf(stderr, "ir_guest_loop: %llu records dropped, the ring's head at %llu of %ld\n",
                 static_cast<unsigned long long>(dropped), static_cast<unsigned long long>(head),
                 n + 2);
    return 1;
  }
  return 0;
}
