#include "drain/tee_sink.h"

namespace spanring {

TeeSink::TeeSink(Sink& primary, UringWriter& text_writer)
    : primary_(primary),
      out_(text_writer, kTextBufferBytes, kTextBuffers, {}, /*allocate_now=*/true) {}

TeeSink::~TeeSink() = default;

char* TeeSink::text_room() noexcept {
  if (current_ != nullptr && current_->capacity - current_->len < kMaxLineBytes) submit_text();
  if (current_ == nullptr) {
    out_.collect(0);
    current_ = out_.take();  // waits for the text file when every buffer is in flight
  }
  return current_->data.get() + current_->len;
}

void TeeSink::submit_text() noexcept {
  if (current_ == nullptr || current_->len == 0) return;
  out_.submit(current_);
  current_ = nullptr;
}

void TeeSink::end_buffer(char* buffer, size_t len) noexcept {
  primary_.end_buffer(buffer, len);
  // The text follows the primary file buffer by buffer, so neither lags the other much.
  submit_text();
}

// Each event: its text line first (put_text), then the primary's bytes.
size_t TeeSink::process(char* out, const ProcessEvent& e) noexcept {
  put_text([&](char* t) { return text_.process(t, e); });
  return primary_.process(out, e);
}

size_t TeeSink::thread(char* out, const ThreadEvent& e) noexcept {
  put_text([&](char* t) { return text_.thread(t, e); });
  return primary_.thread(out, e);
}

size_t TeeSink::span(char* out, const SpanEvent& e) noexcept {
  put_text([&](char* t) { return text_.span(t, e); });
  return primary_.span(out, e);
}

size_t TeeSink::drops(char* out, const DropsEvent& e) noexcept {
  put_text([&](char* t) { return text_.drops(t, e); });
  return primary_.drops(out, e);
}

size_t TeeSink::unfinished(char* out, const UnfinishedEvent& e) noexcept {
  put_text([&](char* t) { return text_.unfinished(t, e); });
  return primary_.unfinished(out, e);
}

size_t TeeSink::undescribed(char* out, const UndescribedEvent& e) noexcept {
  put_text([&](char* t) { return text_.undescribed(t, e); });
  return primary_.undescribed(out, e);
}

void TeeSink::run_record(const SpanEvent& e) noexcept {
  put_text([&](char* t) { return text_.span(t, e); });
}

void TeeSink::run_record_drop(const DropsEvent& e) noexcept {
  put_text([&](char* t) { return text_.drops(t, e); });
}

bool TeeSink::finish() noexcept {
  submit_text();
  // Comes back once every earlier buffer is written and the file is fsynced.
  return out_.sync();
}

}  // namespace spanring
