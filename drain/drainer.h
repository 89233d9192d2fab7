// The drainer's consumer loop over one segment: reads every ring's published records in
// batches, formats them as [STRACE] text, hands full buffers to the UringWriter, and advances a
// ring's tail only when the buffer holding its records is back from the file.
//
// Accounting, per ring owner (one thread of one process): every record sequence number is
// either written as a [STRACE] line, or reported on a [SPANRING_DROPS] line with its reason:
// `ring_full` (a gap in the sequence, or drops counted after the last record), `invalid` (the
// producer refused the record's content), `unwritten` (the output write failed), `corrupt`
// (the ring failed validation and was quarantined). Records dropped because no ring was free
// are counted segment-wide (`no_ring`).
//
// Drain thread only (not thread-safe); the UringWriter's thread is the only other thread.
#pragma once

#include "ring_reader.h"
#include "uring_writer.h"

#include <spanring/segment.h>

#include <cstdint>
#include <string>
#include <unordered_set>
#include <vector>

namespace spanring {

struct DrainStats {
  uint64_t written = 0;    // [STRACE] records in the file
  uint64_t dropped = 0;    // records reported on [SPANRING_DROPS] lines (all reasons)
  uint64_t unwritten = 0;  // of `dropped`: formatted, but the write to the file failed
  uint64_t unfinished = 0; // spans open when their process died (reported, not counted)
  uint64_t corrupt_rings = 0;
  uint64_t processes = 0;  // distinct pids that had a ring
  uint64_t threads = 0;    // distinct (pid, tid) ring owners
};

class Drainer {
 public:
  // `segment` and `writer` must outlive the Drainer.
  Drainer(const Segment& segment, UringWriter& writer);
  ~Drainer();
  Drainer(const Drainer&) = delete;
  Drainer& operator=(const Drainer&) = delete;

  // One pass over every ring: reads what is published, applies finished writes. Returns the
  // number of records read (0 = idle).
  uint64_t poll();
  // Detects owners that died without releasing their ring (pid plus process start time, since
  // pids are reused) and schedules their rings to be drained and freed. Costs a /proc read per
  // live owner process: call it every ~100 ms, not on every poll.
  void check_owners();
  // Hands the partly filled buffer to the writer (call when idle, so the file does not lag).
  void flush_partial();
  // Final drain: `owners_gone` = every producer process has exited (then every ring is drained
  // to its head, its trailing drops reported and freed). Writes the segment-wide no_ring count,
  // waits for every buffer to be written, fsyncs. Returns false when a write or fsync failed.
  bool finish(bool owners_gone);

  const DrainStats& stats() const noexcept { return stats_; }

 private:
  struct RingState {
    bool owned = false;       // we follow an owner of this ring
    bool gone = false;        // that owner released the ring or died
    bool freeing = false;     // its last tail is on its way to the file; then the ring is freed
    bool quarantined = false;
    bool dirty = false;       // records or reports of it are in the current buffer
    uint32_t generation = 0;
    uint32_t pid = 0;
    uint32_t tid = 0;
    uint64_t start_time = 0;
    uint64_t anchor_mono = 0;
    uint64_t anchor_wall = 0;
    uint64_t read = 0;        // next slot to read (>= the shared tail)
    uint64_t next_seq = 0;    // next expected record sequence number
    uint64_t gap_drops = 0;   // drops of this owner already reported
  };

  void drain_ring(uint32_t index, bool final_pass);
  void adopt_owner(uint32_t index, RingState& rs);
  void finish_owner(uint32_t index, RingState& rs);
  void quarantine(uint32_t index, RingState& rs, const std::string& why);
  char* reserve(size_t bytes);  // room in the current buffer, submitting it when full
  void commit(size_t bytes) noexcept { current_->len += bytes; }
  void submit_current();
  void apply(Buffer* b);
  Buffer* take_buffer();
  void drops_line(RingState& rs, uint64_t dropped, uint64_t first, uint64_t last,
                  const char* reason);

  const Segment& segment_;
  UringWriter& writer_;
  std::vector<RingState> rings_;
  std::vector<uint32_t> dirty_;  // ring indices with dirty set
  std::vector<std::unique_ptr<Buffer>> buffers_;  // every buffer we own
  std::vector<Buffer*> free_;
  Buffer* current_ = nullptr;
  uint64_t in_flight_ = 0;
  std::unordered_set<uint32_t> anchored_pids_;
  std::unordered_set<uint32_t> pids_;
  std::unordered_set<uint64_t> threads_;
  uint64_t no_ring_reported_ = 0;
  DrainStats stats_;
};

}  // namespace spanring
