// The binary trace format (format/binary_format.h, docs/binary-format.md) as a Sink: every
// drainer buffer becomes one block; begin_buffer writes the (file header and) block header,
// end_buffer fills in the payload length and both CRCs. Events are written with their raw
// bytes, cut to the format's bounds (command line, thread name, unfinished name).
//
// Drain thread only, like every Sink; one buffer is open at a time (end_buffer completes the
// buffer begin_buffer began last).
#pragma once

#include "format/binary_format.h"
#include "format/sink.h"

#include <cstdint>

namespace spanring {

class BinarySink final : public Sink {
 public:
  // `file_header`: write the file header before the first block (false when appending to a
  // kept prefix that has one). `first_block_seq`: the first block's sequence number (a kept
  // prefix's next one).
  explicit BinarySink(bool file_header = true, uint64_t first_block_seq = 0) noexcept
      : header_pending_(file_header), next_seq_(first_block_seq) {}

  size_t max_event_bytes() const noexcept override { return kMaxBinaryEventBytes; }
  size_t begin_buffer(char* out) noexcept override;
  void end_buffer(char* buffer, size_t len) noexcept override;
  void begin_file() noexcept override {
    header_pending_ = true;
    next_seq_ = 0;
    version_ = kTraceVersion;  // a new file is written in the current version
  }
  size_t process(char* out, const ProcessEvent& e) noexcept override;
  size_t thread(char* out, const ThreadEvent& e) noexcept override;
  size_t span(char* out, const SpanEvent& e) noexcept override;
  size_t drops(char* out, const DropsEvent& e) noexcept override;
  size_t unfinished(char* out, const UnfinishedEvent& e) noexcept override;
  size_t undescribed(char* out, const UndescribedEvent& e) noexcept override;
  // Version 3: event 7 and event 8 (binary_format.h). Not with a version below 3 (a kept
  // prefix of an older file being appended to): then runs() is false and the drainer writes
  // every span as event 3.
  bool runs() const noexcept override { return version_ >= 3; }
  size_t string(char* out, uint32_t id, std::string_view bytes) noexcept override;
  // A version 3 file's runs have the 24-byte RunBody; version 4's RunBody4, with the anchor.
  size_t run_header_bytes() const noexcept override {
    return sizeof(EventHeader) + (version_ >= 4 ? sizeof(RunBody4) : sizeof(RunBody));
  }
  size_t begin_run(char* out, uint32_t pid, uint32_t tid, uint64_t first_seq,
                   TscClock::Pair anchor) noexcept override;
  // Version 4: event 9, and runs that keep TSC times.
  bool clock_events() const noexcept override { return version_ >= 4; }
  size_t clock(char* out, bool reset, const TscClock::Pair* samples,
               uint32_t n) noexcept override;
  void end_run(char* out, uint32_t slots, uint32_t records) noexcept override;
  // The version the file header says (kTraceVersion unless set for a kept older prefix).
  void set_version(uint32_t version) noexcept { version_ = version; }

 private:
  bool header_pending_;
  uint32_t version_ = kTraceVersion;
  uint64_t next_seq_;
  size_t block_at_ = 0;  // where the current buffer's block header is (after a file header)
};

}  // namespace spanring
