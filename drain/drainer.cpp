#include "drain/drainer.h"

#include "drain/diagnostics.h"
#include "format/binary_format.h"
#include "format/strace_format.h"
#include "src/record_decode.h"

#include "src/proc.h"

#include <spanring/encode.h>
#include <spanring/test_point.h>


#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <unordered_map>

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace spanring {
namespace {

// The most records any producer can have dropped: one per nanosecond since the machine booted
// (CLOCK_BOOTTIME counts suspend too). Even a drop that only bumps a counter costs a thread
// several ns, so a drop counter above this is corrupt shared memory, not a loss to report; taken
// as a loss it would put an absurd count (2^56 records, say) into the trace and the summary.
uint64_t max_plausible_drops() noexcept {
  timespec ts{};
  if (clock_gettime(CLOCK_BOOTTIME, &ts) != 0) return UINT64_MAX;
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

// Owner checks (every ~100 ms) a ring may stay mid-claim before its claimer is presumed dead:
// a claim takes microseconds, so only a process killed inside it stays there this long.
constexpr uint32_t kClaimStuckChecks = 50;

// A process' command line (NUL-separated arguments) from /proc, at most 4 KiB; empty when the
// process is gone.
// open/read rather than an ifstream: its locale and buffer set-up cost the drainer's first
// record of a process several thousand instructions.
std::string read_cmdline(uint32_t pid) {
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%u/cmdline", pid);
  std::string s(4096, '\0');
  size_t got = 0;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    while (got < s.size()) {
      const ssize_t n = ::read(fd, s.data() + got, s.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  s.resize(got);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

}  // namespace

// ---- Drainer -------------------------------------------------------------------------------

Drainer::Drainer(const Segment& segment, Destination& destination, Sink& sink,
                 const std::unordered_set<uint32_t>& known_pids)
    : view_(segment.view()), journal_(view_), dest_(destination), sink_(sink),
      rings_(view_.ring_count()) {
  for (const uint32_t pid : known_pids) anchored_pids_.emplace(pid, 0);
  SegmentHeader& h = view_.header();
  // The destination is now the segment's output; a new file starts with nothing committed. A
  // destination with no file (the flight recorder) names none: a `spanring drain` started on
  // this segment later recovers nothing from any file and resumes from the committed tails.
  const uint64_t kept_bytes = destination.kept_bytes();
  journal_.set_output(destination.dev(), destination.ino(), kept_bytes);
  no_ring_reported_ = h.no_ring_reported;
  vfork_reported_ = h.vfork_reported;
  // The records a killed drainer kept out of this file: its kept prefix does not report them.
  max_size_unreported_ = kept_bytes != 0 ? h.max_size_dropped : 0;
  h.max_size_dropped = max_size_unreported_;
  // Records earlier drainers of this segment could not write (journaled): the summary's count
  // covers the whole run, as written + dropped + unwritten covers what was emitted.
  stats_.unwritten = stats_.unwritten_before = h.unwritten;
  record_room_ = 4 * sink.max_event_bytes();
  text_ = dynamic_cast<TextSink*>(&sink);
  runs_ = sink.runs();
  clock_events_ = sink.clock_events();
  eager_ = destination.eager();
  destination.attach(events_, sink.max_event_bytes());
}

Drainer::~Drainer() {
  while (dest_.in_flight() != 0) dest_.collect(100000);
}

void Drainer::start_buffer() {
  current_ = dest_.take();
  // After take(): a failure it reported (durable()) moved the epoch, and this buffer is of
  // the new one.
  stamp(current_);
  if (current_->capacity == 0) {
    // The destination takes no more bytes (--max-size, or a rotation that failed): this buffer
    // and every later one carry only the tails of what was consumed (and counted) since.
    full_ = true;
    stats_.reached_max_size = true;
    current_->len = frame_bytes_ = 0;
    return;
  }
  current_->len = frame_bytes_ = sink_.begin_buffer(current_->data.get());
}

void Drainer::new_file(uint64_t dev, uint64_t ino) {
  // Every buffer of the previous file is durable and committed; the segment names the new file
  // from here on.
  journal_.set_output(dev, ino, 0);
  ++stats_.files;
  // The new file reads alone: its own header, and every process and thread announced again
  // before its first span there.
  sink_.begin_file();
  defined_ = fresh_defined();
  runs_ = sink_.runs();
  clock_events_ = sink_.clock_events();
  clock_reset_ = true;
  clock_pending_.clear();
  anchored_pids_.clear();
  for (RingState& rs : rings_) {
    rs.anchor_known = false;
    rs.announced = false;
  }
}

void Drainer::forget_process(uint32_t pid) { anchored_pids_.erase(pid); }

void Drainer::write_max_size_line() {
  // The room kept back for this line since the start (the destination's take_closing()),
  // unless a previous drainer's line already used it.
  Buffer* b = dest_.take_closing();
  stamp(b);
  const size_t frame = sink_.begin_buffer(b->data.get());
  const size_t n = sink_.drops(b->data.get() + frame,
                               DropsEvent{0, 0, max_size_unreported_, 0, 0, DropReason::kMaxSize});
  if (frame + n > b->capacity) {
    report("spanring: the line reporting the %llu records kept out of %s does not "
                 "fit in it any more (a previous drainer's line is there)\n",
                 static_cast<unsigned long long>(max_size_unreported_), dest_.name().c_str());
    dest_.give_back(b);
    return;
  }
  b->len = frame + n;
  frame_bytes_ = frame;
  current_ = b;
  max_size_unreported_ = 0;  // committed with this buffer: the file now reports them
  submit_current();
  stats_.max_size_line_written = true;
}

char* Drainer::reserve_slow(size_t bytes) {
  if (current_ != nullptr && !full_ && current_->capacity - current_->len < bytes)
    submit_current();
  if (current_ == nullptr) start_buffer();
  return full_ ? nullptr : current_->data.get() + current_->len;
}

void Drainer::add_dirty(uint32_t index, RingState& rs) {
  rs.dirty = true;
  dirty_.push_back(index);
}

void Drainer::submit_current() {
  if (current_ == nullptr) return;
  Commit& c = commits_.open();
  for (uint32_t i : dirty_) {
    RingState& rs = rings_[i];
    rs.dirty = false;
    rs.handed_pos = rs.reader.position();
    c.tails.push_back(TailUpdate{i, rs.generation, rs.reader.position(), rs.next_seq,
                                 rs.drops_reported, rs.gone && rs.freeing, rs.pid, rs.tid,
                                 rs.first_seq});
  }
  dirty_.clear();
  Buffer* b = current_;
  current_ = nullptr;
  if (b->capacity != 0) sink_.end_buffer(b->data.get(), b->len);  // not for a carrier
  c.max_size_dropped = max_size_unreported_;
  c.epoch = b->epoch;
  c.serial = serial_;
  // Sealed first: a destination that holds the bytes at once (the flight recorder) reports
  // them durable from inside submit().
  dest_.submit(b, commits_.seal());
}

void Drainer::flush_partial() {
  if (current_ != nullptr && (current_->len > frame_bytes_ || !dirty_.empty())) submit_current();
  dest_.collect(0);
}

bool Drainer::wait_for_write(int64_t timeout_us) { return dest_.collect(timeout_us); }

bool Drainer::wait_for_claim(int64_t timeout_us) {
  if (timeout_us <= 0) return false;
  std::atomic<uint32_t>& word = view_.header().ring_claims;
  timespec ts{static_cast<time_t>(timeout_us / 1'000'000),
              static_cast<long>(timeout_us % 1'000'000) * 1000};
  // FUTEX_WAIT sleeps only while the word still holds claims_seen_ (EAGAIN otherwise), so a
  // claim between the poll's read and this call is not missed. Relative timeout (monotonic).
  // Not FUTEX_PRIVATE_FLAG: producers wake it from their own processes.
  const long rc = ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT,
                            claims_seen_, &ts, nullptr, 0);
  // Woken, EAGAIN (moved already) or EINTR: early; the next poll() reads the word.
  return rc == 0 || errno != ETIMEDOUT;
}

void Drainer::durable(bool failed, uint64_t end) {
  Commit& c = commits_.front();
  if (failed) {
    // The records are not in the file: they were counted as written when formatted.
    stats_.written -= c.records;
    stats_.unwritten += c.records;
    // A buffer of the current epoch failed: the first failure the drainer learns of since the
    // epoch began (the writer fails every buffer of an epoch up to this one after it, drain/
    // uring_writer.h). One of an older epoch was refused by that rule, its announcements
    // already taken back when the failure before it was learned of.
    if (c.epoch == failures_ + 1) {
      ++failures_;
      lose_announcements(c.serial, end);
    }
  }
  c.unwritten = stats_.unwritten;
  // Commit: journal the drainer lines this buffer brings (drain/journal.h). A crash before
  // the journal is pending cuts the file back to the old commit; after, recover() ends it.
  auto live = [this](const TailUpdate& t) {
    const RingState& rs = rings_[t.ring];
    return rs.owned && rs.generation == t.generation;
  };
  journal_.commit(c, end, live);
  // A freed ring's next owner is adopted afresh.
  for (const TailUpdate& t : c.tails)
    if (t.free_after && live(t)) rings_[t.ring] = RingState{};
  commits_.pop();
}

void Drainer::lose_announcements(uint64_t serial, uint64_t end) {
  // String definitions and clock samples: all of them again (cheap; a file may define an id
  // twice, docs/binary-format.md).
  defined_ = fresh_defined();
  clock_reset_ = true;
  clock_pending_.clear();
  // Anchors and threads announced in the failed buffer or a later one (all of the old epoch):
  // announced again before the owner's next record. Those in durable buffers stay (one anchor
  // per pid).
  for (auto it = anchored_pids_.begin(); it != anchored_pids_.end();)
    it = it->second >= serial ? anchored_pids_.erase(it) : std::next(it);
  for (RingState& rs : rings_) {
    if (rs.announced && rs.announced_serial >= serial) rs.announced = false;
    if (rs.anchor_known && anchored_pids_.count(rs.pid) == 0) rs.anchor_known = false;
  }
  // Nothing of the current file is durable: its header (the first buffer's) went with the
  // failure; the next buffer begins the file again. A kept prefix, or a rotated file's first
  // durable buffer, has it (end > 0).
  if (end == 0) {
    sink_.begin_file();
    runs_ = sink_.runs();
    clock_events_ = sink_.clock_events();
  }
  // The buffer being filled is of the old epoch (doomed): no more goes into it, the next
  // reserve() hands it over and begins a buffer of the new epoch. (Not a carrier of capacity
  // 0 past --max-size: it holds no bytes.)
  if (current_ != nullptr && current_->capacity != 0) current_->capacity = current_->len;
}

void Drainer::drops_line(const RingState& rs, uint64_t dropped, uint64_t first, uint64_t last,
                         DropReason reason) {
  char* p = reserve(sink_.max_event_bytes());
  if (p == nullptr) {
    count_max_size(dropped);  // past --max-size: not in the file, whatever the reason
    return;
  }
  commit(sink_.drops(p, DropsEvent{rs.pid, rs.tid, dropped, first, last, reason}));
  count_dropped(reason, dropped);
}

std::pair<uint64_t, uint64_t> Drainer::process_anchor(const RingState& rs,
                                                      const RecordCopy& first) const {
  // The anchor's mono_ns must be <= every span start of the pid. Spans timed by the process
  // start after its anchor; an explicit record that starts before it makes the producer set
  // anchor_origin (in the process and in its ring) before publishing, and then the anchor is
  // announced at the clock's origin, (0, wall - mono), which keeps the offset. Shared memory is
  // untrusted: a pair with wall < mono is announced as it is (the consumer's problem, not ours
  // to invent a value), and the first record's start lowers the anchor if it is lower still.
  uint64_t mono = rs.anchor_mono;
  uint64_t wall = rs.anchor_wall;
  bool origin = false;
  for (uint32_t i = 0; i < rings_.size() && !origin; ++i) {
    const RingHeader& r = view_.ring(i);
    // acquire: pairs with the claim's release of kRingActive, after the owner fields.
    const uint32_t state = r.state.load(std::memory_order_acquire);
    if ((state != kRingActive && state != kRingReleased) || r.owner_pid != rs.pid ||
        r.owner_start_time != rs.start_time)
      continue;
    // relaxed: for the first record's ring, its release of head (which we acquired) orders the
    // flag; another ring's flag is set for records we have not read yet.
    origin = r.anchor_origin.load(std::memory_order_relaxed) != 0;
  }
  if (origin && wall >= mono) return {0, wall - mono};
  const uint64_t ts = first.header.ts_ns;
  if (ts < mono && !is_device_span(first) && mono - ts <= wall) {
    wall -= mono - ts;
    mono = ts;
  }
  return {mono, wall};
}

void Drainer::adopt_owner(uint32_t index, RingState& rs) {
  const RingHeader& r = view_.ring(index);
  rs = RingState{};
  rs.owned = true;
  rs.generation = r.generation;
  rs.pid = r.owner_pid;
  rs.tid = r.owner_tid;
  rs.start_time = r.owner_start_time;
  rs.anchor_mono = r.anchor_mono_ns;
  rs.anchor_wall = r.anchor_wall_ns;
  rs.anchor_tsc = r.anchor_tsc;
  // relaxed: tail is written only by drainers, and a previous drainer's stores were made
  // before its release of the drainer lock, which we acquired.
  rs.reader = RingReader(&r, view_.ring_slots(index), view_.ring_capacity(),
                         r.tail.load(std::memory_order_relaxed), &strings_);
  if (r.drained_generation == rs.generation) {
    // A previous drainer already wrote part of this owner's records: resume its accounting.
    rs.next_seq = r.next_seq;
    rs.drops_reported = r.drops_reported;
  }
  rs.first_seq = rs.next_seq;
  rs.handed_pos = rs.reader.position();
  if (anchored_pids_.count(rs.pid) == 0) {
    auto it = cmdlines_.find(rs.pid);
    if (it == cmdlines_.end() || it->second.start_time != rs.start_time) {
      if (it == cmdlines_.end() && cmdlines_.size() >= rings_.size()) cmdlines_.clear();
      cmdlines_[rs.pid] = Cmdline{rs.start_time, read_cmdline(rs.pid)};
    }
  }
  pids_.insert(rs.pid);
  // A thread claims one ring for its life (a forked or exec'd image is a new owner), so owners
  // adopted are threads; counted, not kept, so that thread churn does not grow the drainer.
  stats_.processes = pids_.size();
  ++stats_.threads;
}

void Drainer::quarantine(uint32_t index, RingState& rs, const std::string& why) {
  RingHeader& r = view_.ring(index);
  report("spanring: ring %u (pid %u tid %u) quarantined: %s\n", index, rs.pid,
               rs.tid, why.c_str());
  rs.quarantined = true;
  ++stats_.corrupt_rings;
  // The producer keeps writing into it (it never reads state); nobody reads it again.
  r.state.store(kRingQuarantined, std::memory_order_relaxed);
  // What this owner dropped and did not get reported is lost with the ring: count what we can
  // (the published records past our read position are counted by the ring's drop line below
  // only as far as the drop counter tells; the rest is unknowable in a corrupt ring).
  // A counter that went backwards, whose range would run past sequence number 2^64 - 1, or
  // that counts more drops than nanoseconds since boot (max_plausible_drops) is part of the
  // corruption and tells nothing: then nothing is reported from it.
  const uint64_t drops = r.drops.load(std::memory_order_acquire);
  uint64_t lost = drops > rs.drops_reported ? drops - rs.drops_reported : 0;
  if (lost != 0 && (lost - 1 > UINT64_MAX - rs.next_seq || drops > max_plausible_drops())) {
    report("spanring: ring %u: its drop counter %llu is corrupt too; its drops "
                 "are not reported\n", index, static_cast<unsigned long long>(drops));
    lost = 0;
  }
  if (lost != 0) drops_line(rs, lost, rs.next_seq, rs.next_seq + lost - 1, DropReason::kCorrupt);
  rs.drops_reported += lost;
  mark_dirty(index, rs);
}

void Drainer::report_unfinished(uint32_t index, RingState& rs) {
  const RingHeader& r = view_.ring(index);
  const uint32_t depth = r.open_depth.load(std::memory_order_relaxed);
  const uint32_t described = depth < kOpenSpanMax ? depth : kOpenSpanMax;
  for (uint32_t d = 0; d < described; ++d) {
    OpenSpan o;
    std::memcpy(&o, &r.open[d], sizeof o);  // one read of shared memory, then checks
    if (d + 1 == depth && rs.has_last && o.ts_ns == rs.last_ts && d == rs.last_depth)
      break;  // published just before the kill: written, not unfinished
    std::string_view name(o.name, o.name_len <= kOpenNameBytes ? o.name_len : kOpenNameBytes);
    bool name_cut = (o.flags & kOpenNameCut) != 0;
    if (o.name_id != 0) {
      // An interned name: resolved through the table like a compact record's, and reported as
      // an inline one would be (its first kOpenNameBytes bytes, cut beyond). An id that does
      // not resolve gives no name: reported as `?`, like an empty one.
      std::string why;
      if (strings_.resolve(o.name_id, name, why)) {
        name_cut = name.size() > kOpenNameBytes;
        if (name_cut) name = name.substr(0, kOpenNameBytes);
      } else {
        name = {};
        name_cut = false;
        report("spanring: ring %u (pid %u tid %u): unfinished span at depth %u: "
                     "%s; reported without a name\n", index, rs.pid, rs.tid, d, why.c_str());
      }
    }
    const uint64_t ts = (o.flags & kOpenTsc) != 0 ? clock_.to_ns(o.ts_ns, TscClock::Pair{rs.anchor_tsc, rs.anchor_mono})
                                   : o.ts_ns;
    char* p = reserve(sink_.max_event_bytes());
    ++stats_.unfinished;
    if (p == nullptr) continue;  // past --max-size: counted, not written
    commit(sink_.unfinished(p, UnfinishedEvent{rs.pid, rs.tid, o.inv, d, ts,
                                               name, name_cut, {}}));
  }
  if (depth > described && depth <= (1u << 20)) {
    char* p = reserve(sink_.max_event_bytes());
    if (p != nullptr)
      commit(sink_.undescribed(p, UndescribedEvent{rs.pid, rs.tid, depth - described}));
    stats_.unfinished += depth - described;
  }
}

void Drainer::finish_owner(uint32_t index, RingState& rs) {
  // The owner is gone and everything it published is read: report drops after its last
  // record and the spans it left open, then free the ring once this buffer is committed.
  const RingHeader& r = view_.ring(index);
  const uint64_t drops = r.drops.load(std::memory_order_acquire);
  if (drops > rs.drops_reported && drops - rs.drops_reported - 1 > UINT64_MAX - rs.next_seq) {
    // Its drops would run the owner's sequence numbers past 2^64: no producer gets there.
    quarantine(index, rs, "drop counter " + std::to_string(drops) + " is past any sequence " +
                              "number (" + std::to_string(rs.next_seq) + " next)");
    return;
  }
  if (drops > rs.drops_reported && drops > max_plausible_drops()) {
    quarantine(index, rs, "drop counter " + std::to_string(drops) +
                              " is more records than nanoseconds since boot: corrupt");
    return;
  }
  if (drops > rs.drops_reported) {
    const uint64_t n = drops - rs.drops_reported;
    drops_line(rs, n, rs.next_seq, rs.next_seq + n - 1, DropReason::kRingFull);
    rs.next_seq += n;
    rs.drops_reported = drops;
  }
  if (rs.died) report_unfinished(index, rs);
  rs.freeing = true;
  mark_dirty(index, rs);
}

void Drainer::drain_ring(uint32_t index, bool final_pass) {
  RingState& rs = rings_[index];
  if (rs.quarantined || rs.freeing) return;
  RingHeader& r = view_.ring(index);
  // acquire: pairs with the producer's release of kRingActive (owner fields) or
  // kRingReleased (its last head).
  const uint32_t state = r.state.load(std::memory_order_acquire);
  if (state == kRingActive || state == kRingReleased) {
    if (!rs.owned || r.generation != rs.generation) adopt_owner(index, rs);
    if (state == kRingReleased) rs.gone = true;
  } else if (state == kRingFree || state == kRingClaiming || state == kRingQuarantined) {
    return;
  } else {
    if (rs.owned) quarantine(index, rs, "unknown ring state " + std::to_string(state));
    return;
  }
  if (final_pass && !rs.gone) {
    rs.gone = true;  // the caller says every producer process has exited
    rs.died = true;
  }

  RingReader& reader = rs.reader;
  const uint64_t head = reader.head();
  peak_slots_ = std::max(peak_slots_, head - reader.position());
  if (head - reader.position() > reader.capacity()) {
    quarantine(index, rs, "head " + std::to_string(head) + " is not within one ring of tail " +
                              std::to_string(reader.position()));
    return;
  }
  // While the producer is writing (its head moved since the last poll), stop kHeadMarginSlots
  // slots before the 128-byte pair of slot lines that holds head, so that neither this read nor
  // the hardware prefetchers it trains reach the lines the producer fills next (which it has
  // prefetched for writing, kPrefetchSlots ahead) and would have to take back. What is left is
  // read at the next poll, or at once when the producer has not moved by then (a ring that went
  // quiet is read to its head).
  uint64_t stop = head;
  if (!to_head_ && !rs.gone && head != rs.seen_head) {
    const uint64_t pair_phase =
        (reinterpret_cast<uintptr_t>(view_.ring_slots(index)) / kSlotBytes) & 1;
    stop = ((head + pair_phase) & ~uint64_t{1}) - pair_phase;
    // Unsigned: a pair start behind the read position is a huge difference, read as nothing.
    const uint64_t readable = stop - reader.position();
    stop = readable > kHeadMarginSlots && readable <= reader.capacity() ? stop - kHeadMarginSlots
                                                                        : reader.position();
  }
  rs.seen_head = head;
  RecordCopy rec;
  std::string why;
  // TSC times convert through one TscClock::Spans per call: the owner's anchor is fixed once
  // adopt_owner() ran (above) and the clock takes samples only between polls, so its lookups
  // (the last sample, the rate, the slope below it) are made once for this ring's records,
  // at the first record that carries TSC times. The same ns as span_ns() (test_tsc_clock).
  std::optional<TscClock::Spans> spans;
  // position < stop, in ring arithmetic (both within one ring of each other, checked above).
  while (stop - reader.position() - 1 < reader.capacity()) {
    // Runs once the owner is announced (its first record goes the record-by-record way, which
    // anchors its process on it); the record-by-record path below takes one record whenever
    // drain_run() does not.
    if (runs_ && rs.announced && rs.anchor_known && !full_) {
      const int64_t taken = drain_run(index, rs, stop);
      if (taken != 0) continue;
    }
    // Room first, before the read moves the reader: a buffer submitted to make room records
    // this ring's tail and next_seq, and both must stand before this record, which goes into
    // the next buffer. (Reserved after the read, the tail would cover a record that is not in
    // the committed bytes: a drainer killed between the two commits lost it on restart.)
    char* p = reserve(record_room_);
    // The text drainer's direct path: a span record of an announced owner, in sequence, whose
    // name and attributes need no escaping is formatted straight from the ring's slots (its
    // header copied once and checked as read() checks it; the payload read once, by the line's
    // own vector copies), a compact one from its slot's copy and the string table's checked
    // copies. Anything else (a gap, a marker, a wrapping record, a string id that does not
    // resolve, a byte to escape, a NUL in the name, a frame read() refuses, --max-size) takes
    // read() and the RecordCopy below, from the start: nothing is changed before the line is
    // written whole.
    static_assert(kPlainLineRoom <= 4 * kMaxLineBytes);  // record_room_ of a TextSink
    if (text_ != nullptr && p != nullptr && rs.announced && rs.anchor_known) {
      RecordHeader ph;
      size_t n = 0;
      uint16_t slots = 1;
      uint64_t raw_ts = 0;
      if (const std::byte* payload = reader.peek_plain(head, stop, rs.next_seq, ph)) {
        raw_ts = ph.ts_ns;
        if (ph.flags & kRecordTsc) {
          if (!spans) spans.emplace(clock_, TscClock::Pair{rs.anchor_tsc, rs.anchor_mono});
          const TscClock::Interval ns = (*spans)(ph.ts_ns, ph.dur_ns);
          ph.ts_ns = ns.start_ns;
          ph.dur_ns = ns.dur_ns;
        }
        n = text_->span_plain(p, rs.pid, rs.tid, ph, reinterpret_cast<const char*>(payload));
        slots = ph.slots;
      } else if (CompactRecord c; reader.peek_compact(head, rs.next_seq, c, why)) {
        uint16_t ids[1 + kCompactAttrs];
        std::string_view strings[1 + kCompactAttrs];
        const uint32_t k = compact_string_ids(c, ids);
        bool resolved = true;
        for (uint32_t i = 0; i < k && resolved; ++i)
          resolved = strings_.resolve(ids[i], strings[i], why);
        if (resolved) {
          raw_ts = c.ts_ns;
          ph.ts_ns = c.ts_ns;
          ph.dur_ns = c.dur_ns;
          if (c.flags & kRecordTsc) {
            if (!spans) spans.emplace(clock_, TscClock::Pair{rs.anchor_tsc, rs.anchor_mono});
            const TscClock::Interval ns = (*spans)(c.ts_ns, c.dur_ns);
            ph.ts_ns = ns.start_ns;
            ph.dur_ns = ns.dur_ns;
          }
          ph.inv = c.inv;
          ph.hid = c.hid;
          ph.depth = c.depth;
          ph.seq = rs.next_seq;
          n = text_->span_compact(p, rs.pid, rs.tid, ph, c, strings);
        }
      }
      if (n != 0) {
        reader.advance(slots);
        ++commits_.open().records;
        ++stats_.written;
        rs.last_ts = raw_ts;
        rs.last_depth = ph.depth;
        rs.has_last = true;
        commit(n);
        rs.next_seq = ph.seq + 1;
        mark_dirty(index, rs);
        continue;
      }
    }
    const ReadStatus status = reader.read(head, rs.next_seq, rec, why);
    if (status == ReadStatus::kCorrupt) {
      quarantine(index, rs, why);
      return;
    }
    const RecordHeader& h = rec.header;
    if (h.seq > rs.next_seq) {
      // A gap: the producer found the ring full for these records. It counted each of them in
      // drops (release) before it published this record's head (release), which we acquired:
      // a gap the counter does not cover is a corrupt sequence number, not a loss to report.
      const uint64_t n = h.seq - rs.next_seq;
      const uint64_t drops = r.drops.load(std::memory_order_acquire);
      if (drops > max_plausible_drops()) {
        quarantine(index, rs, "drop counter " + std::to_string(drops) +
                                  " is more records than nanoseconds since boot: corrupt");
        return;
      }
      if (drops < rs.drops_reported || n > drops - rs.drops_reported) {
        quarantine(index, rs,
                   "record at slot " + std::to_string(reader.position() - h.slots) +
                       " skips " + std::to_string(n) + " sequence numbers (from " +
                       std::to_string(rs.next_seq) + "), more than its drop counter (" +
                       std::to_string(drops) + ", " + std::to_string(rs.drops_reported) +
                       " reported) covers");
        return;
      }
    }
    if (p == nullptr) {
      // Past --max-size: every sequence number up to this record's last is consumed and
      // counted, whether it was a span, a drop marker or a gap (the gap still counts against
      // the ring's drop counter, so that the next gap is checked against the right total).
      const uint64_t seqs = (h.flags & kRecordReentrant) && !(h.flags & kRecordInvalid)
                                ? h.dur_ns
                                : 1;
      rs.drops_reported += h.seq - rs.next_seq;
      count_max_size(h.seq - rs.next_seq + seqs);
      if (!(h.flags & (kRecordInvalid | kRecordReentrant))) {
        rs.last_ts = h.ts_ns;
        rs.last_depth = h.depth;
        rs.has_last = true;
      }
      rs.next_seq = h.seq + seqs;
      mark_dirty(index, rs);
      continue;
    }
    char* const start = p;
    if (h.seq > rs.next_seq) {
      const uint64_t n = h.seq - rs.next_seq;
      p += sink_.drops(p, DropsEvent{rs.pid, rs.tid, n, rs.next_seq, h.seq - 1,
                                     DropReason::kRingFull});
      count_dropped(DropReason::kRingFull, n);
      rs.drops_reported += n;
    }
    uint64_t seqs = 1;  // sequence numbers this record takes
    if (status == ReadStatus::kBadString) {
      // A compact record naming a string id that does not resolve: the ring's framing is
      // intact (one slot, its sequence number known), so this one record is lost as corrupt
      // and the ring goes on being read. Said once per owner (report()), counted every time.
      if (!rs.bad_string_said) {
        rs.bad_string_said = true;
        report(
                     "spanring: ring %u (pid %u tid %u): a record is dropped as corrupt: %s "
                     "(later ones of this thread are counted, not described)\n",
                     index, rs.pid, rs.tid, why.c_str());
      }
      p += sink_.drops(p, DropsEvent{rs.pid, rs.tid, 1, h.seq, h.seq, DropReason::kCorrupt});
      count_dropped(DropReason::kCorrupt, 1);
      rs.last_ts = h.ts_ns;  // its open-span entry, if still there, is not unfinished either
      rs.last_depth = h.depth;
      rs.has_last = true;
    } else if (h.flags & kRecordInvalid) {
      p += sink_.drops(p, DropsEvent{rs.pid, rs.tid, 1, h.seq, h.seq, DropReason::kInvalid});
      count_dropped(DropReason::kInvalid, 1);
    } else if (h.flags & kRecordReentrant) {
      seqs = h.dur_ns;  // 1..kReentrantMarkerMax, checked by RingReader::read
      p += sink_.drops(p, DropsEvent{rs.pid, rs.tid, seqs, h.seq, h.seq + seqs - 1,
                                       DropReason::kReentrant});
      count_dropped(DropReason::kReentrant, seqs);
    } else {
      const uint64_t raw_ts = h.ts_ns;
      if (h.flags & kRecordTsc) {
        if (!spans) spans.emplace(clock_, TscClock::Pair{rs.anchor_tsc, rs.anchor_mono});
        const TscClock::Interval ns = (*spans)(h.ts_ns, h.dur_ns);
        rec.header.ts_ns = ns.start_ns;
        rec.header.dur_ns = ns.dur_ns;
        rec.header.flags &= static_cast<uint16_t>(~kRecordTsc);
      }
      if (!rs.anchor_known && anchored_pids_.emplace(rs.pid, serial_).second) {
        const auto [mono, wall] = process_anchor(rs, rec);
        std::string cmdline;
        const auto it = cmdlines_.find(rs.pid);
        if (it != cmdlines_.end() && it->second.start_time == rs.start_time &&
            !it->second.text.empty())
          cmdline = std::move(it->second.text);
        else
          cmdline = read_cmdline(rs.pid);
        if (it != cmdlines_.end()) cmdlines_.erase(it);
        p += sink_.process(p, ProcessEvent{rs.pid, rs.tid, mono, wall, std::move(cmdline)});
      }
      rs.anchor_known = true;  // this pid has its anchor: no set lookup per record
      if (!rs.announced) {
        rs.announced = true;
        rs.announced_serial = serial_;
        const RingHeader& r = view_.ring(index);
        char name[sizeof r.thread_name];
        std::memcpy(name, r.thread_name, sizeof name);  // one read, then bounded by its size
        p += sink_.thread(
            p, ThreadEvent{rs.pid, rs.tid, std::string_view(name, strnlen(name, sizeof name))});
      }
      p += text_ != nullptr ? text_->span_record(p, rs.pid, rs.tid, rec)
                            : sink_.span(p, SpanEvent::of(rs.pid, rs.tid, rec));
      ++commits_.open().records;
      ++stats_.written;
      rs.last_ts = raw_ts;
      rs.last_depth = h.depth;
      rs.has_last = true;
    }
    commit(static_cast<size_t>(p - start));
    rs.next_seq = h.seq + seqs;
    mark_dirty(index, rs);
  }
  // The producer gets room back only when the buffer holding these records is committed: once
  // a quarter of its ring waits on this buffer, send the buffer now rather than when it is full
  // (a ring can hold less than one buffer of text). Counted from the last hand-off of its
  // records, not from the tail: records in buffers already handed over do not make a poll hand
  // over the few it just read (a third of the buffers were under 64 KB, binary flat out).
  if (reader.position() - rs.handed_pos >= reader.capacity() / 4) submit_current();
  if (rs.gone) finish_owner(index, rs);
}

bool Drainer::define_string(uint32_t id, char*& p) {
  // id < kStringTableEntries (checked by the caller).
  if (defined_[id] != 0) return true;
  std::string_view bytes;
  std::string why;
  if (!strings_.resolve(id, bytes, why)) return false;
  p += sink_.string(p, id, bytes);
  defined_[id] = 1;
  return true;
}

bool Drainer::write_clock() {
  for (;;) {
    const bool reset = clock_reset_;
    const std::vector<TscClock::Pair>& all = clock_.samples();
    const TscClock::Pair* from = reset ? all.data() : clock_pending_.data();
    const size_t n = reset ? all.size() : clock_pending_.size();
    // In events of at most kMaxClockSamplesPerEvent samples (the whole clock: two at most).
    const size_t events =
        n == 0 ? 1 : (n + kMaxClockSamplesPerEvent - 1) / kMaxClockSamplesPerEvent;
    const size_t bytes = events * Sink::clock_event_bytes(0) + n * sizeof(TscClock::Pair);
    char* p = reserve(bytes);
    if (p == nullptr || current_->capacity - current_->len < bytes) return false;
    // Taking a buffer may have started a new file (Drainer::new_file): it needs the whole clock.
    if (clock_reset_ != reset) continue;
    char* const start = p;
    size_t done = 0;
    bool first = reset;
    do {
      const auto k = static_cast<uint32_t>(std::min<size_t>(n - done, kMaxClockSamplesPerEvent));
      p += sink_.clock(p, first, from + done, k);
      first = false;
      done += k;
    } while (done < n);
    commit(static_cast<size_t>(p - start));
    clock_reset_ = false;
    clock_pending_.clear();
    return true;
  }
}

namespace {

// Where drain_run's check of a run's copy stands: the next slot and sequence number, and the
// slot of the last record taken (with its raw start time and depth when TSC times are
// converted in the copy, which overwrites them).
struct RunScan {
  uint64_t at = 0;
  uint64_t seq = 0;
  uint64_t last_at = UINT64_MAX;
  uint64_t last_ts = 0;
  uint32_t last_depth = 0;
  enum Stop { kLimit, kBad, kUndefined, kStraddle } stop = kLimit;
};

// Checks the copied records from scan.at up to slot `limit` (exclusive) for what frames them
// in a run, stopping at the first that does not frame (kBad; the record-by-record path takes
// it), that names a string id in range that `defined` (a byte per id) does not have
// (kUndefined), or whose slots go past `limit` (kStraddle: copy more). kConvert: TSC times are
// converted in the copy with `clock` (binary version 3, the flight recorder); else they stay.
// Framing is what a reader needs to walk the run and account for every sequence number: a
// compact record's slot count 1, flags kRecordCompact (kRecordTsc besides) and sequence
// number's low bits, and its string ids defined; an ordinary record's slot count
// (1..kMaxRecordSlots, within the copy), flags within kRecordTsc | kRecordPackedAttrs, and
// sequence number. What is wrong inside a record that frames (lengths that do not match its
// slot count or pass their bounds, a compact attribute count past kCompactAttrs, a NUL in a
// name, malformed packed attributes, an id 0 or past the table) is the reader's to find: one
// counted corrupt drop there (docs/binary-format.md). A few loads and compares per record.
template <bool kConvert>
[[gnu::always_inline]] inline void scan_run(char* slots, uint64_t limit, RunScan& scan,
                                            const uint8_t* defined, const TscClock& clock,
                                            TscClock::Pair anchor) {
  constexpr uint32_t kIdMask = kStringTableEntries - 1;
  static_assert((kStringTableEntries & kIdMask) == 0);
  // Low nibble of a compact record's attributes byte: count 0..4 without the text bit, or the
  // text bit with count 0 (bits 4..7 say which values are signed).
  constexpr uint32_t kAttrsNibbleOk = 0x11F;
  static_assert(kCompactAttrs == 4 && kCompactAttrsText == 8);
  constexpr uint32_t kCompactHead = uint32_t{kRecordCompact} << 16 | 1u;  // flags, slots 1
  constexpr uint32_t kTscBit = uint32_t{kRecordTsc} << 16;
  uint64_t at = scan.at;
  uint64_t seq = scan.seq;
  uint64_t last_at = scan.last_at;
  while (at < limit) {
    char* const slot = slots + at * kSlotBytes;
    uint64_t w6;  // slots, flags, (compact) name, keys[0]
    std::memcpy(&w6, slot + 48, sizeof w6);
    const auto head = static_cast<uint32_t>(w6);
    if (head & (uint32_t{kRecordCompact} << 16)) {
      uint64_t w7;  // (compact) keys[1..3], depth, attrs
      std::memcpy(&w7, slot + 56, sizeof w7);
      uint32_t seq_lo;
      std::memcpy(&seq_lo, slot + offsetof(CompactRecord, seq_lo), sizeof seq_lo);
      if ((head & ~kTscBit) != kCompactHead || seq_lo != static_cast<uint32_t>(seq)) {
        scan.stop = RunScan::kBad;
        break;
      }
      // The name and all four key slots, each id masked into the table: unused keys are 0
      // (defined[0] is 1), and an id the record uses that is 0 or past the table is the
      // reader's to drop. One byte load per id, no branch per id.
      const uint32_t all_defined =
          defined[(w6 >> 32) & kIdMask] & defined[(w6 >> 48) & kIdMask] &
          defined[w7 & kIdMask] & defined[(w7 >> 16) & kIdMask] & defined[(w7 >> 32) & kIdMask];
      // An attribute count the reader refuses (the record is its corrupt drop) names no id.
      const auto attrs = static_cast<uint32_t>(w7 >> 56);
      if (__builtin_expect(all_defined == 0, 0) && ((kAttrsNibbleOk >> (attrs & 0xFu)) & 1u)) {
        CompactRecord c;
        std::memcpy(&c, slot, sizeof c);
        uint16_t ids[1 + kCompactAttrs];
        const uint32_t nids = compact_string_ids(c, ids);
        bool undefined = false;
        for (uint32_t i = 0; i < nids; ++i) undefined |= defined[ids[i] & kIdMask] == 0;
        if (undefined) {  // (an unused key slot alone does not count)
          scan.stop = RunScan::kUndefined;
          break;
        }
      }
      if constexpr (kConvert) {
        CompactRecord c;
        std::memcpy(&c, slot, sizeof c);
        if (c.flags & kRecordTsc) {
          const TscClock::Interval ns = clock.span_ns(c.ts_ns, c.dur_ns, anchor);
          if (ns.dur_ns > UINT32_MAX) {  // as an ordinary record, record by record
            scan.stop = RunScan::kBad;
            break;
          }
          scan.last_ts = c.ts_ns;
          c.ts_ns = ns.start_ns;
          c.dur_ns = static_cast<uint32_t>(ns.dur_ns);
          c.flags = kRecordCompact;
          std::memcpy(slot, &c, sizeof c);
        } else {
          scan.last_ts = c.ts_ns;
        }
        scan.last_depth = c.depth;
      }
      last_at = at;
      at += 1;
    } else {
      const uint32_t nslots = head & 0xFFFFu;
      const uint32_t flags = head >> 16;
      uint64_t rseq;
      std::memcpy(&rseq, slot + offsetof(RecordHeader, seq), sizeof rseq);
      if ((flags & ~uint32_t{kRecordTsc | kRecordPackedAttrs}) != 0 || rseq != seq ||
          nslots - 1 >= kMaxRecordSlots) {
        scan.stop = RunScan::kBad;
        break;
      }
      if (nslots > limit - at) {
        scan.stop = RunScan::kStraddle;
        break;
      }
      if constexpr (kConvert) {
        RecordHeader h;
        std::memcpy(&h, slot, sizeof h);
        scan.last_ts = h.ts_ns;
        scan.last_depth = h.depth;
        if (flags & kRecordTsc) {
          const TscClock::Interval ns = clock.span_ns(h.ts_ns, h.dur_ns, anchor);
          h.ts_ns = ns.start_ns;
          h.dur_ns = ns.dur_ns;
          h.flags = static_cast<uint16_t>(flags & ~uint32_t{kRecordTsc});
          std::memcpy(slot, &h, sizeof h);
        }
      }
      last_at = at;
      at += nslots;
    }
    ++seq;
  }
  scan.at = at;
  scan.seq = seq;
  scan.last_at = last_at;
}

}  // namespace

int64_t Drainer::drain_run(uint32_t index, RingState& rs, uint64_t stop) {
  RingReader& reader = rs.reader;
  const uint64_t avail = stop - reader.position();
  const uint64_t want = avail < kMaxRunSlots ? avail : kMaxRunSlots;
  const size_t header = sink_.run_header_bytes();
  // Room for the run and for the string definitions of one record, written when the first
  // record names a string the file has not defined yet.
  constexpr size_t kDefsRoom = (1 + kCompactAttrs) * kMaxStringEventBytes;
  size_t room = current_ != nullptr ? current_->capacity - current_->len : 0;
  if (room < header + kDefsRoom + std::min<uint64_t>(want, 64) * kSlotBytes) {
    if (reserve(header + kDefsRoom + want * kSlotBytes) == nullptr) return 0;
    room = current_->capacity - current_->len;
  }
  if (room < header + kDefsRoom + kSlotBytes) return 0;  // a small buffer (a flight recorder's)
  // Taking a buffer may have started a new file (--rotate: Drainer::new_file), where this
  // owner is announced afresh: its next record goes the record-by-record way.
  if (!rs.announced || !rs.anchor_known) return 0;
  // Version 4: the reader converts the run's TSC times with the clock samples written before
  // it; samples taken since the last clock event (or the whole clock, in a new file) go first.
  if (clock_events_ && (clock_reset_ || !clock_pending_.empty())) return write_clock() ? -1 : 0;
  const uint64_t n = std::min<uint64_t>(want, (room - header - kDefsRoom) / kSlotBytes);
  if (n == 0) return 0;
  char* const out = current_->data.get() + current_->len;
  char* const slots = out + header;

  // The copy is private: checked record by record (scan_run), only for what the file needs to
  // frame and bound each record and for its string ids to be defined. The rest (a NUL inside a
  // name, well-formed packed attributes, a string id that is 0 or past the table) is the
  // reader's to check: it decodes with src/record_decode.h and counts a record that does not
  // decode as one drop, as the text drainer drops it. Copied in steps of kCopyStep slots: a run
  // cut short by a marker or a gap does not pay for copying the whole stretch.
  constexpr uint64_t kCopyStep = 128;
  const TscClock::Pair anchor{rs.anchor_tsc, rs.anchor_mono};
  RunScan scan;
  scan.seq = rs.next_seq;
  uint64_t copied = 0;
  do {
    const uint64_t k = std::min<uint64_t>(n - copied, kCopyStep);
    reader.copy_slots(copied, k, reinterpret_cast<std::byte*>(slots + copied * kSlotBytes));
    copied += k;
    scan.stop = RunScan::kLimit;
    if (clock_events_)
      scan_run<false>(slots, copied, scan, defined_.data(), clock_, anchor);
    else
      scan_run<true>(slots, copied, scan, defined_.data(), clock_, anchor);
  } while ((scan.stop == RunScan::kLimit || scan.stop == RunScan::kStraddle) && copied < n);
  const uint64_t first_seq = rs.next_seq;
  const uint64_t records = scan.seq - first_seq;
  if (scan.stop == RunScan::kUndefined && records == 0) {
    // The first record names strings the file has not defined: their definitions go where the
    // run was to start, and the caller copies the run again.
    CompactRecord c;
    std::memcpy(&c, slots, sizeof c);
    uint16_t ids[1 + kCompactAttrs];
    const uint32_t nids = compact_string_ids(c, ids);
    char* p = out;
    for (uint32_t i = 0; i < nids; ++i)
      if (ids[i] != 0 && ids[i] < kStringTableEntries && !define_string(ids[i], p)) {
        commit(static_cast<size_t>(p - out));
        return p != out ? -1 : 0;  // the record-by-record path drops it as corrupt
      }
    commit(static_cast<size_t>(p - out));
    // None defined: only ids the mask folded (0, or past the table) were missing; the
    // record-by-record path drops the record as corrupt.
    return p != out ? -1 : 0;
  }
  if (records == 0) return 0;
  // The last record's raw start time and depth (its open-span entry is not unfinished).
  uint64_t last_ts = scan.last_ts;
  uint32_t last_depth = scan.last_depth;
  if (clock_events_) {
    const char* const last = slots + scan.last_at * kSlotBytes;
    uint16_t flags;
    std::memcpy(&flags, last + offsetof(RecordHeader, flags), sizeof flags);
    if (flags & kRecordCompact) {
      std::memcpy(&last_ts, last + offsetof(CompactRecord, ts_ns), sizeof last_ts);
      last_depth = static_cast<uint8_t>(last[offsetof(CompactRecord, depth)]);
    } else {
      std::memcpy(&last_ts, last + offsetof(RecordHeader, ts_ns), sizeof last_ts);
      std::memcpy(&last_depth, last + offsetof(RecordHeader, depth), sizeof last_depth);
    }
  }
  const uint64_t at = scan.at;
  sink_.begin_run(out, rs.pid, rs.tid, first_seq, anchor);
  if (sink_.wants_run_records()) run_records(rs, records);
  sink_.end_run(out, static_cast<uint32_t>(at), static_cast<uint32_t>(records));
  commit(header + at * kSlotBytes);
  reader.advance(at);
  commits_.open().records += records;
  stats_.written += records;
  rs.next_seq = scan.seq;
  rs.last_ts = last_ts;
  rs.last_depth = last_depth;
  rs.has_last = true;
  mark_dirty(index, rs);
  return static_cast<int64_t>(records);
}

void Drainer::run_records(RingState& rs, uint64_t records) {
  // The records of the run just copied, read again from the ring as the text path reads them
  // (the tail has not moved past them: the producer has not reused their slots).
  RingReader again = rs.reader;
  RecordCopy rec;
  std::string why;
  for (uint64_t i = 0; i < records; ++i) {
    const uint64_t seq = rs.next_seq + i;
    const ReadStatus status = again.read(rs.reader.head(), seq, rec, why);
    if (status != ReadStatus::kRecord) {
      // Rewritten since the copy (a hostile process): the text says this record is corrupt.
      sink_.run_record_drop(DropsEvent{rs.pid, rs.tid, 1, seq, seq, DropReason::kCorrupt});
      if (status == ReadStatus::kCorrupt) return;
      continue;
    }
    if (rec.header.flags & kRecordTsc) {
      const TscClock::Interval ns = clock_.span_ns(
          rec.header.ts_ns, rec.header.dur_ns, TscClock::Pair{rs.anchor_tsc, rs.anchor_mono});
      rec.header.ts_ns = ns.start_ns;
      rec.header.dur_ns = ns.dur_ns;
      rec.header.flags &= static_cast<uint16_t>(~kRecordTsc);
    }
    sink_.run_record(SpanEvent::of(rs.pid, rs.tid, rec));
  }
}

uint64_t Drainer::poll() {
  if (clock_.maybe_sample() && clock_events_ && !clock_reset_) {
    clock_pending_.push_back(clock_.samples().back());
    // A file that takes no run for a long time: its next run gets the whole clock instead.
    if (clock_pending_.size() > kMaxClockSamplesPerEvent) {
      clock_reset_ = true;
      clock_pending_.clear();
    }
  }
  dest_.collect(0);
  const uint64_t before = stats_.written + stats_.dropped;
  peak_slots_ = 0;
  // acquire: pairs with the claimer's release add (after its kRingActive), so the scan below
  // finds every ring this count covers active. Read before the scan: a claim after this read
  // changes the word, and wait_for_claim's FUTEX_WAIT then returns at once.
  const uint32_t claims = view_.header().ring_claims.load(std::memory_order_acquire);
  saw_claim_ = claims != claims_seen_;
  claims_seen_ = claims;
  if (saw_claim_) next_full_scan_ = {};
  const auto now = std::chrono::steady_clock::now();
  if (now >= next_full_scan_) {
    // A ring claimed since the last full scan waits at most kFullScanNs to be seen; a default
    // ring holds ~2,000 records, a millisecond of a thread emitting at 2 M records/s.
    owned_.clear();
    for (uint32_t i = 0; i < rings_.size(); ++i) {
      drain_ring(i, false);
      if (rings_[i].owned && !rings_[i].quarantined) owned_.push_back(i);
    }
    next_full_scan_ = now + std::chrono::nanoseconds(kFullScanNs);
  } else {
    for (const uint32_t i : owned_) drain_ring(i, false);
  }
  // Nothing on its way to the file and a quarter of a buffer filled: the buffer goes now, not
  // once it is full. The slots of records held in the buffer are not free for the producer
  // until it is written, and a producer at 4 M one-slot records/s fills a 1 MiB buffer in ~4
  // ms, a quarter of a default ring (paced drops: docs/performance.md, "Where the flat-out
  // drainer waits"). While a write is in flight the buffer fills on, so a busy drainer still
  // writes full buffers; the quarter keeps a poll woken by a write's return from handing over
  // a few records each time (measured: 5,800 writes/s at 4 M records/s, 3x the CPU).
  // (Not a carrier of capacity 0 past --max-size: it holds no bytes, its tails go with the next.)
  if (eager_ && !full_ && current_ != nullptr &&
      current_->len - frame_bytes_ >= current_->capacity / 4 && dest_.in_flight() == 0)
    submit_current();
  return stats_.written + stats_.dropped - before;
}

bool Drainer::implausible_segment_counter(const char* name, uint64_t value) {
  if (value <= max_plausible_drops()) return false;
  if (implausible_said_.insert(name).second)
    report("spanring: the segment's %s counter %llu is more records than nanoseconds since "
           "boot: corrupt, its drops are not reported\n",
           name, static_cast<unsigned long long>(value));
  return true;
}

void Drainer::report_segment_drops() {
  const SegmentHeader& h = view_.header();
  const RingState none{};  // pid=0 tid=0: not attributable to a ring
  // Counters above max_plausible_drops() are corrupt: said once each, never reported as drops.
  const uint64_t no_ring = h.no_ring_drops.load(std::memory_order_relaxed);
  if (no_ring > no_ring_reported_ && !implausible_segment_counter("no_ring_drops", no_ring)) {
    drops_line(none, no_ring - no_ring_reported_, 0, 0, DropReason::kNoRing);
    no_ring_reported_ = no_ring;
    commits_.open().no_ring_reported = no_ring;
  }
  const uint64_t vfork = h.vfork_drops.load(std::memory_order_relaxed);
  if (vfork > vfork_reported_ && !implausible_segment_counter("vfork_drops", vfork)) {
    drops_line(none, vfork - vfork_reported_, 0, 0, DropReason::kVfork);
    vfork_reported_ = vfork;
    commits_.open().vfork_reported = vfork;
  }
}

void Drainer::check_owners() {
  // The geometry was validated and copied once; a header rewritten since (a buggy or hostile
  // process with write access) changes nothing the drainer reads, but it is said.
  std::string damage = view_.geometry_changed();
  if (damage != geometry_damage_) {
    if (!damage.empty())
      report(
                   "spanring: segment header damaged: %s; ignored, the geometry validated at "
                   "open stays in use\n",
                   damage.c_str());
    geometry_damage_ = std::move(damage);
  }
  owners_.begin_round();
  for (uint32_t i = 0; i < rings_.size(); ++i) {
    RingState& rs = rings_[i];
    RingHeader& r = view_.ring(i);
    if (!rs.owned && r.state.load(std::memory_order_acquire) == kRingClaiming) {
      // A claimer killed between its CAS and kRingActive leaves the ring mid-claim forever.
      // It writes owner_pid, owner_tid, then generation + 1, then the rest. A ring still at
      // the generation the drainer last finished (drained_generation, set when the ring was
      // freed) names its previous owner, not the claimer: that owner's liveness says nothing,
      // and a claim that has not got that far in kClaimStuckChecks checks has no live claimer
      // (a claim takes microseconds). Otherwise the owner fields are the claimer's own.
      if (++rs.claiming_seen >= kClaimStuckChecks) {
        const bool claimer_never_wrote = r.generation == r.drained_generation;
        const uint64_t st = process_start_time(r.owner_pid);
        if (claimer_never_wrote || st == 0 || st != r.owner_start_time) {
          uint32_t expected = kRingClaiming;
          r.state.compare_exchange_strong(expected, kRingFree, std::memory_order_acq_rel);
          rs.claiming_seen = 0;
        }
      }
      continue;
    }
    rs.claiming_seen = 0;
    if (!rs.owned || rs.gone || rs.quarantined) continue;
    // An owner thread that exited without releasing its ring, or whose process is gone (or
    // whose pid now names another process), is a dead owner. Each process is looked at once
    // per round, whatever the number of its rings (owner_watch.h).
    if (!owners_.alive(rs.pid, rs.tid, rs.start_time)) {
      rs.gone = true;
      rs.died = true;
    }
  }
  owners_.end_round();
  reserve(2 * sink_.max_event_bytes());
  report_segment_drops();
}

bool Drainer::finish(bool owners_gone) {
  dest_.collect(0);
  if (!owners_gone) check_owners();
  to_head_ = true;  // everything published goes into the file
  for (uint32_t i = 0; i < rings_.size(); ++i) drain_ring(i, owners_gone);
  reserve(2 * sink_.max_event_bytes());
  report_segment_drops();
  submit_current();
  // --max-size: the file's last line says how many records it does not hold.
  if (full_ && max_size_unreported_ != 0) write_max_size_line();
  // Every buffer durable and committed, the file synced.
  return dest_.finish();
}

}  // namespace spanring
