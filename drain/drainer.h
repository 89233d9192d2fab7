// The drainer's consumer loop over one segment: reads every ring's published records in
// batches, formats them through a Sink into buffers its Destination hands out
// (drain/destination.h: a file, or the flight recorder's window), and advances a ring's tail
// only when the buffer holding its records is durable there. What the Drainer keeps is ring
// reading and accounting; buffers, writing, file limits and rotation are the Destination's.
//
// Accounting, per ring owner (one thread of one process): every record sequence number is
// either written as a [STRACE] line, or reported on a [SPANRING_DROPS] line with its reason:
// `ring_full` (a gap in the sequence, or drops counted after the last record), `invalid` (the
// producer refused the record's content), `corrupt` (the ring failed validation and was
// quarantined, or one compact record named a string id that does not resolve). Segment-wide counts: `no_ring` (every ring was taken) and `vfork` (a vfork child
// emitted before exec). Records whose write to the file failed are counted as unwritten.
//
// Bounded output (drain/output_files.h): the destination sizes each buffer to the room left in
// the file. --rotate: when it starts the next file (new_file()), every process and thread is
// announced again in it, so each file reads alone. --max-size: once the destination takes no
// more bytes (buffers of capacity 0), the drainer goes on consuming every ring (producers never
// notice) but writes nothing more; each sequence number it consumes from then on (records, and
// drops of any reason) is counted as `max_size`, and when it finishes one
// [SPANRING_DROPS] ... reason=max_size line (pid 0) in the room kept back for it says how many
// records the file does not hold. The count is journaled (segment_layout.h), so a restarted
// drainer's line covers the whole run.
// Spans open when their owner died are listed on [SPANRING_UNFINISHED] lines, not counted.
//
// After a failed write (ENOSPC, EIO): the records of the buffer are counted as unwritten,
// and so is everything it announced lost: its process anchors, thread announcements, string
// definitions, clock samples and, when nothing of the current file is durable, the file header.
// Buffers formatted before the drainer learned of the failure may depend on those
// announcements, so they must not reach the file either: each buffer is stamped with a failure
// epoch (Buffer::epoch, the count of real failures seen + 1) and the writer fails, unwritten,
// every buffer whose epoch is at or below a failed one's. When the drainer learns of a failure
// of a buffer of the current epoch (a real one), it moves to the next epoch, ends the buffer
// being filled (it is of the old epoch: doomed), and takes back every announcement made in the
// failed buffer or after it (each is tagged with the serial of the buffer it went into), so
// each is made again before the next record that needs it, in a buffer of the new epoch. An
// announcement in a durable buffer is never made twice (one anchor per pid in a file).
//
// Exactly once across a drainer crash: each buffer's Commit (drain/journal.h) is journaled
// through the segment once the destination says the buffer is durable; a restarted drainer
// replays a pending journal, cuts the file back to the commit offset and resumes every ring
// from its committed tail.
//
// Drain thread only (not thread-safe); a destination's writer thread is the only other thread.
#pragma once

#include "drain/destination.h"
#include "drain/drainer_lock.h"
#include "drain/journal.h"
#include "drain/owner_watch.h"
#include "format/tsc_clock.h"
#include "drain/uring_writer.h"
#include "format/sink.h"
#include "format/text_sink.h"
#include "src/ring.h"
#include "src/string_table.h"

#include <spanring/segment.h>
#include <spanring/segment_view.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace spanring {

struct DrainStats {
  uint64_t written = 0;     // [STRACE] records in the file (this drainer)
  uint64_t dropped = 0;     // records reported on [SPANRING_DROPS] lines (all reasons)
  // `dropped` by reason, indexed by DropReason (index 0 unused).
  std::array<uint64_t, static_cast<size_t>(DropReason::kOverwritten) + 1> dropped_by_reason{};
  // Formatted, but the write to the file failed: every drainer's of this segment (journaled,
  // SegmentHeader::unwritten), unwritten_before of them by earlier drainers.
  uint64_t unwritten = 0;
  uint64_t unwritten_before = 0;
  uint64_t unfinished = 0;  // spans open when their process died (reported, not counted)
  uint64_t corrupt_rings = 0;
  uint64_t processes = 0;   // distinct pids that had a ring
  uint64_t threads = 0;     // distinct (pid, tid) ring owners
  uint64_t files = 1;       // files written (--rotate: 1 + rotations)
  bool reached_max_size = false;  // --max-size: the file is full; later records were counted
  bool max_size_line_written = false;  // ... and the drops line saying so is in the file
};

class Drainer {
 public:
  // `segment`, `destination` and `sink` must outlive the Drainer. Every ring and slot access
  // goes through the segment's validated view (segment_view.h), never the header's geometry.
  // `sink` is the output format (for the flight recorder, a FlightSink over the same recorder);
  // `destination` where its bytes go: the segment's commit record names it from now on
  // (Destination::dev/ino), and when it starts with a previous drainer's committed prefix
  // (kept_bytes(), from recover()), the processes already announced there (anchors) are
  // recognised by `known_pids`, which the caller reads from that prefix. Attaches itself to
  // the destination (Destination::attach).
  Drainer(const Segment& segment, Destination& destination, Sink& sink,
          const std::unordered_set<uint32_t>& known_pids = {});
  // Waits until every buffer handed to the destination is durable (and commits it).
  ~Drainer();
  Drainer(const Drainer&) = delete;
  Drainer& operator=(const Drainer&) = delete;

  // One pass over the rings: reads what is published, commits finished writes, and hands the
  // partly filled buffer to the destination when nothing is on its way there and the
  // destination is eager() (a file). Returns the number of records read (0 = idle). Every ring is looked at once per kFullScanNs; in
  // between, only the rings that had an owner at the last full look (a ring header is a cache
  // line to fetch: 256 of them per poll cost more than a trickle of records).
  // A ring claimed since the previous poll (the segment's ring_claims count changed) makes
  // the poll a full one.
  uint64_t poll();
  static constexpr int64_t kFullScanNs = 1'000'000;
  // Slots a poll() leaves unread behind a head that moved since the previous poll, before the
  // 128-byte pair of slot lines that holds it (2 KiB; even, so the stop stays on a pair
  // boundary); the rest is read by the next poll, or to the head once it stops moving, and
  // poll_all() reads to the head. Reading up to the pair let this core's stream prefetcher take
  // the lines the producer had prefetched for writing (kPrefetchSlots ahead): its p50 per
  // record was 1.00-1.35x higher with the drainer running than stopped (bench_interference, 4
  // alternated runs, 1 and 16 threads); with 32 it was 0.94-1.08x, with 128 0.97-1.09x.
  static constexpr uint64_t kHeadMarginSlots = 32;
  static_assert(kHeadMarginSlots % 2 == 0);
  // The most slots the last poll() read from one ring (what drain/poll_pacer.h paces by).
  uint64_t last_poll_peak_slots() const noexcept { return peak_slots_; }
  // Whether the last poll() saw a ring claimed since the poll before it (ring_claims moved):
  // a thread that just started, whose first records drain/poll_pacer.h waits for warm.
  bool last_poll_saw_claim() const noexcept { return saw_claim_; }
  // The idle wait: sleeps up to `timeout_us` or until a producer claims a ring (FUTEX_WAIT on
  // the segment's ring_claims, woken by claim_ring in src/attach.cpp), whichever is first.
  // Returns false after the full timeout; true when it returned before (woken by a claim or
  // by any process with the segment mapped, or a signal), and at once when the count already
  // moved since the last poll() read it. Drain thread.
  bool wait_for_claim(int64_t timeout_us);
  uint64_t ring_capacity() const noexcept { return view_.ring_capacity(); }  // slots
  // poll() with a full look at every ring now: rings claimed since the last full scan are
  // adopted and drained too (a flight-recorder snapshot must end with everything published).
  uint64_t poll_all() {
    next_full_scan_ = {};
    to_head_ = true;
    const uint64_t n = poll();
    to_head_ = false;
    return n;
  }
  // Detects owners that died without releasing their ring (pid plus process start time, since
  // pids are reused) and schedules their rings to be drained, reported and freed; reports new
  // segment-wide drops; reports, once per change, a segment header whose geometry was
  // overwritten since it was validated (the drainer goes on with its own copy). Costs a poll of
  // a pidfd per owner process and a signal-0 tgkill per owner thread (owner_watch.h): call
  // every ~100 ms.
  void check_owners();
  // Hands the partly filled buffer to the destination (call when idle, so the file does not
  // lag).
  void flush_partial();
  // When buffers are on their way to the file, waits up to `timeout_us` for one to come back
  // and commits it (its rings' tails advance, so producers get room) and returns true; returns
  // false at once when nothing is in flight. An idle drainer waits here instead of sleeping.
  bool wait_for_write(int64_t timeout_us);
  // Final drain: `owners_gone` = every producer process has exited (then every ring is drained
  // to its head, its trailing drops and open spans reported, and freed). Waits for every buffer
  // to be durable and committed, and the destination synced (Destination::finish). Returns
  // false when a write or fsync failed.
  bool finish(bool owners_gone);

  const DrainStats& stats() const noexcept { return stats_; }

 private:
  struct RingState {
    bool owned = false;       // we follow an owner of this ring
    bool gone = false;        // that owner released the ring or died
    bool died = false;        // ... without releasing it (its open spans are unfinished)
    bool freeing = false;     // its last tail is on its way to the file; then the ring is freed
    bool quarantined = false;
    bool dirty = false;       // records or reports of it are in the current buffer
    uint32_t generation = 0;
    uint32_t pid = 0;
    uint32_t tid = 0;
    uint64_t start_time = 0;
    uint64_t anchor_mono = 0;
    uint64_t anchor_wall = 0;
    uint64_t anchor_tsc = 0;  // TSC at anchor_mono; converts kRecordTsc times (tsc_clock.h)
    RingReader reader;        // this owner's records: position() is the next slot to read
    uint64_t next_seq = 0;    // next expected record sequence number
    uint64_t drops_reported = 0;  // drops of this owner already reported
    uint64_t last_ts = 0;     // the last record read: its raw ts and depth, to tell an open-span
    uint32_t last_depth = 0;  //   entry of a span that was published just before a kill
    bool has_last = false;
    bool announced = false;   // the sink has had thread() for this owner
    uint64_t announced_serial = 0;  // ... in the buffer of this serial (serial_)
    bool bad_string_said = false;  // a compact record with an unresolved id was reported
                                   //   (drain/diagnostics.h)
    bool anchor_known = false;  // the owner's pid has been announced (anchored_pids_)
    uint32_t claiming_seen = 0;  // consecutive owner checks that found the ring mid-claim
    uint64_t first_seq = 0;   // next_seq when adopted: the first this drainer drains
    uint64_t seen_head = 0;   // head as the last poll read it (has the producer moved since?)
    uint64_t handed_pos = 0;  // read position at the last hand-off of a buffer with its records:
                              //   the slots from here to position() are in the current buffer
  };

  void drain_ring(uint32_t index, bool final_pass);
  // The run path (binary version 3 and 4, Sink::runs()): copies the ring's slots from the
  // reader's position up to `stop` (at most kMaxRunSlots) into the buffer after a run header,
  // checks each record of the copy only for what frames it (scan_run in drainer.cpp: slot
  // count, flags, sequence number, string ids defined) and writes the framed prefix as one run
  // event; TSC times stay for the reader (clock_events_, after write_clock()) or are converted
  // in the copy. Returns the records taken; 0 when the record at the position needs the
  // record-by-record path (a marker, a gap, a bad string or frame, a TSC duration that no
  // longer fits where the drainer converts, --max-size, no room for the clock), -1 when it
  // wrote string definitions or clock samples and the caller should call again.
  int64_t drain_run(uint32_t index, RingState& rs, uint64_t stop);
  // Defines string `id` in the current file when it is not yet (event 7 at `p`, advancing it).
  // False when the id does not resolve in the segment's table.
  bool define_string(uint32_t id, char*& p);
  // Writes the clock events the next run's reader needs (the whole clock after clock_reset_,
  // else the samples pending). False when there is no room (past --max-size, or a buffer too
  // small for the whole clock): the caller takes the record-by-record path.
  bool write_clock();
  // Sink::wants_run_records(): the `records` records of the run at rs.reader's position, read
  // again record by record from the ring, to sink_.run_record().
  void run_records(RingState& rs, uint64_t records);
  void adopt_owner(uint32_t index, RingState& rs);
  // The clock anchor to announce for rs.pid, whose first record is `first` (see drainer.cpp).
  std::pair<uint64_t, uint64_t> process_anchor(const RingState& rs, const RecordCopy& first) const;
  void finish_owner(uint32_t index, RingState& rs);
  void report_unfinished(uint32_t index, RingState& rs);
  void report_segment_drops();
  // True (said once per counter) when a segment drop counter holds more than
  // max_plausible_drops(), so that its value is not reported as drops.
  bool implausible_segment_counter(const char* name, uint64_t value);
  void quarantine(uint32_t index, RingState& rs, const std::string& why);
  // Notes ring `index` as having records or reports in the current buffer (its tail goes into
  // the buffer's commit). Inline: the text drainer marks every record, and the call was ~5
  // instructions of each (callgrind, the demo); the first mark per buffer goes to add_dirty().
  void mark_dirty(uint32_t index, RingState& rs) {
    if (__builtin_expect(!rs.dirty, 0)) add_dirty(index, rs);
  }
  void add_dirty(uint32_t index, RingState& rs);
  // Room in the current buffer, submitting it when full; nullptr once --max-size is reached
  // (nothing more is written: the caller counts what it would have written, count_max_size).
  // The common case (a buffer with room) inline: the call was ~15 instructions per record of
  // the text drainer; taking or submitting a buffer goes to reserve_slow().
  char* reserve(size_t bytes) {
    if (__builtin_expect(
            current_ != nullptr && !full_ && current_->capacity - current_->len >= bytes, 1))
      return current_->data.get() + current_->len;
    return reserve_slow(bytes);
  }
  char* reserve_slow(size_t bytes);
  void commit(size_t bytes) noexcept { current_->len += bytes; }
  void submit_current();
  // Takes the next buffer from the destination and frames it; a buffer of capacity 0 (the
  // destination takes no more bytes) turns the drainer to counting.
  void start_buffer();
  void write_max_size_line();
  // DestinationEvents (through events_): the oldest pending Commit is durable (journaled
  // here); a rotation started a new file; the flight recorder let a process go.
  void durable(bool failed, uint64_t end);
  // A real failure of the buffer of serial `serial` (every later buffer is doomed too): takes
  // back every announcement made in them, re-arms the file header when the file holds nothing
  // durable (`end` 0), and ends the buffer being filled.
  void lose_announcements(uint64_t serial, uint64_t end);
  // Stamps the buffer just taken (current_ or the closing one) with the epoch and a serial.
  void stamp(Buffer* b) noexcept {
    b->epoch = failures_ + 1;
    ++serial_;
  }
  void new_file(uint64_t dev, uint64_t ino);
  void forget_process(uint32_t pid);
  // The destination's events, forwarded. A member rather than a base class of Drainer: a base
  // with virtual functions puts a vtable pointer in front of view_, and drain_ring() then pays
  // an address computation per call (callgrind counted it).
  struct Events final : DestinationEvents {
    explicit Events(Drainer& d) noexcept : drainer(d) {}
    void durable(bool failed, uint64_t end) override { drainer.durable(failed, end); }
    void new_file(uint64_t dev, uint64_t ino) override { drainer.new_file(dev, ino); }
    void forget_process(uint32_t pid) override { drainer.forget_process(pid); }
    Drainer& drainer;
  };
  void count_max_size(uint64_t n) noexcept {
    count_dropped(DropReason::kMaxSize, n);
    max_size_unreported_ += n;
  }
  void drops_line(const RingState& rs, uint64_t dropped, uint64_t first, uint64_t last,
                  DropReason reason);
  void count_dropped(DropReason reason, uint64_t n) noexcept {
    stats_.dropped += n;
    stats_.dropped_by_reason[static_cast<size_t>(reason)] += n;
  }

  const SegmentView view_;  // the geometry validated at open: every ring access goes through it
  const CommitJournal journal_;
  // The segment's string table, resolved for every ring's compact records and open spans
  // (checked copies kept for the segment's life: an id means the same bytes to every owner).
  StringTableReader strings_{view_.strings()};
  // The string ids defined in the current file (event 7 written), one byte per id, 1 =
  // defined: cleared when a file starts and when a buffer could not be written (its definitions
  // are not in the file). Entry 0 is always 1: drain_run() tests a compact record's name and all
  // four key slots at once, unused keys are 0, and an id 0 a record does use is the reader's to
  // refuse (a counted corrupt drop, as the text drainer counts it).
  std::vector<uint8_t> defined_ = fresh_defined();
  static std::vector<uint8_t> fresh_defined() {
    std::vector<uint8_t> d(kStringTableEntries);
    d[0] = 1;
    return d;
  }
  bool runs_ = false;  // sink_.runs()
  bool eager_ = false;  // dest_.eager(): poll() hands over a partly filled buffer when idle
  // sink_.clock_events() (binary version 4): runs keep TSC times and the clock goes into the
  // file (write_clock()); false: drain_run() converts them.
  bool clock_events_ = false;
  // The file has no clock state yet (a new file, or a buffer whose write failed): write_clock()
  // writes every sample with `reset` before the next run.
  bool clock_reset_ = true;
  // Samples taken since the last clock event, in order (cleared by write_clock()).
  std::vector<TscClock::Pair> clock_pending_;
  std::string geometry_damage_;  // the last header damage reported (geometry_changed())
  // Segment drop counters found implausible (implausible_segment_counter), said once each.
  std::set<std::string> implausible_said_;
  Destination& dest_;         // where the buffers go
  Sink& sink_;
  // sink_ when it is the [STRACE] text sink: drain_ring() then formats each record through it
  // directly (TextSink::span_record), without building a SpanEvent or a virtual call.
  TextSink* text_ = nullptr;
  PendingCommits commits_;    // the current buffer's Commit, then each handed over, in order
  bool full_ = false;        // --max-size reached (or a rotation failed): count, do not write
  uint64_t max_size_unreported_ = 0;  // max_size records not yet reported in the file
  size_t frame_bytes_ = 0;   // what begin_buffer() writes: a buffer longer than this has events
  size_t record_room_ = 0;   // room reserved per record: a drop, a process, a thread, a span
  std::vector<RingState> rings_;
  std::vector<uint32_t> owned_;  // rings with an owner at the last full scan
  std::chrono::steady_clock::time_point next_full_scan_{};
  uint64_t peak_slots_ = 0;  // last_poll_peak_slots()
  uint32_t claims_seen_ = 0;  // ring_claims as the last poll() read it, before its scan
  bool saw_claim_ = false;    // last_poll_saw_claim()
  bool to_head_ = false;     // read every ring to its head (poll_all, finish), not behind it
  std::vector<uint32_t> dirty_;  // ring indices with dirty set
  Buffer* current_ = nullptr;    // the buffer being filled (the destination's)
  // Failed writes of buffers of the then current epoch (the epoch is failures_ + 1), and the
  // serial of the last buffer begun (current_'s while it is set): "After a failed write".
  uint64_t failures_ = 0;
  uint64_t serial_ = 0;
  // The pids announced (process event, the text's [CLOCK_ANCHOR]) in the current file, each
  // with the serial of the buffer it went into (0: in a previous drainer's kept prefix).
  std::unordered_map<uint32_t, uint64_t> anchored_pids_;
  // Command lines of owner processes not announced yet (anchored_pids_), read when their first
  // ring was adopted (its owner had just claimed it, so it ran), with the owner's start time
  // (a pid reused since is read again); the announcement takes its entry. Read at the first
  // record instead, the name of a process that exited before the drainer read its records
  // was lost. At most one entry per ring: cleared when it would hold more (stale entries of
  // owners that never wrote a record).
  struct Cmdline {
    uint64_t start_time = 0;
    std::string text;
  };
  std::unordered_map<uint32_t, Cmdline> cmdlines_;
  TscClock clock_;  // TSC ticks of kRecordTsc records and open spans -> CLOCK_MONOTONIC ns
  std::unordered_set<uint32_t> pids_;
  OwnerWatch owners_;  // owner liveness, once per process per check_owners()
  uint64_t no_ring_reported_ = 0;  // as written into buffers (the header has the committed)
  uint64_t vfork_reported_ = 0;
  DrainStats stats_;
  Events events_{*this};
};

}  // namespace spanring
