// Byte input and output of the trace tools (`spanring convert`, `spanring report`, and the
// drainer's scan of a kept binary prefix), and the one result type their readers return.
//
// Cold path, one thread. Input is untrusted: the readers built on TraceInput check every length
// before they use it; TraceInput itself only moves bytes and counts them, so that every message
// can say at which byte something went wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spanring {

// A file, stdin ("-"), or bytes in memory, read front to back once.
class TraceInput {
 public:
  // Opens `path` for reading; "-" is stdin. Throws Error (with errno and the path) when it
  // cannot be opened or is a directory.
  static TraceInput open(const std::string& path);
  // Reads the bytes of `bytes` (tests; the input keeps its own copy).
  static TraceInput memory(std::string bytes, std::string name = "memory");

  TraceInput(TraceInput&& other) noexcept;
  TraceInput& operator=(TraceInput&&) = delete;
  TraceInput(const TraceInput&) = delete;
  TraceInput& operator=(const TraceInput&) = delete;
  ~TraceInput();

  // Copies up to `n` bytes to `out`; fewer only at the end of the input (or of the limit).
  // Throws Error on a read error (EIO, say), naming the offset.
  size_t read(char* out, size_t n);
  // The next up to `n` bytes, without consuming them (n <= 64).
  std::string_view peek(size_t n);
  // Stops the input after `bytes` bytes from its start (a committed prefix of a longer file).
  void set_limit(uint64_t bytes) noexcept { limit_ = bytes; }
  // Called with the offset after each read (a progress bar).
  void on_progress(std::function<void(uint64_t)> f) { progress_ = std::move(f); }

  uint64_t offset() const noexcept { return offset_; }  // bytes consumed so far
  // The total size when known (a regular file or memory), else nullopt (a pipe).
  std::optional<uint64_t> size() const noexcept { return size_; }
  const std::string& name() const noexcept { return name_; }

 private:
  TraceInput() = default;
  size_t raw_read(char* out, size_t n);  // from the fd or the memory, ignoring peeked_

  int fd_ = -1;            // -1: memory input
  bool owns_fd_ = false;   // false for stdin
  std::string memory_;
  size_t memory_at_ = 0;
  std::string peeked_;     // bytes read ahead by peek(), served first
  uint64_t offset_ = 0;
  uint64_t limit_ = UINT64_MAX;
  std::optional<uint64_t> size_;
  std::string name_;
  std::function<void(uint64_t)> progress_;
};

// A file, stdout ("-" or ""), or a string in memory, written front to back through a buffer.
class TraceOutput {
 public:
  // Creates or truncates `path` (mode 0644 before the umask); "-" or "" is stdout. Throws Error.
  static TraceOutput open(const std::string& path);
  // Appends everything to *sink (tests).
  static TraceOutput memory(std::string* sink);

  TraceOutput(TraceOutput&& other) noexcept;
  TraceOutput& operator=(TraceOutput&&) = delete;
  TraceOutput(const TraceOutput&) = delete;
  TraceOutput& operator=(const TraceOutput&) = delete;
  ~TraceOutput();  // flushes what is buffered, ignoring errors: call finish() to see them

  // Room for `n` bytes (n <= 64 KiB) to format into; commit(k) keeps the first k of them.
  // Inline: convert asks for a line's room once per record.
  char* room(size_t n) {
    if (n > kMaxRoom) n = kMaxRoom;  // callers ask for at most a line or an event
    if (__builtin_expect(buf_.size() - len_ < n, 0)) flush();
    return buf_.data() + len_;
  }
  void commit(size_t k) noexcept { len_ += k; }
  void write(std::string_view s);
  // Flushes and closes. Throws Error when a write failed (a full disk, a closed pipe).
  void finish();
  const std::string& name() const noexcept { return name_; }

 private:
  static constexpr size_t kMaxRoom = 64u << 10;  // the most room() gives: kept past a full buffer

  TraceOutput() = default;
  void flush();

  int fd_ = -1;
  bool owns_fd_ = false;
  std::string* sink_ = nullptr;
  std::vector<char> buf_;
  size_t len_ = 0;
  std::string name_;
};

// What a reader made of its input. Every message says what was wrong, where (byte offset, and
// block or line) and what that means for the output.
struct ReadResult {
  enum class Status : uint8_t {
    kComplete,   // the whole input was read
    kCut,        // the input ends inside a block (binary) or a line (text): everything up to
                 // `good_bytes` was read, the rest is ignored; `message` says what was cut
    kCorrupt,    // the input is a trace but a block or line is malformed at `error_offset`;
                 // the events before it were delivered
    kNotATrace,  // nothing in the input is a spanring or [STRACE] trace
  };
  Status status = Status::kComplete;
  std::string format;         // "spanring binary trace v1" or "[STRACE] text"
  std::string message;        // for every status but kComplete
  uint64_t bytes_read = 0;    // bytes of input consumed
  uint64_t good_bytes = 0;    // end of the last complete block / line that was delivered
  uint64_t error_offset = 0;  // kCut, kCorrupt: where the problem is
  uint64_t units = 0;         // complete blocks (binary) or lines (text) read
  uint64_t events = 0;        // events delivered
  std::vector<std::string> notes;  // facts worth a line that are not errors (a missing block)
  bool ok() const noexcept { return status == Status::kComplete || status == Status::kCut; }
  // Cut before anything complete: a binary file cut inside its file header, a text file cut
  // inside its first line. There is nothing to convert or report, so the commands reject it.
  bool holds_nothing() const noexcept { return status == Status::kCut && good_bytes == 0; }
};

// The first `n` bytes of `s` shown for a message: printable ASCII as is, others as \xNN.
std::string printable_prefix(std::string_view s, size_t n);

}  // namespace spanring
