// The drainer's output as files, a Destination (drain/destination.h): one file, optionally
// capped (--max-size), or a rotating set (--rotate SIZE[:COUNT]). OutputFiles owns the
// UringWriter of the current file and the BufferedWriter (pool of 1 MiB buffers) that writes
// to it; it sizes each buffer it hands out to the room left in the file, so a file never passes
// its limit and ends at a block / line boundary. When the room left cannot hold a buffer's worth
// of events it rotates (waiting until every buffer of the file is durable, then telling the
// drainer, which announces every process and thread again so that each file reads alone) or,
// with --max-size, hands out buffers of capacity 0 from then on, keeping back the room for the
// drainer's closing max_size drops line (take_closing()).
//
// Rotation names files the way logrotate does: the current file is always FILE (the -o path),
// the one before it FILE.1, then FILE.2, ... up to FILE.<COUNT-1>; a rotation deletes the
// oldest, renames each FILE.N to FILE.N+1 and FILE to FILE.1, then creates a new FILE. Chosen
// over perf's timestamped names (perf.data.<time>) because a reader that follows the trace
// (`tail -F`, a collector) and a restarted drainer both find the current file at the name they
// were given, and "newest COUNT" is "FILE and FILE.1 .. FILE.<COUNT-1>" with no listing.
//
// Restart (drain/journal.h): a rotation happens only once every buffer of the current file is
// written and committed, and FILE is renamed away before the new FILE is created; the segment's
// commit then names either the old file (complete, now FILE.1, never touched again) or the new
// FILE, so a restarted `spanring drain -o FILE --rotate ...` keeps FILE's committed prefix or
// starts FILE afresh, and loses or repeats nothing.
//
// Drain thread only.
#pragma once

#include "drain/buffered_writer.h"
#include "drain/destination.h"
#include "drain/uring_writer.h"

#include <cstdint>
#include <memory>
#include <string>

namespace spanring {

// The bounds on the output the operator asked for. Sizes in bytes; 0 = no bound.
struct OutputLimits {
  uint64_t max_size = 0;      // --max-size: the file holds at most this many bytes
  uint64_t rotate_size = 0;   // --rotate SIZE: a new file starts before one would pass this
  uint32_t rotate_count = 0;  // --rotate :COUNT: files kept, the current one included
  // The smallest SIZE accepted: a file must hold the largest group of events one record brings
  // (a process event with a 4 KiB command line, a thread event, drops and the span: ~16 KiB in
  // binary) twice over, plus --max-size's closing drops line.
  static constexpr uint64_t kMinBytes = 64u << 10;
  // COUNT when --rotate gives none: the current file and three before it.
  static constexpr uint32_t kDefaultRotateCount = 4;
  // The largest COUNT (names FILE.1 .. FILE.999).
  static constexpr uint32_t kMaxRotateCount = 1000;

  // Bytes one file may hold (0 = unbounded).
  uint64_t file_limit() const noexcept { return rotate_size != 0 ? rotate_size : max_size; }
  bool rotating() const noexcept { return rotate_size != 0; }
};

// Parses "SIZE" or "SIZE:COUNT" of --rotate, SIZE already converted to bytes by the caller's
// size parser (`size_bytes`), COUNT the text after the colon ("" = the default). Throws Error
// (kInvalidArgument) naming the problem: SIZE below kMinBytes (0 included), COUNT not in
// 1..kMaxRotateCount.
OutputLimits rotate_limits(uint64_t size_bytes, const std::string& count_text);

// Why a size option given `bytes`, below OutputLimits::kMinBytes, is refused ("N is below the
// smallest file ..."; the caller names the option).
std::string below_min_bytes(uint64_t bytes);

// Checks limits as a whole: --max-size and --rotate together, a bound below kMinBytes. Throws
// Error (kInvalidArgument).
void check_limits(const OutputLimits& limits);

class OutputFiles final : public Destination {
 public:
  // Buffers of kBufferBytes: large enough that one io_uring write carries thousands of lines,
  // small enough that a partly filled buffer flushed when idle costs nothing. At most
  // kMaxBuffers in flight (64 MiB of formatted text) before take() waits for the file.
  static constexpr size_t kBufferBytes = 1u << 20;
  static constexpr size_t kMaxBuffers = 64;

  // Opens `path` as UringWriter does (keeping its first `keep_bytes`), and each rotated file
  // too, with O_DIRECT where the filesystem takes it (UringWriter::Direct::kTry) unless the
  // environment says SPANRING_OUTPUT_DIRECT=0 (direct_mode()). Throws Error when it
  // cannot be opened, or when `limits` rotate and `path` is not a regular file (a pipe cannot
  // be rotated).
  OutputFiles(std::string path, uint64_t keep_bytes, UringWriter::Fallback fallback,
              const OutputLimits& limits);
  ~OutputFiles() override;  // waits for the buffers in flight
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;

  UringWriter& writer() noexcept { return *writer_; }
  const OutputLimits& limits() const noexcept { return limits_; }
  const std::string& path() const noexcept { return path_; }
  // Rotations done by this drainer.
  uint64_t rotations() const noexcept { return rotations_; }
  // True when a write to any file this drainer wrote failed.
  bool had_error() const noexcept { return failed_before_ || writer_->had_error(); }

  // Direct::kTry, or kOff when the environment has SPANRING_OUTPUT_DIRECT=0.
  static UringWriter::Direct direct_mode();

  // The name of the file N rotations older than the current one: path, path.1, path.2, ...
  static std::string rotated_path(const std::string& path, uint32_t n);

  // ---- Destination
  void attach(DestinationEvents& events, size_t max_event_bytes) override;
  uint64_t dev() const noexcept override { return writer_->dev(); }
  uint64_t ino() const noexcept override { return writer_->ino(); }
  uint64_t kept_bytes() const noexcept override { return kept_bytes_; }
  const std::string& name() const noexcept override { return path_; }
  Buffer* take() override;
  Buffer* take_closing() override;
  void give_back(Buffer* b) noexcept override { pool_->give_back(b); }
  void submit(Buffer* b, const Commit& commit) override;
  bool collect(int64_t timeout_us) override;
  size_t in_flight() const noexcept override { return pool_->in_flight(); }
  bool eager() const noexcept override { return true; }
  // Waits for every buffer, then fsyncs the file; false when a write to any file failed.
  bool finish() override;

 private:
  // Starts the next file: closes the current one (every buffer of it must be back from the
  // writer), deletes FILE.<COUNT-1>, renames FILE.N to FILE.N+1 and FILE to FILE.1, creates a
  // new empty FILE. Throws Error when a rename or the new file fails; the files are then as
  // far as the rotation got, and writer_ is still the old file's (which must not be written
  // to any more: it may have been renamed).
  void next_file();
  void rotate();          // waits for the file's buffers, next_file(), tells the drainer
  void reach_max_size();  // says so once; capacity 0 from now on

  std::string path_;
  UringWriter::Fallback fallback_;
  OutputLimits limits_;
  std::unique_ptr<UringWriter> writer_;
  std::unique_ptr<BufferedWriter> pool_;  // over *writer_ (moved to each new file)
  DestinationEvents* events_ = nullptr;
  uint64_t kept_bytes_ = 0;
  uint64_t file_limit_ = 0;  // bytes the current file may hold (0 = unbounded)
  uint64_t file_bytes_ = 0;  // bytes handed to the writer for the current file, kept prefix included
  uint64_t line_room_ = 0;   // --max-size: bytes kept back for the closing max_size drops line
  size_t min_room_ = 0;      // a buffer with less room than this is not started: rotate or stop
  bool full_ = false;        // --max-size reached (or a rotation failed): capacity 0
  uint64_t rotations_ = 0;
  bool failed_before_ = false;  // a rotated-out writer had a failed write
};

}  // namespace spanring
