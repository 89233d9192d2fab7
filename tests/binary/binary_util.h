// Helpers of the 'binary' suite: building binary traces through BinarySink exactly as the
// drainer frames them (one block per buffer), rendering what a reader delivers as [STRACE]
// text, and walking a file's blocks.
#pragma once

#include "format/binary_format.h"
#include "format/strace_format.h"

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

  std::string bytes;  // the binary file
  std::string text;   // the same events as [STRACE] text

 private:
  char* room();
  spanring::BinarySink sink_;
  spanring::TextSink text_sink_;
  std::vector<char> buf_;
  size_t len_ = 0;
  bool open_ = false;
};

// A trace with every event kind, spread over `blocks` blocks of a few dozen events each.
TraceBuilder synthetic_trace(int blocks, uint32_t seed = 1);

// Renders delivered events with TextSink; counts them.
class TextRenderer final : public spanring::BinaryVisitor {
 public:
  std::string text;
  uint64_t events = 0;
  std::vector<std::string> cmdlines;
  std::vector<std::string> thread_names;
  void process(uint32_t pid, uint32_t tid, uint64_t mono_ns, uint64_t wall_ns,
               std::string_view cmdline) override;
  void thread(uint32_t pid, uint32_t tid, std::string_view name) override;
  void span(uint32_t pid, uint32_t tid, const spanring::RecordCopy& rec) override;
  void drops(uint32_t pid, uint32_t tid, uint64_t dropped, uint64_t first_seq, uint64_t last_seq,
             spanring::DropReason reason) override;
  void unfinished(uint32_t pid, uint32_t tid, uint64_t inv, uint32_t depth, std::string_view name,
                  bool name_cut, uint64_t ts_ns) override;
  void undescribed(uint32_t pid, uint32_t tid, uint32_t count) override;

 private:
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
