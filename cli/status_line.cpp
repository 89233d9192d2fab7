// The live status line (cli/status_line.h).
#include "cli/status_line.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace spanring {

bool StatusLine::wanted(bool allowed) noexcept {
  if (!allowed || ::isatty(STDERR_FILENO) != 1) return false;
  const char* off = std::getenv("SPANRING_NO_STATUS");
  return off == nullptr || off[0] == '\0' || std::strcmp(off, "0") == 0;
}

StatusLine::StatusLine(bool enabled) noexcept
    : enabled_(enabled), last_(std::chrono::steady_clock::now()) {}

std::string StatusLine::text(uint64_t written, uint64_t dropped, double records_per_s) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "spanring: %llu records written, %.0f records/s, %llu dropped",
                static_cast<unsigned long long>(written), records_per_s,
                static_cast<unsigned long long>(dropped));
  return buf;
}

void StatusLine::update(uint64_t written, uint64_t dropped) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < kInterval) return;
  const double seconds = std::chrono::duration<double>(now - last_).count();
  const double rate = static_cast<double>(written - last_written_) / seconds;
  last_ = now;
  last_written_ = written;
  // \r and "erase to end of line" (ECMA-48 EL, which every terminal emulator in use knows):
  // the line is redrawn in place, and a shorter one leaves nothing of the longer one behind.
  const std::string line = "\r\033[K" + text(written, dropped, rate);
  (void)!::write(STDERR_FILENO, line.data(), line.size());
  shown_ = true;
}

void StatusLine::erase() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  erase_locked();
}

void StatusLine::write(std::string_view line) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  erase_locked();
  std::fwrite(line.data(), 1, line.size(), stderr);
}

void StatusLine::erase_locked() noexcept {
  if (!shown_) return;
  shown_ = false;
  static constexpr char kErase[] = "\r\033[K";
  (void)!::write(STDERR_FILENO, kErase, sizeof kErase - 1);
}

}  // namespace spanring
