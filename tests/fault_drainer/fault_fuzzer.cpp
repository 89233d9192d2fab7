// fault_fuzzer: maps a live spanring segment behind the drainer's back and writes garbage into
// ONE ring (the ring of thread TID of process PID) for a fixed time, as a buggy or hostile
// producer could. The corrupt-segment test checks that the drainer quarantines that ring and
// keeps draining the others.
//
//   fault_fuzzer --segment NAME --pid PID --tid TID --mode MODE [--seconds S] [--seed N]
//
// It finds the ring (state active, owner PID/TID), waits until the drainer has written and
// committed everything published in it (tail == head: the owner is idle), prints
//   fault_fuzzer: ring I (pid PID tid TID) mode MODE
// on stdout, then attacks for S seconds (default 1), re-applying the attack every 200 us so that
// whatever the drainer reads in that time is garbage:
//   head_behind_tail  head = tail - k                 head_far_ahead  head = tail + k * capacity
//   record_length     a record whose name_len (200) is past what a slot chain may hold
//   bad_slots         a record claiming 0 slots       slots_past_head a 3-slot record, 1 published
//   bad_flags         a record with an unknown flag   bad_seq         a record with an old seq
//   bad_state         state = an unknown value        nul_name        a well-formed record whose
//                                                                     name starts with a NUL byte
//   bad_packed        a record flagged kRecordPackedAttrs whose packed attributes are malformed
//                     (a token of an unknown kind)
//   random_records    random bytes into the slots at and after tail, random head values near
//                     and far from tail, random state values (>= 5)
//   header_random     random bytes anywhere in the ring header (owner, generation, counters,
//                     open spans...) and the slots: the drainer need not notice all of it, but
//                     must survive it
//   seq_gap_uncounted a well-formed record whose sequence number skips records the ring's drop
//                     counter never counted (a gap no producer can make)
//   drops_wrap        the ring's drop counter near 2^64, so that its drops would run past the
//                     last sequence number
//   drops_implausible the ring's drop counter at 2^56 and more (more drops than nanoseconds
//                     since boot, yet far from wrapping), every other time with a well-formed
//                     record whose sequence number skips as many records as that counter covers
//   header_geometry   random values in the SEGMENT header's geometry (ring count and capacity,
//                     the ring table, journal and slot offsets, the size, journal_count), and
//                     the victim's ring-table entry pushed out of bounds (head far ahead, state
//                     unknown): the drainer keeps the geometry it validated at open, reports the
//                     damage, quarantines the victim and keeps draining the others
// The fuzzer itself finds rings through a SegmentView validated before the attack, so it never
// follows the geometry it is writing.
// Exit 0 after the attack, 3 when the ring is not found or never drained, 2 on bad usage.
#include <spanring/segment_layout.h>
#include <spanring/segment_view.h>

#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

using namespace spanring;

namespace {

struct Options {
  std::string segment;
  uint32_t pid = 0;
  uint32_t tid = 0;
  std::string mode;
  double seconds = 1.0;
  uint64_t seed = 1;
};

void sleep_us(long us) {
  const struct timespec ts = {0, us * 1000};
  ::nanosleep(&ts, nullptr);
}

class Fuzzer {
 public:
  Fuzzer(const SegmentView& view, uint32_t index, uint64_t seed)
      : h_(view.header()),
        r_(view.ring(index)),
        slots_(view.ring_slots(index)),
        cap_(view.ring_capacity()),
        rng_(seed) {
    tail0_ = r_.tail.load(std::memory_order_acquire);
    seq0_ = r_.next_seq;
  }

  // One application of the attack. Returns false for an unknown mode.
  bool attack(const std::string& mode) {
    if (mode == "head_behind_tail") {
      publish(tail0_ - 1 - rng_() % cap_);
    } else if (mode == "head_far_ahead") {
      publish(tail0_ + cap_ * (2 + rng_() % 1000));
    } else if (mode == "record_length") {
      RecordHeader rec = plausible(1);
      rec.name_len = 200;  // > kNameRawMax; one slot cannot hold it either
      put(tail0_, rec);
      publish(tail0_ + 1);
    } else if (mode == "bad_slots") {
      RecordHeader rec = plausible(1);
      rec.slots = 0;
      put(tail0_, rec);
      publish(tail0_ + 1);
    } else if (mode == "slots_past_head") {
      RecordHeader rec = plausible(1);
      rec.name_len = 65;
      rec.attrs_len = 50;  // 115 payload bytes: 3 slots, consistent, but only 1 published
      rec.slots = 3;
      put(tail0_, rec);
      publish(tail0_ + 1);
    } else if (mode == "bad_flags") {
      RecordHeader rec = plausible(1);
      rec.flags = 0x80;
      put(tail0_, rec);
      publish(tail0_ + 1);
    } else if (mode == "bad_seq") {
      RecordHeader rec = plausible(1);
      rec.seq = seq0_ > 0 ? seq0_ - 1 : 0;
      if (seq0_ == 0) rec.seq = ~uint64_t{0};  // no older seq exists; any huge one is a gap
      put(tail0_, rec);
      publish(tail0_ + 1);
    } else if (mode == "bad_state") {
      r_.state.store(5 + static_cast<uint32_t>(rng_() % 1000), std::memory_order_release);
    } else if (mode == "nul_name") {
      RecordHeader rec = plausible(1);
      rec.name_len = 4;
      rec.attrs_len = 0;
      std::memcpy(rec.payload, "\0abc", 4);
      put(tail0_, rec);
      publish(tail0_ + 1);
    } else if (mode == "bad_packed") {
      RecordHeader rec = plausible(1);
      rec.name_len = 2;
      rec.flags = static_cast<uint16_t>(rec.flags | kRecordPackedAttrs);
      // "ab", then a token of kind 3 (only 1 and 2 exist) with key "x" and no value bytes.
      std::memcpy(rec.payload, "ab\x30\x01x", 5);
      rec.attrs_len = 3;
      put(tail0_, rec);
      publish(tail0_ + 1);
    } else if (mode == "random_records") {
      switch (rng_() % 4) {
        case 0: {  // random bytes into a few slots from tail on, then publish them
          const uint64_t n = 1 + rng_() % 8;
          for (uint64_t s = 0; s < n; ++s) random_bytes(slot(tail0_ + s), kSlotBytes);
          publish(tail0_ + n);
          break;
        }
        case 1:
          publish(tail0_ + rng_() % (4 * cap_));
          break;
        case 2:
          publish(rng_());
          break;
        default:
          r_.state.store(5 + static_cast<uint32_t>(rng_() % 0xffff), std::memory_order_release);
          break;
      }
    } else if (mode == "header_random") {
      auto* bytes = reinterpret_cast<unsigned char*>(&r_);
      for (int i = 0; i < 8; ++i) bytes[rng_() % sizeof(RingHeader)] = static_cast<unsigned char>(rng_());
      random_bytes(slot(tail0_ + rng_() % cap_), kSlotBytes);
      if (rng_() % 4 == 0) publish(tail0_ + rng_() % (2 * cap_));
    } else if (mode == "seq_gap_uncounted") {
      RecordHeader rec = plausible(1);
      rec.seq = seq0_ + 2 + rng_() % 1000;
      put(tail0_, rec);
      publish(tail0_ + 1);
    } else if (mode == "drops_wrap") {
      // release: as the owner publishes its counter.
      r_.drops.store(~uint64_t{0} - rng_() % 16, std::memory_order_release);
    } else if (mode == "drops_implausible") {
      const uint64_t drops = (uint64_t{1} << 56) + rng_() % 1000;
      // release: as the owner publishes its counter before the record that skips.
      r_.drops.store(drops, std::memory_order_release);
      if (rng_() % 2 == 0) {
        RecordHeader rec = plausible(1);
        rec.seq = seq0_ + drops / 2;
        put(tail0_, rec);
        publish(tail0_ + 1);
      }
    } else if (mode == "header_geometry") {
      // Each field at a time either a huge value or one plausible but wrong.
      auto value = [this](uint64_t plausible) {
        return rng_() % 2 == 0 ? rng_() : plausible * (2 + rng_() % 7) + rng_() % 4096;
      };
      h_.ring_count = static_cast<uint32_t>(value(kMaxRingCount));
      h_.ring_capacity = static_cast<uint32_t>(value(kMaxRingCapacity));
      h_.rings_offset = value(h_.rings_offset + 1);
      h_.journal_offset = value(h_.journal_offset + 1);
      h_.slots_offset = value(h_.slots_offset + 1);
      h_.segment_bytes = value(h_.segment_bytes + 1);
      h_.journal_count = static_cast<uint32_t>(value(kMaxRingCount));
      publish(tail0_ + cap_ * (2 + rng_() % 1000));
      if (rng_() % 2 == 0)
        r_.state.store(5 + static_cast<uint32_t>(rng_() % 1000), std::memory_order_release);
    } else {
      return false;
    }
    ++writes_;
    return true;
  }

  uint64_t writes() const { return writes_; }

 private:
  // A record that passes every check, to be spoiled by one field.
  RecordHeader plausible(uint16_t slots) {
    RecordHeader rec{};
    rec.seq = seq0_;
    rec.ts_ns = 1000;
    rec.dur_ns = 10;
    rec.name_len = 3;
    rec.attrs_len = 0;
    rec.slots = slots;
    rec.flags = 0;
    std::memcpy(rec.payload, "bad", 3);
    return rec;
  }
  std::byte* slot(uint64_t pos) { return slots_ + (pos & (cap_ - 1)) * kSlotBytes; }
  void put(uint64_t pos, const RecordHeader& rec) { std::memcpy(slot(pos), &rec, sizeof rec); }
  // release: the garbage above is complete before the drainer's acquire of head sees it.
  void publish(uint64_t head) { r_.head.store(head, std::memory_order_release); }
  void random_bytes(std::byte* p, size_t n) {
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>(rng_());
  }

  SegmentHeader& h_;
  RingHeader& r_;
  std::byte* slots_;
  uint64_t cap_;
  std::mt19937_64 rng_;
  uint64_t tail0_ = 0;
  uint64_t seq0_ = 0;
  uint64_t writes_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"fault_fuzzer: writes garbage into one ring of a live segment (see the file)"};
  app.add_option("--segment", o.segment, "segment name (SPANRING_SEGMENT)")->required();
  app.add_option("--pid", o.pid, "pid of the victim ring's owner")->required();
  app.add_option("--tid", o.tid, "tid of the victim ring's owner")->required();
  app.add_option("--mode", o.mode, "the kind of garbage (see the file)")->required();
  app.add_option("--seconds", o.seconds, "how long to attack")->capture_default_str();
  app.add_option("--seed", o.seed, "random seed")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;  // bad usage, as the header says (CLI11's own codes would collide with 3)
  }
  const int fd = ::shm_open(o.segment.c_str(), O_RDWR, 0);
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < kSegmentHeaderBytes) {
    std::fprintf(stderr, "fault_fuzzer: cannot open segment %s: %s\n", o.segment.c_str(),
                 std::strerror(errno));
    return 3;
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED,
                   fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    std::fprintf(stderr, "fault_fuzzer: mmap: %s\n", std::strerror(errno));
    return 3;
  }
  SegmentView view;
  std::string why;
  if (!SegmentView::validate(static_cast<std::byte*>(p), static_cast<uint64_t>(st.st_size), view,
                             why)) {
    std::fprintf(stderr, "fault_fuzzer: %s is not a usable spanring segment: %s\n",
                 o.segment.c_str(), why.c_str());
    return 3;
  }

  // The victim's ring, once its owner is idle and the drainer has committed all of it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int64_t index = -1;
  while (std::chrono::steady_clock::now() < deadline) {
    for (uint32_t i = 0; i < view.ring_count() && index < 0; ++i) {
      const RingHeader& r = view.ring(i);
      if (r.state.load(std::memory_order_acquire) == kRingActive && r.owner_pid == o.pid &&
          r.owner_tid == o.tid)
        index = i;
    }
    if (index >= 0) {
      const RingHeader& r = view.ring(static_cast<uint32_t>(index));
      if (r.tail.load(std::memory_order_acquire) == r.head.load(std::memory_order_acquire) &&
          r.head.load(std::memory_order_relaxed) != 0)
        break;
    }
    sleep_us(1000);
  }
  if (index < 0 || std::chrono::steady_clock::now() >= deadline) {
    std::fprintf(stderr, "fault_fuzzer: no idle, drained ring of pid %u tid %u in %s\n", o.pid,
                 o.tid, o.segment.c_str());
    return 3;
  }
  std::printf("fault_fuzzer: ring %lld (pid %u tid %u) mode %s\n", static_cast<long long>(index),
              o.pid, o.tid, o.mode.c_str());
  std::fflush(stdout);

  Fuzzer f(view, static_cast<uint32_t>(index), o.seed);
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::microseconds(static_cast<int64_t>(o.seconds * 1e6));
  while (std::chrono::steady_clock::now() < end) {
    if (!f.attack(o.mode)) {
      std::fprintf(stderr, "fault_fuzzer: unknown mode %s\n", o.mode.c_str());
      return 2;
    }
    sleep_us(200);
  }
  std::printf("fault_fuzzer: %llu attacks in %.1f s\n", static_cast<unsigned long long>(f.writes()),
              o.seconds);
  return 0;
}
