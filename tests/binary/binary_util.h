// Helpers of the 'binary' suite: building binary traces through BinarySink exactly as the
// drainer frames them (one block per buffer), rendering what a reader delivers as [STRACE]
// text, and walking a file's blocks.
#pragma once

#include "format/binary_reader.h"
#include "format/binary_sink.h"
#include "format/crc32c.h"
#include "format/text_sink.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace binary_test {

// A raw record as the drainer's ring reader would hand it over.
spanring::RecordCopy make_record(uint64_t seq, uint64_t ts, uint64_t dur, uint64_t inv,
                                 uint64_t hid, uint32_t depth, std::string_view name,
                                 std::string_view attrs);

// Writes events through a BinarySink into blocks framed like the drainer's buffers, and the
// same events through a TextSink into `text` (what the text drainer would have written).
class TraceBuilder {
 public:
  explicit TraceBuilder(bool file_header = true, uint64_t first_block = 0);
  // The version to write (before the first block): kTraceVersion unless set.
  void set_version(uint32_t version) { sink_.set_version(version); }
  void begin_block();
  void end_block();
  void process(uint32_t pid, uint32_t tid, uint64_t mono, uint64_t wall, std::string_view cmd);
  void thread(uint32_t pid, uint32_t tid, std::string_view name);
  void span(uint32_t pid, uint32_t tid, const spanring::RecordCopy& rec);
  void drops(uint32_t pid, uint32_t tid, uint64_t n, uint64_t first, uint64_t last,
             spanring::DropReason reason);
  void unfinished(uint32_t pid, uint32_t tid, uint64_t inv, uint32_t depth, std::string_view name,
                  bool cut, uint64_t ts);
  void undescribed(uint32_t pid, uint32_t tid, uint32_t count);
  // Version 3: a string definition (event 7), and a run (event 8) of records given as the
  // ring holds them (`slots`, whole 64-byte slots) whose decoded form the test states itself
  // (`decoded`, one record each, rendered into `text`).
  void string(uint16_t id, std::string_view bytes);
  // Version 4: the run carries the owner's clock `anchor`; its records may hold TSC times,
  // which `decoded` states converted.
  void run(uint32_t pid, uint32_t tid, uint64_t first_seq, const std::string& slots,
           const std::vector<spanring::RecordCopy>& decoded,
           spanring::TscClock::Pair anchor = {0, 0});
  // Version 4: clock samples (event 9); `reset` replaces the reader's samples.
  void clock(bool reset, const std::vector<spanring::TscClock::Pair>& samples);

  std::string bytes;  // the binary file
  std::string text;   // the same events as [STRACE] text

 private:
  char* room();
  // One event through both sinks: its binary bytes into the block, its line into `text`.
  template <class Event>
  void add(const Event& e, size_t (spanring::Sink::*method)(char*, const Event&) noexcept) {
    len_ += (sink_.*method)(room(), e);
    char line[spanring::kMaxLineBytes];
    text.append(line, (text_sink_.*method)(line, e));
  }
  spanring::BinarySink sink_;
  spanring::TextSink text_sink_;
  std::vector<char> buf_;
  size_t len_ = 0;
  bool open_ = false;
};

// A trace with every event kind, spread over `blocks` blocks of a few dozen events each.
TraceBuilder synthetic_trace(int blocks, uint32_t seed = 1);

// One compact record (segment_layout.h, CompactRecord) as a producer writes it: `count` integer
// attributes with keys `keys` and values `values` (bit i of `negative`: value i is signed and
// negative), or (text_id != 0) the attribute text string `text_id`.
std::string compact_slot(uint64_t seq, uint64_t ts, uint32_t dur, uint64_t inv, uint64_t hid,
                         uint8_t depth, uint16_t name_id, uint32_t count, const uint16_t* keys,
                         const uint32_t* values, uint8_t negative, uint16_t text_id = 0);
// One ordinary record (RecordHeader and its payload slots) with raw `name` and `attrs` bytes;
// `packed`: the attribute bytes are packed tokens (kRecordPackedAttrs).
std::string ordinary_slots(uint64_t seq, uint64_t ts, uint64_t dur, uint64_t inv, uint64_t hid,
                           uint32_t depth, std::string_view name, std::string_view attrs,
                           bool packed = false);

// A version-3 trace like the drainer writes: string definitions, runs of compact and ordinary
// (plain and packed) records, drops between them, over `blocks` blocks. `text` is the [STRACE]
// text of the records as stated by hand (not through the decoder).
TraceBuilder synthetic_v3_trace(int blocks, uint32_t seed = 1);

// Renders delivered events with TextSink; counts them.
class TextRenderer final : public spanring::EventVisitor {
 public:
  std::string text;
  uint64_t events = 0;
  std::vector<std::string> cmdlines;
  std::vector<std::string> thread_names;
  void process(const spanring::ProcessEvent& e) override;
  void thread(const spanring::ThreadEvent& e) override;
  void span(const spanring::SpanEvent& e) override;
  void drops(const spanring::DropsEvent& e) override;
  void unfinished(const spanring::UnfinishedEvent& e) override;
  void undescribed(const spanring::UndescribedEvent& e) override;

 private:
  template <class Event>
  void render(const Event& e, size_t (spanring::Sink::*method)(char*, const Event&) noexcept) {
    text.append(line_, (sink_.*method)(line_, e));
    ++events;
  }
  spanring::TextSink sink_;
  char line_[spanring::kMaxLineBytes];
};

// Reads `bytes` as a binary trace, rendering it.
spanring::ReadResult read_bytes(const std::string& bytes, TextRenderer& out,
                                uint64_t* last_block = nullptr);

// Offsets where the blocks of a well-formed file end (the first is the file header's end).
std::vector<uint64_t> block_ends(const std::string& bytes);

// Recomputes every block's CRCs whose header and payload lie within the file (as far as the
// lengths lead), so that mutated content reaches the event parser.
void fix_crcs(std::string& bytes);

}  // namespace binary_test
