// BufferedWriter (drain/buffered_writer.h).
#include "drain/buffered_writer.h"

#include <utility>

namespace spanring {

BufferedWriter::BufferedWriter(UringWriter& writer, size_t buffer_bytes, size_t max_buffers,
                               DoneFn on_done, bool allocate_now)
    : writer_(&writer),
      buffer_bytes_(buffer_bytes),
      max_buffers_(max_buffers != 0 ? max_buffers : 1),
      on_done_(std::move(on_done)) {
  marker_.sync = true;
  buffers_.reserve(max_buffers_);
  free_.reserve(max_buffers_);
  if (allocate_now)
    while (buffers_.size() < max_buffers_) free_.push_back(allocate());
}

BufferedWriter::~BufferedWriter() { wait_all(); }

Buffer* BufferedWriter::allocate() {
  auto b = std::make_unique<Buffer>();
  // Not zero-filled: every byte is written before it is read. make_unique<char[]> would
  // memset the whole buffer (for 1 MiB, 3.1 of the 7.0 M instructions callgrind counted in the
  // drainer over the whole demo, for 3 buffers), and the kernel hands out zeroed pages anyway.
  b->data = std::make_unique_for_overwrite<char[]>(buffer_bytes_);
  b->capacity = buffer_bytes_;
  buffers_.push_back(std::move(b));
  return buffers_.back().get();
}

Buffer* BufferedWriter::try_take() {
  Buffer* b = nullptr;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (buffers_.size() < max_buffers_) {
    b = allocate();
  } else {
    return nullptr;
  }
  b->capacity = buffer_bytes_;
  b->len = 0;
  b->failed = false;
  b->epoch = 0;
  b->file_end = 0;
  return b;
}

Buffer* BufferedWriter::take() {
  for (;;) {
    if (Buffer* b = try_take()) return b;
    // Every buffer is on its way to the file: wait for one to come back.
    collect(100000);
  }
}

void BufferedWriter::give_back(Buffer* b) noexcept { free_.push_back(b); }

void BufferedWriter::submit(Buffer* b) {
  ++in_flight_;
  writer_->submit(b);
}

void BufferedWriter::handle(Buffer* b) {
  --in_flight_;
  if (b == &marker_) {
    marker_in_flight_ = false;
    return;
  }
  if (on_done_) on_done_(*b);
  free_.push_back(b);
}

size_t BufferedWriter::collect(int64_t timeout_us) {
  if (timeout_us > 0) {
    Buffer* b = writer_->take_done(timeout_us);
    if (b == nullptr) return 0;
    handle(b);
    return 1;
  }
  size_t n = 0;
  while (Buffer* b = writer_->take_done(0)) {
    handle(b);
    ++n;
  }
  return n;
}

void BufferedWriter::wait_all() {
  while (in_flight_ != 0) collect(100000);
}

void BufferedWriter::request_sync() {
  while (marker_in_flight_) collect(100000);  // one marker at a time: the previous one first
  marker_.failed = false;
  marker_in_flight_ = true;
  submit(&marker_);
}

bool BufferedWriter::sync() {
  request_sync();
  while (marker_in_flight_) collect(100000);
  return !writer_->had_error();
}

}  // namespace spanring
