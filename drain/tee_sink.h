// TeeSink: `spanring run|drain --also-strace FILE`. Every event goes to the drainer's own sink
// (binary, say) and, formatted by TextSink, to a second file through its own UringWriter, so
// that one run yields the same events in both formats. It exists to check conversion (binary ->
// convert --to strace must equal this file byte for byte) and costs a second formatting pass:
// not for production runs.
//
// The second file is written, not committed: it holds this drainer's events from its start (a
// resumed `drain` starts it afresh) and no journal covers it. Its write errors are reported by
// its UringWriter and by finish(); the drainer's own file is unaffected.
//
// Drain thread only, like every Sink. Buffers are allocated up front, so the noexcept event
// methods never allocate; when all are in flight the drain thread waits for the text file.
#pragma once

#include "format/sink.h"
#include "format/strace_format.h"
#include "drain/uring_writer.h"

#include <memory>
#include <vector>

namespace spanring {

class TeeSink final : public Sink {
 public:
  TeeSink(Sink& primary, UringWriter& text_writer);
  ~TeeSink() override;
  TeeSink(const TeeSink&) = delete;
  TeeSink& operator=(const TeeSink&) = delete;

  size_t max_event_bytes() const noexcept override { return primary_.max_event_bytes(); }
  size_t begin_buffer(char* out) noexcept override { return primary_.begin_buffer(out); }
  void end_buffer(char* buffer, size_t len) noexcept override;
  size_t process(char* out, uint32_t pid, uint32_t tid, uint64_t mono_ns, uint64_t wall_ns,
                 std::string_view cmdline) noexcept override;
  size_t thread(char* out, uint32_t pid, uint32_t tid, std::string_view name) noexcept override;
  size_t span(char* out, uint32_t pid, uint32_t tid, const RecordCopy& rec) noexcept override;
  size_t drops(char* out, uint32_t pid, uint32_t tid, uint64_t dropped, uint64_t first_seq,
               uint64_t last_seq, DropReason reason) noexcept override;
  size_t unfinished(char* out, uint32_t pid, uint32_t tid, uint64_t inv, uint32_t depth,
                    std::string_view name, bool name_cut, uint64_t ts_ns) noexcept override;
  size_t undescribed(char* out, uint32_t pid, uint32_t tid, uint32_t count) noexcept override;

  // Writes the text still buffered and waits until the text file has it all and is fsynced.
  // Returns false when a write to it failed. Call after Drainer::finish().
  bool finish() noexcept;

 private:
  char* text_room() noexcept;  // kMaxLineBytes of room in the current text buffer
  void submit_text() noexcept;
  void recycle(Buffer* b) noexcept;

  Sink& primary_;
  TextSink text_;
  UringWriter& writer_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::vector<Buffer*> free_;
  Buffer* current_ = nullptr;
  size_t in_flight_ = 0;
};

}  // namespace spanring
