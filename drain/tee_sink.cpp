#include "drain/tee_sink.h"

namespace spanring {
namespace {
// 16 x 1 MiB: a binary block of 1 MiB holds ~2.5 MiB of text, so a few buffers per block are
// in flight at most; 16 leaves the text file room to lag behind.
constexpr size_t kTextBuffers = 16;
constexpr size_t kTextBufferBytes = 1u << 20;
}  // namespace

TeeSink::TeeSink(Sink& primary, UringWriter& text_writer)
    : primary_(primary), writer_(text_writer) {
  for (size_t i = 0; i < kTextBuffers; ++i) {
    auto b = std::make_unique<Buffer>();
    b->data = std::make_unique<char[]>(kTextBufferBytes);
    b->capacity = kTextBufferBytes;
    b->tails.reserve(1);
    free_.push_back(b.get());
    buffers_.push_back(std::move(b));
  }
}

TeeSink::~TeeSink() {
  // Buffers still with the writer must come back before they are freed.
  while (in_flight_ > 0)
    if (Buffer* b = writer_.take_done(100000)) recycle(b);
}

void TeeSink::recycle(Buffer* b) noexcept {
  if (b->sync) return;
  --in_flight_;
  b->len = 0;
  b->failed = false;
  free_.push_back(b);
}

char* TeeSink::text_room() noexcept {
  if (current_ != nullptr && current_->capacity - current_->len < kMaxLineBytes) submit_text();
  while (current_ == nullptr) {
    while (Buffer* b = writer_.take_done(0)) recycle(b);
    if (!free_.empty()) {
      current_ = free_.back();
      free_.pop_back();
      current_->len = 0;
      break;
    }
    if (Buffer* b = writer_.take_done(100000)) recycle(b);
  }
  return current_->data.get() + current_->len;
}

void TeeSink::submit_text() noexcept {
  if (current_ == nullptr || current_->len == 0) return;
  ++in_flight_;
  writer_.submit(current_);
  current_ = nullptr;
}

void TeeSink::end_buffer(char* buffer, size_t len) noexcept {
  primary_.end_buffer(buffer, len);
  // The text follows the primary file buffer by buffer, so neither lags the other much.
  submit_text();
}

// Each event: its text line first (into the current text buffer), then the primary's bytes.
size_t TeeSink::process(char* out, const ProcessEvent& e) noexcept {
  char* t = text_room();  // may submit the current buffer and take another
  current_->len += text_.process(t, e);
  return primary_.process(out, e);
}

size_t TeeSink::thread(char* out, const ThreadEvent& e) noexcept {
  char* t = text_room();  // may submit the current buffer and take another
  current_->len += text_.thread(t, e);
  return primary_.thread(out, e);
}

size_t TeeSink::span(char* out, const SpanEvent& e) noexcept {
  char* t = text_room();  // may submit the current buffer and take another
  current_->len += text_.span(t, e);
  return primary_.span(out, e);
}

size_t TeeSink::drops(char* out, const DropsEvent& e) noexcept {
  char* t = text_room();  // may submit the current buffer and take another
  current_->len += text_.drops(t, e);
  return primary_.drops(out, e);
}

size_t TeeSink::unfinished(char* out, const UnfinishedEvent& e) noexcept {
  char* t = text_room();  // may submit the current buffer and take another
  current_->len += text_.unfinished(t, e);
  return primary_.unfinished(out, e);
}

size_t TeeSink::undescribed(char* out, const UndescribedEvent& e) noexcept {
  char* t = text_room();  // may submit the current buffer and take another
  current_->len += text_.undescribed(t, e);
  return primary_.undescribed(out, e);
}

bool TeeSink::finish() noexcept {
  submit_text();
  // A sync marker comes back after every earlier buffer, once the file is fsynced.
  Buffer marker;
  marker.sync = true;
  writer_.submit(&marker);
  for (;;) {
    Buffer* b = writer_.take_done(100000);
    if (b == nullptr) continue;
    if (b == &marker) break;
    recycle(b);
  }
  return !writer_.had_error();
}

}  // namespace spanring
