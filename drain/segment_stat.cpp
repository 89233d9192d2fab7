// A segment's live state for `spanring stat` (drain/segment_stat.h): read only, every value
// checked.
#include "drain/segment_stat.h"

#include "drain/process_identity.h"

#include "src/proc.h"
#include "src/ring.h"
#include "src/string_table.h"

#include <spanring/error.h>
#include <spanring/segment.h>

#include <nlohmann/json.hpp>

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <set>

namespace spanring {
namespace {

std::string state_name(uint32_t state) {
  switch (state) {
    case kRingClaiming: return "claiming";
    case kRingActive: return "active";
    case kRingReleased: return "released";
    case kRingQuarantined: return "quarantined";
    default: return "unknown " + std::to_string(state);
  }
}

// A thread name from shared memory: at most its 16 bytes, up to a NUL; printable ASCII kept,
// anything else (control bytes, invalid UTF-8 a hostile writer put there) as \xNN.
std::string printable_name(const char (&raw)[16]) {
  char copy[sizeof raw];
  std::memcpy(copy, raw, sizeof copy);  // one read of shared memory
  std::string out;
  for (size_t i = 0; i < sizeof copy && copy[i] != '\0'; ++i) {
    const auto c = static_cast<unsigned char>(copy[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", c);
      out += esc;
    }
  }
  return out;
}

std::string mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::string pid_text(uint32_t pid, bool alive) {
  if (pid == 0) return "none";
  return "pid " + std::to_string(pid) + (alive ? " (alive)" : " (dead)");
}

}  // namespace

SegmentStat read_segment_stat(const SegmentView& view, const std::string& name,
                              uint64_t mapped_bytes) {
  SegmentStat s;
  const SegmentHeader& h = view.header();
  s.name = name;
  s.bytes = mapped_bytes;
  // The geometry is the view's validated copy; the other header fields are read once each.
  s.layout_version = kLayoutVersion;  // validated equal when the view was made
  s.ring_count = view.ring_count();
  s.ring_capacity = view.ring_capacity();
  s.slot_bytes = kSlotBytes;
  s.header_damage = view.geometry_changed();
  s.creator_pid = h.creator_pid;
  s.creator_alive = recorded_process_alive(s.creator_pid, h.creator_start_time);
  // acquire: pairs with the drainer lock's CAS, which it makes after writing its start time.
  s.drainer_pid = h.drainer_pid.load(std::memory_order_acquire);
  s.drainer_alive = recorded_process_alive(s.drainer_pid, h.drainer_start_time);
  // relaxed: report values; nothing is read through them.
  s.committed_bytes = h.commit_offset.load(std::memory_order_relaxed);
  s.no_ring = h.no_ring_drops.load(std::memory_order_relaxed);
  s.vfork = h.vfork_drops.load(std::memory_order_relaxed);
  s.strings_full = h.strings_full.load(std::memory_order_relaxed);
  // The table's place is the view's validated geometry, never the header's offset as it is now.
  const StringTableUsage usage = string_table_usage(view.strings());
  s.string_entries = kStringTableEntries - 1;
  s.strings_ready = usage.ready;
  s.strings_writing = usage.writing;
  s.strings_corrupt = usage.corrupt;

  s.table_bytes = slots_offset(view.ring_count());
  s.ring_slot_bytes = uint64_t{view.ring_capacity()} * kSlotBytes;
  struct stat st {};
  if (::stat(("/dev/shm/" + name).c_str(), &st) == 0)
    s.shm_bytes = static_cast<uint64_t>(st.st_blocks) * 512;  // st_blocks: 512-byte units

  std::set<uint32_t> pids;
  for (uint32_t i = 0; i < view.ring_count(); ++i) {
    const RingHeader& r = view.ring(i);
    // acquire: pairs with the producer's release of kRingActive, after its owner fields.
    const uint32_t state = r.state.load(std::memory_order_acquire);
    // A claim increments generation: a ring at 0 was never claimed, its slots never committed.
    if (r.generation != 0) ++s.rings_committed;
    if (state == kRingFree) continue;
    RingStat rs;
    rs.index = i;
    rs.state = state_name(state);
    rs.pid = r.owner_pid;
    rs.tid = r.owner_tid;
    rs.generation = r.generation;
    const uint64_t start_time = r.owner_start_time;
    rs.thread_name = printable_name(r.thread_name);
    rs.alive = rs.pid != 0 && thread_alive(rs.pid, rs.tid, start_time);
    // Tail first, then head (acquire, pairing with the producer's release): the records
    // between them were published when head was read. relaxed for tail: only its value counts.
    rs.tail = r.tail.load(std::memory_order_relaxed);
    rs.head = r.head.load(std::memory_order_acquire);
    rs.ring_full = r.drops.load(std::memory_order_relaxed);
    rs.drops_reported = r.drops_reported;
    rs.open_spans = r.open_depth.load(std::memory_order_relaxed);
    if (rs.head - rs.tail > view.ring_capacity()) {
      rs.problem = "head " + std::to_string(rs.head) + " is not within one ring of tail " +
                   std::to_string(rs.tail);
    } else {
      rs.fill_slots = rs.head - rs.tail;
      rs.fill_percent = 100.0 * static_cast<double>(rs.fill_slots) / view.ring_capacity();
      if (state != kRingQuarantined) {
        const RingReader reader(&r, view.ring_slots(i), view.ring_capacity(), rs.tail);
        rs.fill_records = reader.count_records(rs.head);
        if (!rs.fill_records) rs.problem = "a record header in [tail, head) does not parse";
      }
    }
    if (state == kRingQuarantined) {
      ++s.quarantined;
    } else if (state == kRingClaiming || state == kRingActive || state == kRingReleased) {
      ++s.in_use;
      if (rs.pid != 0) pids.insert(rs.pid);
    } else if (rs.problem.empty()) {
      rs.problem = "unknown ring state";
    }
    s.fill_slots += rs.fill_slots;
    s.fill_records += rs.fill_records.value_or(0);
    s.ring_full += rs.ring_full;
    s.rings.push_back(std::move(rs));
  }
  s.processes = static_cast<uint32_t>(pids.size());
  return s;
}

std::string format_stat_text(const SegmentStat& s) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "segment %s: %u rings of %u slots (%u bytes), %s, layout version %u\n",
                s.name.c_str(), s.ring_count, s.ring_capacity, s.slot_bytes, mib(s.bytes).c_str(),
                s.layout_version);
  out += line;
  out += "creator: " + pid_text(s.creator_pid, s.creator_alive) + "\n";
  std::snprintf(line, sizeof line, "drainer: %s, %llu bytes committed to its output\n",
                pid_text(s.drainer_pid, s.drainer_alive).c_str(),
                static_cast<unsigned long long>(s.committed_bytes));
  out += line;
  if (!s.header_damage.empty())
    out += "header damaged since it was validated: " + s.header_damage + "\n";
  std::snprintf(line, sizeof line,
                "memory: %s of tables, %s per ring a thread claimed (committed at its first "
                "claim), %u rings committed: %s expected, %s in /dev/shm now\n",
                mib(s.table_bytes).c_str(), mib(s.ring_slot_bytes).c_str(), s.rings_committed,
                mib(s.table_bytes + uint64_t{s.rings_committed} * s.ring_slot_bytes).c_str(),
                mib(s.shm_bytes).c_str());
  out += line;
  std::snprintf(line, sizeof line,
                "rings: %u in use by %u process(es), %u quarantined, %u free\n", s.in_use,
                s.processes, s.quarantined,
                s.ring_count - static_cast<uint32_t>(s.rings.size()));
  out += line;
  std::snprintf(line, sizeof line,
                "waiting: %llu records (%llu slots); drops: ring_full=%llu no_ring=%llu "
                "vfork=%llu\n",
                static_cast<unsigned long long>(s.fill_records),
                static_cast<unsigned long long>(s.fill_slots),
                static_cast<unsigned long long>(s.ring_full),
                static_cast<unsigned long long>(s.no_ring),
                static_cast<unsigned long long>(s.vfork));
  out += line;
  std::snprintf(line, sizeof line,
                "strings: %u of %u entries ready, %u left mid-write, %u corrupt; "
                "strings_full=%llu\n",
                s.strings_ready, s.string_entries, s.strings_writing, s.strings_corrupt,
                static_cast<unsigned long long>(s.strings_full));
  out += line;
  if (s.rings.empty()) return out;
  std::snprintf(line, sizeof line, "%6s  %-11s %8s %8s  %-16s %-5s %8s %8s %6s %10s %5s\n",
                "ring", "state", "pid", "tid", "thread", "alive", "records", "slots", "fill",
                "ring_full", "open");
  out += line;
  for (const RingStat& r : s.rings) {
    const std::string records = r.fill_records ? std::to_string(*r.fill_records) : "?";
    std::snprintf(line, sizeof line,
                  "%6u  %-11s %8u %8u  %-16s %-5s %8s %8llu %5.1f%% %10llu %5u%s%s\n", r.index,
                  r.state.c_str(), r.pid, r.tid, r.thread_name.c_str(), r.alive ? "yes" : "no",
                  records.c_str(), static_cast<unsigned long long>(r.fill_slots),
                  r.fill_percent, static_cast<unsigned long long>(r.ring_full), r.open_spans,
                  r.problem.empty() ? "" : "  ! ", r.problem.c_str());
    out += line;
  }
  return out;
}

std::string format_stat_json(const SegmentStat& s) {
  using nlohmann::json;
  json rings = json::array();
  for (const RingStat& r : s.rings) {
    json j = {{"index", r.index},
              {"state", r.state},
              {"pid", r.pid},
              {"tid", r.tid},
              {"thread_name", r.thread_name},
              {"alive", r.alive},
              {"generation", r.generation},
              {"head", r.head},
              {"tail", r.tail},
              {"fill_slots", r.fill_slots},
              {"fill_records", r.fill_records ? json(*r.fill_records) : json(nullptr)},
              {"fill_percent", r.fill_percent},
              {"drops", {{"ring_full", r.ring_full}}},
              {"drops_reported", r.drops_reported},
              {"open_spans", r.open_spans},
              {"problem", r.problem}};
    rings.push_back(std::move(j));
  }
  const json j = {
      {"segment", s.name},
      {"bytes", s.bytes},
      {"layout_version", s.layout_version},
      {"ring_count", s.ring_count},
      {"ring_capacity", s.ring_capacity},
      {"slot_bytes", s.slot_bytes},
      {"creator", {{"pid", s.creator_pid}, {"alive", s.creator_alive}}},
      {"drainer",
       {{"pid", s.drainer_pid},
        {"alive", s.drainer_alive},
        {"committed_bytes", s.committed_bytes}}},
      {"header_damage", s.header_damage},
      {"memory",
       {{"table_bytes", s.table_bytes},
        {"ring_slot_bytes", s.ring_slot_bytes},
        {"rings_committed", s.rings_committed},
        {"shm_bytes", s.shm_bytes}}},
      {"drops", {{"ring_full", s.ring_full}, {"no_ring", s.no_ring}, {"vfork", s.vfork}}},
      {"strings",
       {{"entries", s.string_entries},
        {"ready", s.strings_ready},
        {"writing", s.strings_writing},
        {"corrupt", s.strings_corrupt},
        {"full", s.strings_full}}},
      {"totals",
       {{"rings_in_use", s.in_use},
        {"rings_quarantined", s.quarantined},
        {"rings_free", s.ring_count - static_cast<uint32_t>(s.rings.size())},
        {"processes", s.processes},
        {"fill_slots", s.fill_slots},
        {"fill_records", s.fill_records}}},
      {"rings", std::move(rings)}};
  // Every string above is printable ASCII already; replace is a second guard, never a throw.
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace spanring
