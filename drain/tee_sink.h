// TeeSink, a drain-time Sink: `spanring run|drain --also-strace FILE`. Every event goes to the
// drainer's own sink (binary, say) and, formatted by TextSink, to a second file through its own
// UringWriter, so that one run yields the same events in both formats. It exists to check
// conversion (binary -> convert --to strace must equal this file byte for byte) and costs a
// second formatting pass: not for production runs. The text goes through a BufferedWriter
// (drain/buffered_writer.h) over the given UringWriter, buffer by buffer as the primary's.
//
// The second file is written, not committed: it holds this drainer's events from its start (a
// resumed `drain` starts it afresh) and no journal covers it. Its write errors are reported by
// its UringWriter and by finish(); the drainer's own file is unaffected.
//
// Drain thread only, like every Sink. Its kTextBuffers buffers are allocated up front, so the
// noexcept event methods never allocate; when all are in flight the drain thread waits for the
// text file.
#pragma once

#include "drain/buffered_writer.h"
#include "drain/uring_writer.h"
#include "format/sink.h"
#include "format/text_sink.h"


namespace spanring {

class TeeSink final : public Sink {
 public:
  // 16 x 1 MiB: a binary block of 1 MiB holds ~2.5 MiB of text, so a few buffers per block are
  // in flight at most; 16 leaves the text file room to lag behind.
  static constexpr size_t kTextBuffers = 16;
  static constexpr size_t kTextBufferBytes = 1u << 20;

  // `primary` and `text_writer` must outlive the TeeSink. Allocates its text buffers (throws
  // std::bad_alloc only).
  TeeSink(Sink& primary, UringWriter& text_writer);
  ~TeeSink() override;  // waits for the text buffers in flight
  TeeSink(const TeeSink&) = delete;
  TeeSink& operator=(const TeeSink&) = delete;

  size_t max_event_bytes() const noexcept override { return primary_.max_event_bytes(); }
  size_t begin_buffer(char* out) noexcept override { return primary_.begin_buffer(out); }
  void end_buffer(char* buffer, size_t len) noexcept override;
  // Only the drainer's own file rotates; the text copy is one file (drain/output_files.h).
  void begin_file() noexcept override { primary_.begin_file(); }
  size_t process(char* out, const ProcessEvent& e) noexcept override;
  size_t thread(char* out, const ThreadEvent& e) noexcept override;
  size_t span(char* out, const SpanEvent& e) noexcept override;
  size_t drops(char* out, const DropsEvent& e) noexcept override;
  size_t unfinished(char* out, const UnfinishedEvent& e) noexcept override;
  size_t undescribed(char* out, const UndescribedEvent& e) noexcept override;

  // Runs (format/sink.h) when the primary takes them: the primary gets each run as it is, the
  // text each of its records as the text drainer reads it from the ring (run_record), so that
  // `convert` of the primary's runs is checked against the text path's own decoding.
  bool runs() const noexcept override { return primary_.runs(); }
  size_t string(char* out, uint32_t id, std::string_view bytes) noexcept override {
    return primary_.string(out, id, bytes);
  }
  size_t run_header_bytes() const noexcept override { return primary_.run_header_bytes(); }
  size_t begin_run(char* out, uint32_t pid, uint32_t tid, uint64_t first_seq,
                   TscClock::Pair anchor) noexcept override {
    return primary_.begin_run(out, pid, tid, first_seq, anchor);
  }
  bool clock_events() const noexcept override { return primary_.clock_events(); }
  size_t clock(char* out, bool reset, const TscClock::Pair* samples,
               uint32_t n) noexcept override {
    return primary_.clock(out, reset, samples, n);
  }
  void end_run(char* out, uint32_t slots, uint32_t records) noexcept override {
    primary_.end_run(out, slots, records);
  }
  bool wants_run_records() const noexcept override { return true; }
  void run_record(const SpanEvent& e) noexcept override;
  void run_record_drop(const DropsEvent& e) noexcept override;
  // Writes the text still buffered and waits until the text file has it all and is fsynced.
  // Returns false when a write to it failed. Call after Drainer::finish(), once.
  bool finish() noexcept;

 private:
  char* text_room() noexcept;  // kMaxLineBytes of room in the current text buffer
  // Appends the line `line(room)` writes (at most kMaxLineBytes) to the current text buffer;
  // text_room may submit that buffer and take another first.
  template <class Line>
  void put_text(Line line) noexcept {
    char* t = text_room();
    current_->len += line(t);
  }
  void submit_text() noexcept;

  Sink& primary_;
  TextSink text_;
  BufferedWriter out_;
  Buffer* current_ = nullptr;
};

}  // namespace spanring
