#include "drain/diagnostics.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <string>

namespace spanring {
namespace {

// acquire/release: a reporting thread sees the sink fully constructed; scopes change it only
// while no other thread reports, so a plain pointer swap suffices.
std::atomic<DiagnosticSink*> g_sink{nullptr};

}  // namespace

void report(const char* format, ...) noexcept {
  char buf[4096];
  va_list args;
  va_start(args, format);
  const int n = std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  if (n < 0) return;
  std::string longer;  // a message that does not fit the stack buffer (a very long path)
  std::string_view line(buf, static_cast<size_t>(n));
  if (static_cast<size_t>(n) >= sizeof buf) {
    try {
      longer.resize(static_cast<size_t>(n) + 1);
      va_start(args, format);
      std::vsnprintf(longer.data(), longer.size(), format, args);
      va_end(args);
      longer.pop_back();
      line = longer;
    } catch (...) {
      line = std::string_view(buf, sizeof buf - 1);  // no memory: the message cut
    }
  }
  if (DiagnosticSink* sink = g_sink.load(std::memory_order_acquire)) {
    sink->write(line);
    return;
  }
  std::fwrite(line.data(), 1, line.size(), stderr);
}

DiagnosticsScope::DiagnosticsScope(DiagnosticSink& sink) noexcept
    : previous_(g_sink.exchange(&sink, std::memory_order_acq_rel)) {}

DiagnosticsScope::~DiagnosticsScope() { g_sink.store(previous_, std::memory_order_release); }

}  // namespace spanring
