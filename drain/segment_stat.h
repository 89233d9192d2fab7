// The live state of a segment (what `spanring stat --segment NAME [--json]` shows), read as untrusted shared
// memory through its SegmentView (segment_view.h): who created it and who drains it (pid, alive),
// its geometry, the rings in use with their owner (pid, tid, thread name, alive), fill (records
// and slots between tail and head, % of capacity) and drop counters, and totals.
//
// It only reads: no field of the segment is written, no lock is taken, the drainer is not
// disturbed. Every value is read once into a local and checked before it is used (a head that
// is not within one ring of the tail, an unknown ring state or a record header that does not
// parse is shown as a problem of that ring, never followed), so a corrupt segment gives a
// report, never a crash. The fill is a snapshot: producers and the drainer move on meanwhile.
//
// The string table: entries ready, left mid-write and corrupt, and strings_full (strings a
// producer found no room for).
//
// Drops by reason, as far as the segment holds them: `ring_full` per ring (the producer's
// counter), `no_ring` and `vfork` for the segment, `corrupt` as the quarantined rings. The
// `invalid` and `reentrant` drops are markers among a ring's records, counted by the drainer
// as it reads them: they are in the trace and the run's summary, not here.
#pragma once

#include <spanring/segment_view.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace spanring {

// One ring that is not free.
struct RingStat {
  uint32_t index = 0;
  std::string state;        // "claiming", "active", "released", "quarantined", or "unknown N"
  uint32_t pid = 0;         // owner (as the ring says)
  uint32_t tid = 0;
  std::string thread_name;  // printable ASCII; other bytes as \xNN
  bool alive = false;       // the owner thread runs (pid + start time, thread not exited)
  uint32_t generation = 0;
  uint64_t head = 0;        // slots published
  uint64_t tail = 0;        // slots drained and written
  uint64_t fill_slots = 0;  // head - tail (0 when the ring is corrupt)
  std::optional<uint64_t> fill_records;  // records in [tail, head), when they parse
  double fill_percent = 0;  // fill_slots / capacity x 100
  uint64_t ring_full = 0;   // records the owner dropped because the ring was full
  uint64_t drops_reported = 0;  // of those, already in the trace as [SPANRING_DROPS]
  uint32_t open_spans = 0;  // spans open on the owner thread (its open_depth)
  std::string problem;      // why part of the ring could not be read ("" when none)
};

struct SegmentStat {
  std::string name;
  uint64_t bytes = 0;  // mapped
  uint32_t layout_version = 0;
  uint32_t ring_count = 0;
  uint32_t ring_capacity = 0;  // slots
  uint32_t slot_bytes = 0;
  uint32_t creator_pid = 0;
  bool creator_alive = false;
  uint32_t drainer_pid = 0;  // 0: no drainer has taken it
  bool drainer_alive = false;
  uint64_t committed_bytes = 0;  // the drainer's commit offset in its output file
  uint64_t no_ring = 0;          // records dropped because every ring was taken
  uint64_t vfork = 0;            // records vfork children tried to emit before exec
  std::string header_damage;     // geometry_changed() ("" when the header still agrees)
  // The string table (string_table_usage(): every entry's state, ready ones checked like the
  // drainer checks them, corrupt ones counted and never followed) and the strings producers
  // could not intern (their spans went out as ordinary records: not a loss).
  uint32_t string_entries = 0;   // usable ids (kStringTableEntries - 1: id 0 is never used)
  uint32_t strings_ready = 0;
  uint32_t strings_writing = 0;  // being written, or left mid-write by a killed producer
  uint32_t strings_corrupt = 0;
  uint64_t strings_full = 0;
  // Memory. The tables (header, ring headers, journal, string table) are committed when the
  // segment is created; a ring's slots (ring_slot_bytes) when a thread first claims it, and
  // they stay committed for the segment's life (a later owner reuses them). So a segment takes
  // table_bytes + rings_committed x ring_slot_bytes, whatever its mapped size says.
  uint64_t table_bytes = 0;      // committed at creation
  uint64_t ring_slot_bytes = 0;  // per thread that traces: ring_capacity x slot_bytes
  uint32_t rings_committed = 0;  // rings some thread has claimed (generation != 0)
  // What /dev/shm says the object takes now (its block count; 0 when it cannot be read).
  uint64_t shm_bytes = 0;
  std::vector<RingStat> rings;   // the rings that are not free, by index
  // Totals over `rings`.
  uint32_t in_use = 0;           // claiming, active or released
  uint32_t quarantined = 0;
  uint32_t processes = 0;        // distinct owner pids
  uint64_t fill_slots = 0;
  uint64_t fill_records = 0;     // over the rings whose records parse
  uint64_t ring_full = 0;
};

// Reads the state of the segment `view` maps (named `name`, `mapped_bytes` long). Reads only.
SegmentStat read_segment_stat(const SegmentView& view, const std::string& name,
                              uint64_t mapped_bytes);

// The report as text (aligned columns) or as one JSON object (keys as SegmentStat's fields).
std::string format_stat_text(const SegmentStat& s);
std::string format_stat_json(const SegmentStat& s);


}  // namespace spanring
