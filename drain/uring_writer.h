// The drainer's only path to its output file: one thread that writes full buffers with io_uring
// at explicit file offsets, several in flight, and hands them back in file order (or, where
// io_uring is blocked and the caller allows it, with pwrite(2): see Fallback).
//
// Hand-off: the drain thread enqueues filled Buffers (moodycamel BlockingConcurrentQueue); the
// writer thread submits them, completes short writes (resubmitting the rest at the right offset)
// and retries -EAGAIN/-EINTR completions, then returns each buffer on the `done` queue in the
// order it was submitted, so the drain thread advances ring tails only over bytes that are in
// the file. While writes are in flight the writer sleeps on an eventfd that the io_uring signals
// at every completion and submit() writes when the writer sleeps: a buffer handed over then is
// taken (and staged, for a direct write) at once, and its write starts the moment the writes
// before it allow, not once the writer has come round for the buffer in front. No request in
// the ring serves as the wake-up (an io_uring read of an eventfd would hold back what must wait
// for every earlier request). Where the eventfd cannot be set up, the writer waits in
// io_uring_submit_and_wait for the front buffer instead and takes new buffers between waits.
// Callers go through a BufferedWriter (drain/buffered_writer.h), which owns the buffers. A write
// that fails otherwise (ENOSPC, EIO...) is reported once (drain/diagnostics.h); the buffer comes
// back with `failed` set and the file is cut back to the end of the last buffer
// written whole, so it always ends at a line boundary. Buffers stamped with an epoch
// (Buffer::epoch) at or below a failed one's come back failed without being written.
#pragma once

#include <concurrentqueue/blockingconcurrentqueue.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <thread>

namespace spanring {

// A run of bytes on its way to the file: what the writer needs and what it says back, nothing
// else (what the bytes mean to the segment is drain/journal.h's PendingCommits; the pool of
// buffers is drain/buffered_writer.h's).
struct Buffer {
  std::unique_ptr<char[]> data;
  size_t capacity = 0;  // bytes it may be filled with (a destination may lower it below the
                        // allocation, near a file's size limit; 0: no bytes, see Destination)
  size_t len = 0;       // bytes filled
  bool failed = false;  // set by the writer: not (entirely) in the file
  bool sync = false;    // a flush marker: no data; the writer fsyncs once every earlier
                        // buffer is back (files and block devices; on a pipe or character
                        // device there is nothing to fsync), then returns it
  uint64_t file_end = 0;  // set by the writer: the file holds complete buffers up to here
  // The drainer's failure epoch (drain/drainer.h, "After a failed write"): 0 = not stamped
  // (never refused). Once a stamped buffer's write fails, the writer fails every later buffer
  // whose epoch is at or below the failed one's without writing it: they were formatted before
  // the drainer knew of the failure and may name what the failed buffer announced (a string
  // definition, a process anchor, a thread, the file header).
  uint64_t epoch = 0;
};

class UringWriter {
 public:
  // Where io_uring cannot be set up (a seccomp profile that blocks it, as Docker's default
  // does; kernel.io_uring_disabled; an old kernel): kRequired throws, kSynchronous writes with
  // pwrite(2) (write(2) on a pipe) from the same thread instead: the same bytes at the same
  // offsets, the same order of returned buffers, the same cut-back after a failed write, so
  // the file, the commit journal and a restart are the same. Differences: one buffer in flight
  // (more CPU per byte), and after a failed write only that buffer fails (io_uring also fails
  // the ones in flight behind it), besides those its epoch refuses (Buffer::epoch).
  enum class Fallback : uint8_t { kRequired, kSynchronous };

  // kTry: a regular file is written with O_DIRECT where the filesystem takes it, so the kernel
  // does not copy the bytes into its page cache (on the VM measured, that copy was most of the
  // drainer's time: docs/performance.md). The file's bytes, their order, the returned buffers,
  // file_end, the cut-back after a failed write and a restart's resume are the same as kOff's.
  // Each buffer's whole 4 KiB blocks of the file are copied to an aligned staging buffer as the
  // buffer arrives and written with O_DIRECT; its bytes before the first block boundary and
  // after the last go through the page cache (no block is written both ways; the file always
  // ends at its last byte, nothing padded). The pieces of every queued buffer (head, blocks,
  // tail, next head...) go to the kernel as one linked io_uring chain, so several direct writes
  // are in flight and the kernel runs each once the one before it is complete: the file grows
  // only over bytes that are in it (unlinked direct writes that extend a file complete out of
  // order, and the file's size would run ahead of a hole). A piece that fails or is short ends
  // the chain; the next one goes on from there. Falls back to kOff, for good, where the O_DIRECT
  // open or a direct write is refused (EINVAL), and for pipes, devices and the synchronous
  // writer.
  enum class Direct : uint8_t { kOff, kTry };

  // Opens `path` for writing (created 0644 before the umask), cuts a regular file to its first
  // `keep_bytes` bytes (the part a previous drainer committed; 0 = start empty) and appends
  // after them; sets up io_uring. Throws spanring::Error when the file cannot be opened or cut,
  // or (kRequired) io_uring cannot be set up (ErrorCode::kUnsupported); nothing has been
  // written then.
  UringWriter(const std::string& path, unsigned queue_depth, uint64_t keep_bytes = 0,
              Fallback fallback = Fallback::kRequired, Direct direct = Direct::kOff);
  ~UringWriter();  // stops the thread after every queued buffer is written
  UringWriter(const UringWriter&) = delete;
  UringWriter& operator=(const UringWriter&) = delete;

  // Drain thread: queues a filled buffer or a sync marker (ownership passes to the writer);
  // wakes the writer when it sleeps with writes in flight (one eventfd write(2) then).
  void submit(Buffer* b);
  // Drain thread: takes back a written buffer, waiting up to timeout_us; nullptr when none.
  Buffer* take_done(int64_t timeout_us);
  uint64_t bytes_written() const noexcept { return bytes_written_.load(std::memory_order_acquire); }
  bool had_error() const noexcept { return error_.load(std::memory_order_acquire) != 0; }
  // The output file's identity, recorded in the segment's commit record.
  uint64_t dev() const noexcept { return dev_; }
  uint64_t ino() const noexcept { return ino_; }
  bool seekable() const noexcept { return seekable_; }
  // True when writing with pwrite(2) because io_uring could not be set up; fallback_cause()
  // then says why ("io_uring_queue_init: Function not implemented"), else it is empty.
  bool synchronous() const noexcept { return !fallback_cause_.empty(); }
  const std::string& fallback_cause() const noexcept { return fallback_cause_; }
  // True while buffers go with O_DIRECT (Direct::kTry and nothing refused it so far).
  bool direct() const noexcept { return direct_.load(std::memory_order_acquire); }
  // True when the io_uring writer sleeps on its eventfd while writes are in flight (taking
  // buffers handed over meanwhile); false where that could not be set up, and for the
  // synchronous writer.
  bool wakes_on_submit() const noexcept { return wake_fd_ >= 0; }
  // Buffers and sync markers the writer thread has taken from the queue, and how many of them
  // it took while a write of an earlier buffer was in flight (for tests and benchmarks: a
  // writer that takes nothing while it waits for the disk keeps the second at 0 when each
  // buffer is handed over while the one before it is being written alone).
  uint64_t buffers_taken() const noexcept { return taken_.load(std::memory_order_acquire); }
  uint64_t taken_while_writing() const noexcept {
    return taken_while_writing_.load(std::memory_order_acquire);
  }
  // True while the writer thread sleeps on its eventfd with writes in flight (for tests: a
  // buffer handed over then is taken while those writes are still in flight, unless one
  // completes first). Relaxed: a hint that the caller polls, ordering nothing.
  bool sleeps_on_writes() const noexcept {
    return writer_sleeps_.load(std::memory_order_relaxed);
  }

 private:
  void run();              // the io_uring writer thread
  void run_synchronous();  // the pwrite(2) writer thread (Fallback::kSynchronous)
  void report_error(int err, std::set<int>& reported);  // first errno kept; each said once
  // Writer thread: whether `b` is to fail unwritten (Buffer::epoch) after failures up to
  // epoch `refused` (0: none yet); refuse_after() notes a failed buffer's epoch.
  static bool refused(const Buffer& b, uint64_t refused_epoch) noexcept {
    return b.epoch != 0 && !b.sync && b.epoch <= refused_epoch;
  }
  static void refuse_after(const Buffer& b, uint64_t& refused_epoch) noexcept {
    if (b.epoch > refused_epoch) refused_epoch = b.epoch;
  }
  void open_direct();      // constructor, Direct::kTry: dfd_ and the partial block, or nothing
  void wake_writer();       // any thread: wakes the writer if it sleeps in sleep_until_woken
  void sleep_until_woken(); // writer thread: until a completion or a hand-off (eventfd)
  struct Impl;
  std::unique_ptr<Impl> impl_;  // the io_uring, touched by the writer thread only
  std::string path_;
  std::string fallback_cause_;  // why io_uring is not used; empty when it is
  bool seekable_ = true;        // false for pipes: offset -1 and one write in flight
  unsigned depth_ = 8;          // buffers in flight at most (a direct one in up to 3 writes)
  uint64_t start_ = 0;          // bytes kept from a previous drainer
  uint64_t dev_ = 0;
  uint64_t ino_ = 0;
  int fd_ = -1;
  int dfd_ = -1;                        // the same file opened with O_DIRECT, -1 when not used
  std::atomic<bool> direct_{false};     // written by the constructor and the writer thread
  moodycamel::BlockingConcurrentQueue<Buffer*> todo_;
  moodycamel::BlockingConcurrentQueue<Buffer*> done_;
  std::atomic<uint64_t> bytes_written_{0};
  std::atomic<int> error_{0};           // first errno of a failed write, 0 = none
  std::atomic<bool> stop_{false};
  // The writer's wake-up while writes are in flight: an eventfd registered with the io_uring
  // (signalled at every completion) that submit() also writes while writer_sleeps_ is set; -1
  // when not set up (the writer then waits in io_uring_submit_and_wait, as before).
  int wake_fd_ = -1;
  std::atomic<bool> writer_sleeps_{false};  // writer thread: set before it rechecks and sleeps
  std::atomic<uint64_t> taken_{0};               // written by the writer thread only
  std::atomic<uint64_t> taken_while_writing_{0};  // written by the writer thread only
  std::thread thread_;
};

}  // namespace spanring
