// BufferedWriter: a pool of equal-sized Buffers written to one file through a UringWriter,
// the one write path of the drainer's output file, its --also-strace copy and a flight
// recorder's snapshots.
//
// The caller fills a buffer from take(), hands it to submit(), and learns through the
// `on_done` callback when the file has it (in submission order, which is file order:
// UringWriter returns buffers that way), after which the buffer is free again. take() waits for
// the file when all `max_buffers` are in flight; collect() picks up what came back without
// taking a buffer; sync() waits for everything and fsyncs. Buffers are allocated on first use
// (or all at construction, `allocate_now`, for callers that must not allocate later) and kept
// until the BufferedWriter goes.
//
// What a buffer's bytes mean to anyone else (which ring tails move when it is in the file:
// drain/journal.h's PendingCommits) is the caller's to keep, in the same order; a Buffer is
// only bytes.
//
// Drain thread only (not thread-safe); the UringWriter's thread is the only other thread.
#pragma once

#include "drain/uring_writer.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace spanring {

class BufferedWriter {
 public:
  // Called on the drain thread for every buffer the file has back, in submission order, before
  // the buffer is free again: `b.failed` (not entirely in the file) and `b.file_end` (the file
  // holds complete buffers up to here) are set; `b.len` is what was submitted. Not called for
  // sync markers.
  using DoneFn = std::function<void(const Buffer& b)>;

  // `writer` must outlive the BufferedWriter (or be replaced with set_writer() first).
  // `buffer_bytes` (> 0): each buffer's size; `max_buffers` (> 0): buffers that may exist, so
  // at most that many bytes x buffers are in flight. `allocate_now`: allocate them all here
  // (throws std::bad_alloc) so that take() never allocates.
  BufferedWriter(UringWriter& writer, size_t buffer_bytes, size_t max_buffers,
                 DoneFn on_done = {}, bool allocate_now = false);
  // Waits until every submitted buffer is back (the writer thread still uses them until then).
  ~BufferedWriter();
  BufferedWriter(const BufferedWriter&) = delete;
  BufferedWriter& operator=(const BufferedWriter&) = delete;

  // A free buffer: len 0, capacity buffer_bytes(), failed false. When all max_buffers are in
  // flight, waits for the file to hand one back (handling it as collect() does).
  Buffer* take();
  // take() that never waits: nullptr when every buffer is in flight.
  Buffer* try_take();
  // A taken buffer that will not be submitted goes back to the pool.
  void give_back(Buffer* b) noexcept;
  // Hands a taken buffer (its first `len` bytes) to the file.
  void submit(Buffer* b);
  // Handles buffers the file has back: with timeout_us <= 0, every one that is back now; else
  // waits up to timeout_us for the next one and handles it alone. Returns how many it handled.
  size_t collect(int64_t timeout_us);
  // Buffers submitted and not back yet (a sync marker included).
  size_t in_flight() const noexcept { return in_flight_; }
  // Waits until every submitted buffer is back.
  void wait_all();
  // Queues a sync marker: it comes back (synced() turns true) once every buffer submitted
  // before it is back and the file is fsynced (files and block devices only). Does not wait,
  // unless the previous marker is still in flight (one at a time).
  void request_sync();
  // True once the marker of the last request_sync() is back.
  bool synced() const noexcept { return !marker_in_flight_; }
  // request_sync() and waits for it. Returns false when a write or the fsync of this writer's
  // file failed (ever).
  bool sync();

  // The file written to now. set_writer() moves to another file: nothing may be in flight.
  UringWriter& writer() const noexcept { return *writer_; }
  void set_writer(UringWriter& writer) noexcept { writer_ = &writer; }
  size_t buffer_bytes() const noexcept { return buffer_bytes_; }

 private:
  void handle(Buffer* b);
  Buffer* allocate();

  UringWriter* writer_;
  size_t buffer_bytes_;
  size_t max_buffers_;
  DoneFn on_done_;
  std::vector<std::unique_ptr<Buffer>> buffers_;  // every buffer we own
  std::vector<Buffer*> free_;
  size_t in_flight_ = 0;
  Buffer marker_;  // the sync marker (no data)
  bool marker_in_flight_ = false;
};

}  // namespace spanring
