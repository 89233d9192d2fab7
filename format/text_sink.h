// The [STRACE] text format as a Sink (format/sink.h): one line per event through the encoders
// of format/strace_format.h, no buffer framing, no line for thread metadata, the command line
// left out of the anchor. The text drainer writes through it, the tee of --also-strace and
// `spanring convert --to strace` too, so all three spell every event the same way.
//
// Keeps only the last span owner's part of the line (SpanLineOwner); drain thread (or any
// single thread) per instance, like every Sink.
#pragma once

#include "format/sink.h"
#include "format/strace_format.h"

namespace spanring {

class TextSink final : public Sink {
 public:
  size_t max_event_bytes() const noexcept override { return kMaxLineBytes; }
  size_t begin_buffer(char*) noexcept override { return 0; }
  void end_buffer(char*, size_t) noexcept override {}
  size_t process(char* out, const ProcessEvent& e) noexcept override {
    return format_anchor(out, e);
  }
  size_t thread(char*, const ThreadEvent&) noexcept override { return 0; }
  size_t span(char* out, const SpanEvent& e) noexcept override {
    return format_span(out, e, owner_);
  }
  // span(out, SpanEvent::of(pid, tid, rec)), called directly: the text drainer's path for each
  // record (no event built, no virtual call). Same bytes, same owner state.
  size_t span_record(char* out, uint32_t pid, uint32_t tid, const RecordCopy& rec) noexcept {
    return format_span(out, pid, tid, rec, owner_);
  }
  // format_span_plain with this sink's owner state: the text drainer's line straight from the
  // ring's slots; 0 when the record needs span_record instead.
  size_t span_plain(char* out, uint32_t pid, uint32_t tid, const RecordHeader& h,
                    const char* payload) noexcept {
    return format_span_plain(out, pid, tid, h, payload, owner_);
  }
  // format_span_compact with this sink's owner state; 0 when the record needs span_record.
  size_t span_compact(char* out, uint32_t pid, uint32_t tid, const RecordHeader& h,
                      const CompactRecord& c, const std::string_view* strings) noexcept {
    return format_span_compact(out, pid, tid, h, c, strings, owner_);
  }
  size_t drops(char* out, const DropsEvent& e) noexcept override { return format_drops(out, e); }
  size_t unfinished(char* out, const UnfinishedEvent& e) noexcept override {
    return format_unfinished(out, e);
  }
  size_t undescribed(char* out, const UndescribedEvent& e) noexcept override {
    return format_undescribed(out, e);
  }

 private:
  SpanLineOwner owner_;  // the last span's owner part of the line, formatted once per owner
};

}  // namespace spanring
