#include "drain/uring_writer.h"

#include "drain/diagnostics.h"

#include <spanring/segment.h>
#include <spanring/test_point.h>

#include <fcntl.h>
#include <liburing.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <deque>
#include <cstdlib>
#include <set>
#include <vector>

namespace spanring {

namespace {

// O_DIRECT writes go in whole blocks of this many bytes, from memory aligned to it: 4 KiB is a
// multiple of every logical block size up to 4 KiB (512 and 4096 in practice) and of their
// memory alignment. A filesystem that wants more refuses the write (EINVAL): kOff from then on.
constexpr size_t kDirectBlock = 4096;

// Writes all `len` bytes of `p`: with pwrite(2) at `off` when `seekable`, else with write(2)
// (a pipe or device). A short write goes on further on; EINTR retries at once, EAGAIN after
// 100 us. Returns 0, or the errno that stopped it (EIO when a non-empty write made no
// progress).
int write_fully(int fd, bool seekable, const char* p, size_t len, uint64_t off) {
  size_t done = 0;
  while (done < len) {
    const ssize_t n = seekable ? ::pwrite(fd, p + done, len - done, static_cast<off_t>(off + done))
                               : ::write(fd, p + done, len - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      if (errno == EAGAIN) std::this_thread::sleep_for(std::chrono::microseconds(100));
    } else {
      return n == 0 ? EIO : errno;
    }
  }
  return 0;
}

// An aligned staging buffer of a direct write: the buffer's whole blocks.
struct Stage {
  char* data = nullptr;
  size_t capacity = 0;
};

}  // namespace

struct UringWriter::Impl {
  io_uring ring{};
  std::vector<Stage> free_stages;  // staging buffers of direct writes, for reuse
  ~Impl() {
    for (auto& s : free_stages) std::free(s.data);
  }
};

namespace {

// One buffer on its way to the file.
struct Inflight {
  Buffer* buffer;
  uint64_t offset;    // where its first byte goes
  size_t done = 0;    // bytes written so far (direct: of the current piece)
  int ops = 0;        // its writes (or fsync) in flight in the io_uring
  bool complete = false;
  bool refused = false;  // failed unwritten (Buffer::epoch)
  int error = 0;      // errno of a failed write
  // Direct writes go in three pieces, one after the other: the buffer's first `head` bytes (up
  // to the file's next block boundary) through the page cache (fd_), the next `direct_len`
  // (whole blocks, copied to the aligned `stage`) with O_DIRECT at `offset + head`, the rest
  // through the page cache. `piece` is the one to write next (kHead, kBlocks, kTail; kDone once
  // all are in the file).
  bool direct = false;           // written the direct way (staged or not)
  bool blocks_buffered = false;  // its blocks go through the page cache after all (O_DIRECT
                                 // refused, no staging memory, or a short write that ended
                                 // inside a block)
  uint8_t piece = 0;
  Stage stage;
  size_t head = 0;
  size_t direct_len = 0;
};

// The pieces of a direct write, in file order. The io_uring user data of a piece's write is its
// Inflight's address with the piece in the low two bits; other writes and fsyncs carry kWhole.
constexpr uint8_t kHead = 0, kBlocks = 1, kTail = 2, kDone = 3;
constexpr uintptr_t kWhole = 3;
static_assert(alignof(Inflight) >= 4, "the two low bits of an Inflight* carry the piece");

size_t piece_len(const Inflight& f, uint8_t piece) {
  switch (piece) {
    case kHead: return f.head;
    case kBlocks: return f.direct_len;
    case kTail: return f.buffer->len - f.head - f.direct_len;
    default: return 0;
  }
}

// Past every piece written whole (or empty); complete once none is left.
void advance(Inflight& f) {
  while (f.piece < kDone && f.done >= piece_len(f, f.piece)) {
    ++f.piece;
    f.done = 0;
  }
  if (f.piece == kDone) f.complete = true;
}

}  // namespace

UringWriter::UringWriter(const std::string& path, unsigned queue_depth, uint64_t keep_bytes,
                         Fallback fallback, Direct direct)
    : impl_(std::make_unique<Impl>()), path_(path), depth_(queue_depth ? queue_depth : 1) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error("cannot open output " + path + ": " + std::strerror(errno), errno, path);
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    throw Error("cannot stat output " + path + ": " + std::strerror(err), err, path);
  }
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
    // Pipes and character devices have no offsets: write at the current position, in order.
    seekable_ = false;
    depth_ = 1;
  } else {
    if (keep_bytes > static_cast<uint64_t>(st.st_size)) {
      ::close(fd_);
      throw Error("output " + path + " is " + std::to_string(st.st_size) +
                      " bytes, shorter than the " + std::to_string(keep_bytes) +
                      " bytes the segment says were committed to it",
                  EINVAL, path);
    }
    // Cut back to the last commit: no half line, and nothing written twice, at the seam.
    if (::ftruncate(fd_, static_cast<off_t>(keep_bytes)) != 0) {
      const int err = errno;
      ::close(fd_);
      throw Error("cannot cut output " + path + ": " + std::strerror(err), err, path);
    }
    start_ = keep_bytes;
  }
  // Entries for a chain of three pieces per queued buffer and a sync marker's fsync.
  const int r = io_uring_queue_init(depth_ * 4, &impl_->ring, 0);
  if (r < 0) {
    const std::string cause = "io_uring_queue_init: " + std::string(std::strerror(-r));
    if (fallback != Fallback::kSynchronous) {
      ::close(fd_);
      throw Error(ErrorCode::kUnsupported,
                  "io_uring is unavailable (" + cause + ") and tracing is required", -r, path);
    }
    // Blocked by seccomp (Docker's default profile), kernel.io_uring_disabled, an old kernel:
    // the same thread writes with pwrite(2) instead, one buffer at a time.
    fallback_cause_ = cause;
  } else {
    // The writer's wake-up while writes are in flight: signalled by the kernel at every
    // completion and by submit(). Without it (eventfd or its registration refused) the writer
    // waits for the front buffer in io_uring_submit_and_wait.
    const int efd = ::eventfd(0, EFD_CLOEXEC);
    if (efd >= 0 && io_uring_register_eventfd(&impl_->ring, efd) == 0) wake_fd_ = efd;
    else if (efd >= 0) ::close(efd);
  }
  if (direct == Direct::kTry && seekable_ && S_ISREG(st.st_mode) && !synchronous())
    open_direct();
  thread_ = std::thread([this] { synchronous() ? run_synchronous() : run(); });
}

void UringWriter::open_direct() {
  // The same file again, with O_DIRECT (refused with EINVAL by filesystems without it, tmpfs
  // before Linux 6.6). Checked to be the same inode: the path could have been replaced meanwhile.
  const int d = ::open(path_.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (d < 0) return;
  struct stat st {};
  if (::fstat(d, &st) != 0 || st.st_dev != dev_ || st.st_ino != ino_) {
    ::close(d);
    return;
  }
  dfd_ = d;
  direct_.store(true, std::memory_order_release);
}

UringWriter::~UringWriter() {
  stop_.store(true, std::memory_order_release);
  todo_.enqueue(nullptr);  // wakes the writer if it waits for work
  wake_writer();           // or for writes in flight
  if (thread_.joinable()) thread_.join();
  if (!synchronous()) io_uring_queue_exit(&impl_->ring);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (dfd_ >= 0) ::close(dfd_);
  if (fd_ >= 0) ::close(fd_);
}

void UringWriter::submit(Buffer* b) {
  todo_.enqueue(b);
  wake_writer();
}

void UringWriter::wake_writer() {
  if (wake_fd_ < 0) return;
  // seq_cst fence: pairs with the writer's fence between setting writer_sleeps_ and looking at
  // the queue (sleep_until_woken): either the writer sees the buffer just queued, or this sees
  // it asleep and wakes it. A write while it is awake costs nothing but one spare wake-up.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!writer_sleeps_.load(std::memory_order_relaxed)) return;
  const uint64_t one = 1;
  // Fails only when the counter would overflow (it is read at every wake-up): nothing to do.
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void UringWriter::sleep_until_woken() {
  io_uring* ring = &impl_->ring;
  if (io_uring_cq_ready(ring) != 0) return;
  writer_sleeps_.store(true, std::memory_order_relaxed);
  // seq_cst fence: pairs with wake_writer()'s, after the queue's enqueue: a buffer queued
  // before the drain thread could see writer_sleeps_ set shows in size_approx() below.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // A completion posted after the look at the CQ signals the eventfd (the kernel signals it
  // for every batch of completions, whether or not anyone sleeps), so read() returns for it;
  // one posted before it is seen here. A count left from completions reaped earlier makes
  // read() return at once: the loop then finds nothing new and sleeps again.
  if (io_uring_cq_ready(ring) == 0 && todo_.size_approx() == 0) {
    uint64_t count = 0;
    // EINTR (the ring's task work, a signal): the loop looks at the CQ and the queue again.
    [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &count, sizeof count);
  }
  writer_sleeps_.store(false, std::memory_order_relaxed);
}

Buffer* UringWriter::take_done(int64_t timeout_us) {
  Buffer* b = nullptr;
  if (timeout_us <= 0) return done_.try_dequeue(b) ? b : nullptr;
  return done_.wait_dequeue_timed(b, timeout_us) ? b : nullptr;
}

void UringWriter::report_error(int err, std::set<int>& reported) {
  if (error_.load(std::memory_order_relaxed) == 0) error_.store(err, std::memory_order_release);
  if (reported.insert(err).second)
    report("spanring: writing %s failed: %s; the records of the failed writes are "
                 "counted as unwritten, draining goes on\n", path_.c_str(), std::strerror(err));
}

void UringWriter::run_synchronous() {
  // The io_uring path's contract, one buffer at a time: each buffer at its offset (the current
  // position on a pipe), short writes finished, EINTR/EAGAIN retried, buffers returned in file
  // order with file_end; a failed buffer comes back failed, the file is cut back to the last
  // whole buffer and the next buffer goes there. fsync for files and block devices only.
  uint64_t good_end = start_;  // end of the last buffer written whole
  std::set<int> reported;
  uint64_t refused_epoch = 0;  // Buffer::epoch
  for (;;) {
    Buffer* b = nullptr;
    if (!todo_.wait_dequeue_timed(b, 1000000) || b == nullptr) {
      if (stop_.load(std::memory_order_acquire) && todo_.size_approx() == 0) return;
      continue;
    }
    if (b->sync) {
      if (seekable_ && ::fsync(fd_) != 0) report_error(errno, reported);
      b->file_end = good_end;
      done_.enqueue(b);
      continue;
    }
    if (refused(*b, refused_epoch)) {
      b->failed = true;  // formatted before the drainer knew of the failure: not written
      b->file_end = good_end;
      done_.enqueue(b);
      continue;
    }
    const int err = write_fully(fd_, seekable_, b->data.get(), b->len, good_end);
    if (err != 0) {
      report_error(err, reported);
      refuse_after(*b, refused_epoch);
      b->failed = true;
      if (seekable_ && ::ftruncate(fd_, static_cast<off_t>(good_end)) != 0)
        report_error(errno, reported);
    } else {
      SPANRING_TEST_POINT("writer_written_not_returned");
      good_end += b->len;
      bytes_written_.store(good_end, std::memory_order_release);
    }
    b->file_end = good_end;
    done_.enqueue(b);
  }
}

void UringWriter::run() {
  io_uring* ring = &impl_->ring;
  std::deque<Inflight> q;
  uint64_t next_offset = start_;  // where the next new buffer goes
  uint64_t good_end = start_;     // end of the last buffer written whole, in file order
  std::set<int> reported;    // errnos already reported: each is said once
  int chain_ops = 0;         // direct pieces in flight (one linked chain at most)
  uint64_t refused_epoch = 0;  // Buffer::epoch

  Impl& im = *impl_;
  auto set_data = [](io_uring_sqe* sqe, Inflight& f, uintptr_t tag) {
    io_uring_sqe_set_data(sqe, reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(&f) | tag));
  };
  auto submit_write = [&](Inflight& f) {
    io_uring_sqe* sqe = io_uring_get_sqe(ring);
    if (sqe == nullptr) return false;  // ring full: retried after the next completion
    const uint64_t off = seekable_ ? f.offset + f.done : static_cast<uint64_t>(-1);
    io_uring_prep_write(sqe, fd_, f.buffer->data.get() + f.done,
                        static_cast<unsigned>(f.buffer->len - f.done), off);
    set_data(sqe, f, kWhole);
    f.ops = 1;
    return true;
  };
  auto release_stage = [&](Inflight& f) {
    if (f.stage.data != nullptr) im.free_stages.push_back(f.stage);
    f.stage = Stage{};
  };
  // A direct write: the buffer's bytes up to the file's next block boundary (`head`) and after
  // its last whole block go through the page cache; the whole blocks between, copied to an
  // aligned staging buffer as the buffer arrives (while earlier ones are being written), with
  // O_DIRECT. No block is written both ways, so no page a reader cached can go stale under a
  // direct write.
  auto prepare_direct = [&](Inflight& f) {
    const size_t len = f.buffer->len;
    const size_t to_boundary =
        static_cast<size_t>((kDirectBlock - f.offset % kDirectBlock) % kDirectBlock);
    f.head = std::min(len, to_boundary);
    f.direct_len = (len - f.head) / kDirectBlock * kDirectBlock;
    if (f.direct_len != 0) {
      Stage st{};
      while (!im.free_stages.empty() && st.data == nullptr) {
        st = im.free_stages.back();
        im.free_stages.pop_back();
        if (st.capacity < f.direct_len) {
          std::free(st.data);
          st = Stage{};
        }
      }
      if (st.data == nullptr) {
        st.data = static_cast<char*>(std::aligned_alloc(kDirectBlock, f.direct_len));
        st.capacity = f.direct_len;
      }
      if (st.data == nullptr) {
        f.blocks_buffered = true;  // no staging: the blocks through the page cache
      } else {
        f.stage = st;
        std::memcpy(st.data, f.buffer->data.get() + f.head, f.direct_len);
      }
    }
    advance(f);
  };
  // One linked chain of the direct pieces of every buffer from the front of the queue up to the
  // first that is not a direct one (a sync marker, a page-cache buffer): head, blocks, tail,
  // next buffer's head... IOSQE_IO_LINK starts each piece only once the one before it is
  // complete, so pieces complete in file order and the file grows only over bytes that are in
  // it (a reader of the live file never sees a hole): direct writes that extend a file, in
  // flight together and unlinked, complete out of order on ext4 (measured; docs/performance.md),
  // and the file's size follows the last one to complete. The kernel goes on from one piece to
  // the next without this thread (it takes them in turn, a worker of the io_uring runs the
  // blocking ones back to back), which is what several writes in flight buy here. A piece that
  // fails or comes back short ends the chain (the kernel cancels the rest, -ECANCELED); the next
  // chain starts from where the file ends.
  auto submit_chain = [&] {
    io_uring_sqe* last = nullptr;
    for (auto& f : q) {
      if (f.complete) continue;
      if (f.buffer->sync || !f.direct) break;
      for (uint8_t piece = f.piece; piece < kDone; ++piece) {
        const size_t from = piece == f.piece ? f.done : 0;
        const size_t len = piece_len(f, piece);
        if (len == from) continue;
        // Room for this piece, and one entry kept for a sync marker's fsync.
        if (io_uring_sq_space_left(ring) < 2) goto full;
        io_uring_sqe* sqe = io_uring_get_sqe(ring);
        if (sqe == nullptr) goto full;
        size_t at = from;  // the piece's first byte to write, within the buffer
        if (piece == kBlocks) at += f.head;
        if (piece == kTail) at += f.head + f.direct_len;
        if (piece == kBlocks && f.stage.data != nullptr && !f.blocks_buffered)
          io_uring_prep_write(sqe, dfd_, f.stage.data + from, static_cast<unsigned>(len - from),
                              f.offset + at);
        else
          io_uring_prep_write(sqe, fd_, f.buffer->data.get() + at,
                              static_cast<unsigned>(len - from), f.offset + at);
        set_data(sqe, f, piece);
        // The first piece goes straight to a worker: a direct write that extends the file
        // blocks (ext4 refuses it without waiting), and the worker then runs the linked pieces
        // after it itself, without a round trip through this thread.
        if (last != nullptr) last->flags |= IOSQE_IO_LINK;
        else sqe->flags |= IOSQE_ASYNC;
        last = sqe;
        ++f.ops;
        ++chain_ops;
      }
    }
  full:;
  };
  // A direct piece's completion. The chain goes on in the kernel on success; otherwise the
  // pieces after it are cancelled and the next chain starts from here.
  auto piece_done = [&](Inflight& f, uint8_t piece, int res) {
    --f.ops;
    --chain_ops;
    if (f.complete || piece != f.piece) return;  // cancelled behind a failed piece
    if (res == -ECANCELED || res == -EAGAIN || res == -EINTR) return;  // the next chain again
    if (res == -EINVAL && piece == kBlocks && !f.blocks_buffered) {
      // O_DIRECT refused (an alignment this filesystem does not take): the blocks of this and
      // every queued buffer through the page cache, and every later buffer entirely.
      direct_.store(false, std::memory_order_release);
      for (auto& g : q) g.blocks_buffered = true;
      return;
    }
    if (res <= 0) {
      f.error = res < 0 ? -res : EIO;  // 0: no progress on a non-empty write
      f.complete = true;
      return;
    }
    f.done += static_cast<size_t>(res);
    // Short inside a block: the rest of the blocks is not aligned any more.
    if (piece == kBlocks && f.done < f.direct_len && f.done % kDirectBlock != 0)
      f.blocks_buffered = true;
    advance(f);
  };
  auto submit_sync = [&](Inflight& f) {
    io_uring_sqe* sqe = io_uring_get_sqe(ring);
    if (sqe == nullptr) return false;
    io_uring_prep_fsync(sqe, fd_, 0);
    set_data(sqe, f, kWhole);
    f.ops = 1;
    return true;
  };
  auto report = [&](int err) { report_error(err, reported); };

  for (;;) {
    // Take new buffers while there is room in flight. Sync markers wait at the front.
    while (q.size() < depth_) {
      Buffer* b = nullptr;
      // Idle, the writer sleeps until a buffer (or the destructor's null) arrives; the timeout
      // is only a safety net (an idle drainer must cost well under 1% of a core).
      if (q.empty() && stop_.load(std::memory_order_acquire) && todo_.size_approx() == 0)
        return;  // everything queued before the destructor is written
      const bool got = q.empty() ? todo_.wait_dequeue_timed(b, 1000000) : todo_.try_dequeue(b);
      if (!got) break;
      if (b == nullptr) break;  // the destructor's wake-up: check stop_ below
      bool writing = false;
      for (const auto& f : q) writing |= f.ops > 0;
      taken_.store(taken_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
      if (writing)
        taken_while_writing_.store(taken_while_writing_.load(std::memory_order_relaxed) + 1,
                                   std::memory_order_release);
      q.emplace_back();
      q.back().buffer = b;
      q.back().offset = next_offset;
      if (refused(*b, refused_epoch)) {
        // Formatted before the drainer knew of a failure: back failed, in its turn, unwritten
        // (it takes no room in the file).
        q.back().refused = true;
        q.back().complete = true;
      } else if (!b->sync) {
        next_offset += b->len;
        if (b->len == 0) q.back().complete = true;
        else if (direct_.load(std::memory_order_relaxed)) {
          q.back().direct = true;
          prepare_direct(q.back());
        }
      }
    }
    if (q.empty()) {
      if (stop_.load(std::memory_order_acquire) && todo_.size_approx() == 0) return;
      continue;
    }
    // A sync marker runs once everything before it is retired. fsync applies to files and
    // block devices only: on a pipe, FIFO, terminal or /dev/null it fails with EINVAL, which
    // is no write error (the bytes are already with the reader), so the marker just completes.
    if (q.front().buffer->sync && q.front().ops == 0 && !q.front().complete) {
      if (seekable_) submit_sync(q.front());
      else q.front().complete = true;
    }
    // Direct pieces: a new chain once the last one is over (with the eventfd wake-up, at the
    // completion of its last piece, every buffer handed over meanwhile already staged).
    // Page-cache writes (several in flight, each at its offset) once every direct buffer
    // before them is complete.
    if (chain_ops == 0) submit_chain();
    bool in_flight = false;
    bool direct_pending = false;
    for (auto& f : q) {
      if (f.ops == 0 && !f.buffer->sync && !f.complete && !f.direct && !direct_pending)
        submit_write(f);
      in_flight |= f.ops > 0;
      direct_pending |= f.direct && !f.complete;
    }

    io_uring_cqe* cqe = nullptr;
    // Wait only for something in flight (an empty buffer, say, completes without a write).
    // With room for another buffer and the eventfd, the writer sleeps until the next
    // completion or hand-off, whichever comes first: a buffer handed over during a long chain
    // is taken and staged then, and the next chain goes out at the last piece's completion.
    // Otherwise it waits for all of the front buffer's pieces (a chain's pieces complete in
    // order): one wake-up per buffer, when that buffer can go back.
    int r = 0;
    if (in_flight && wake_fd_ >= 0 && q.size() < depth_) {
      r = io_uring_submit(ring);
      if (r >= 0) sleep_until_woken();
    } else if (in_flight) {
      unsigned wait_nr = 1;
      if (q.front().direct && !q.front().complete && q.front().ops > 0)
        wait_nr = static_cast<unsigned>(q.front().ops);
      r = io_uring_submit_and_wait(ring, wait_nr);
    }
    if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY) {
      report(-r);
      // The ring itself failed: nothing in flight can complete any more.
      for (auto& f : q) { f.complete = true; f.error = -r; f.ops = 0; }
      chain_ops = 0;
    }
    while (io_uring_peek_cqe(ring, &cqe) == 0) {
      const auto data = reinterpret_cast<uintptr_t>(io_uring_cqe_get_data(cqe));
      const int res = cqe->res;
      io_uring_cqe_seen(ring, cqe);
      auto* f = reinterpret_cast<Inflight*>(data & ~kWhole);
      if (f == nullptr) continue;
      const auto tag = static_cast<uint8_t>(data & kWhole);
      if (tag != kWhole) {
        piece_done(*f, tag, res);
        continue;
      }
      f->ops = 0;
      if (f->buffer->sync) {
        if (res < 0) report(-res);
        f->complete = true;
      } else if (res == -EAGAIN || res == -EINTR) {
        submit_write(*f);  // transient: the same bytes again
      } else if (res < 0) {
        f->error = -res;
        f->complete = true;
      } else if (res == 0) {
        f->error = EIO;  // no progress on a non-empty write
        f->complete = true;
      } else {
        f->done += static_cast<size_t>(res);
        if (f->done < f->buffer->len) submit_write(*f);  // short write: the rest, further on
        else f->complete = true;
      }
    }
    // Retire in file order, so that the drain thread's tail updates follow the file.
    while (!q.empty() && q.front().complete && q.front().ops == 0) {
      Inflight f = q.front();
      q.pop_front();
      release_stage(f);
      if (f.refused) {
        f.buffer->failed = true;
        f.buffer->file_end = good_end;
        done_.enqueue(f.buffer);
        continue;
      }
      if (f.error != 0) {
        report(f.error);
        refuse_after(*f.buffer, refused_epoch);
        f.buffer->failed = true;
        f.buffer->file_end = good_end;
        done_.enqueue(f.buffer);  // before the buffers after it: tails must never go back
        // Everything queued after it was aimed past a hole: wait for what is in flight, then
        // cut the file back to the last whole buffer and write the next buffers from there.
        io_uring_submit(ring);  // a retry prepared while reaping is in flight too, then
        while (!q.empty()) {
          for (auto& g : q)
            if (g.ops == 0 && !g.complete && !g.buffer->sync) g.complete = true;
          bool pending = false;
          for (auto& g : q) pending |= g.ops > 0;
          if (pending && io_uring_wait_cqe(ring, &cqe) == 0) {
            const auto data = reinterpret_cast<uintptr_t>(io_uring_cqe_get_data(cqe));
            io_uring_cqe_seen(ring, cqe);
            auto* g = reinterpret_cast<Inflight*>(data & ~kWhole);
            if (g != nullptr) {
              if ((data & kWhole) != kWhole) --chain_ops;
              if (g->ops > 0) --g->ops;
              g->complete = true;
            }
            continue;
          }
          Inflight g = q.front();
          q.pop_front();
          release_stage(g);
          if (!g.buffer->sync) g.buffer->failed = true;
          g.buffer->file_end = good_end;
          done_.enqueue(g.buffer);
        }
        if (seekable_ && ::ftruncate(fd_, static_cast<off_t>(good_end)) != 0) report(errno);
        next_offset = good_end;
        continue;
      }
      if (!f.buffer->sync) {
        SPANRING_TEST_POINT("writer_written_not_returned");
        good_end = f.offset + f.buffer->len;
        bytes_written_.store(good_end, std::memory_order_release);
      }
      f.buffer->file_end = good_end;
      done_.enqueue(f.buffer);
    }
  }
}

}  // namespace spanring
