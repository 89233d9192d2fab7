// libspanring_strace_write: spanring's producer API (include/spanring/span.h and spanring.h)
// implemented the way today's host runtimes trace, as bench_l3's baseline: every span, when it
// ends, is formatted as a [STRACE] line in the calling thread and written with one write(2)
// under a process-wide std::mutex (bench/strace_line.h).
//
// Linked into bench-l3-demo-write, a second build of examples/l3_demo.cpp, so the demo's code
// runs unchanged against either tracer. Tracing is on when BENCH_STRACE_FILE names the file to
// append to (opened O_APPEND at load; a forked child inherits the descriptor, as it would with a
// logger's file); unset, every call is the same relaxed load and branch as spanring's.
#include "strace_line.h"

#include <spanring/span.h>
#include <spanring/spanring.h>

#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

extern "C" {
__attribute__((tls_model("initial-exec"), visibility("protected"))) __thread uint32_t
    spanring_vfork_child = 0;
}

namespace spanring {

namespace detail {
std::atomic<void*> g_segment{nullptr};
std::atomic<uint32_t> g_attach_generation{0};
// No string table: no name or key has an id, so every span goes through begin() and the text
// attributes, as today's runtimes trace.
uint16_t string_id_slow(ModuleStrings&, const char*, uint32_t) noexcept { return 0; }
uint16_t site_name_slow(SpanSite&, const char*, uint32_t) noexcept { return 0; }
// What span.h's inline record path reads: no thread ever has a state here, so it always calls
// begin() and end().
__attribute__((tls_model("initial-exec"), visibility("protected"))) __thread ThreadState* t_self =
    nullptr;
void flush_reentrant(ThreadState&) noexcept {}
}  // namespace detail

namespace {

int g_fd = -1;
uint32_t g_pid = 0;
std::mutex g_mutex;  // the logger's lock: one line at a time into the file

struct LoggerThread {
  uint32_t tid = 0;  // 0 until the thread's first line
  uint64_t inv = 0;
  uint64_t hid = 0;
  uint32_t depth = 0;
};
thread_local LoggerThread t_state;

int64_t clock_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

void on_fork_child() noexcept {
  g_pid = static_cast<uint32_t>(::getpid());
  t_state.tid = 0;
}

__attribute__((constructor)) void open_from_environment() {
  const char* path = std::getenv("BENCH_STRACE_FILE");
  if (path == nullptr || path[0] == '\0') return;
  g_fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (g_fd < 0) {
    std::perror("libspanring_strace_write: open BENCH_STRACE_FILE");
    return;
  }
  g_pid = static_cast<uint32_t>(::getpid());
  pthread_atfork(nullptr, nullptr, on_fork_child);
  static int on = 1;
  detail::g_segment.store(&on, std::memory_order_release);
}

bool write_line(const char* name, uint64_t inv, uint64_t hid, int64_t depth, int64_t ts,
                int64_t dur, const char* attrs, size_t attrs_len) noexcept {
  // The spec's consumers drop these silently; the old path never wrote them either.
  if (name == nullptr || name[0] == '\0' || ts < 0 || dur < 0 || depth < 0) return false;
  LoggerThread& t = t_state;
  if (t.tid == 0) t.tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  char line[bench::kStraceLineMax];
  const size_t len = bench::format_strace_line(
      line, g_pid, t.tid, static_cast<unsigned long>(pthread_self()), inv, hid,
      static_cast<uint32_t>(depth), name, strnlen(name, kNameRawMax), static_cast<uint64_t>(ts),
      static_cast<uint64_t>(dur), attrs, attrs_len, static_cast<uint64_t>(clock_ns()));
  bench::locked_write(g_mutex, g_fd, line, len);
  return true;
}

}  // namespace

int64_t now_ns() noexcept { return clock_ns(); }

bool attach(const char*) noexcept { return false; }

bool emit_record(const char* name, uint64_t inv, uint64_t hid, int32_t depth, int64_t ts_ns,
                 int64_t dur_ns, const char* attrs) noexcept {
  if (!enabled()) return false;
  return write_line(name, inv, hid, depth, ts_ns, dur_ns, attrs,
                    attrs ? strnlen(attrs, kAttrsRawMax) : 0);
}

// emit() is inline in span.h: it checks enabled() and calls one of these.
namespace detail {
bool emit_text(const char* name, int64_t ts_ns, int64_t dur_ns, const char* attrs) noexcept {
  const LoggerThread& t = t_state;
  return write_line(name, t.inv, t.hid, t.depth, ts_ns, dur_ns, attrs,
                    attrs ? strnlen(attrs, kAttrsRawMax) : 0);
}
bool emit_literal(const char* name, uint32_t, uint16_t, const char* attrs, uint32_t, uint16_t,
                  int64_t ts_ns, int64_t dur_ns) noexcept {
  return emit_text(name, ts_ns, dur_ns, attrs);
}
}  // namespace detail

Invocation::Invocation(uint64_t inv, uint64_t hid) noexcept {
  LoggerThread& t = t_state;
  saved_inv_ = t.inv;
  saved_hid_ = t.hid;
  t.inv = inv;
  t.hid = hid;
}

Invocation::~Invocation() {
  LoggerThread& t = t_state;
  t.inv = saved_inv_;
  t.hid = saved_hid_;
}

void Span::begin(const char* name, size_t, uint16_t, detail::ModuleStrings*,
                 detail::SpanSite*) noexcept {
  LoggerThread& t = t_state;
  name_ = name != nullptr ? name : "";
  packed_ = false;  // every attr() comes here and is formatted as text, as today's runtimes do
  count_ = kSpilled;  // nothing is kept compact: a literal key's integer comes to add_number
  strings_ = nullptr;
  site_ = nullptr;
  tsc_ = false;
  inline_ = 0;  // never ends inline (finish): end() writes the line
  depth_ = t.depth++;
  inv_ = t.inv;
  hid_ = t.hid;
  attrs_len_ = 0;
  start_ = clock_ns();
}

void Span::end() noexcept { end_at(clock_ns()); }

void Span::end_at(int64_t end_ns) noexcept {
  t_state.depth -= 1;
  write_line(name_, inv_, hid_, depth_, start_, end_ns - start_, attrs_, attrs_len_);
}

void Span::append(std::string_view text) noexcept {
  const size_t room = kAttrsRawMax - attrs_len_;
  const size_t n = text.size() < room ? text.size() : room;
  std::memcpy(attrs_ + attrs_len_, text.data(), n);
  attrs_len_ = static_cast<uint16_t>(attrs_len_ + n);
}

// The attr() overloads are inline in span.h: with packed_ false, a check, then one of these.
void Span::append_uint(std::string_view key, uint64_t value) noexcept {
  char buf[24];
  const int n = std::snprintf(buf, sizeof buf, "=%llu", static_cast<unsigned long long>(value));
  if (attrs_len_ != 0) append(" ");
  append(key);
  append({buf, static_cast<size_t>(n)});
}

void Span::append_int(std::string_view key, int64_t value) noexcept {
  char buf[24];
  const int n = std::snprintf(buf, sizeof buf, "=%lld", static_cast<long long>(value));
  if (attrs_len_ != 0) append(" ");
  append(key);
  append({buf, static_cast<size_t>(n)});
}

void Span::add_number(const char* key, size_t key_len, bool negative,
                      uint64_t magnitude) noexcept {
  char buf[24];
  const int n = std::snprintf(buf, sizeof buf, negative ? "=-%llu" : "=%llu",
                              static_cast<unsigned long long>(magnitude));
  if (attrs_len_ != 0) append(" ");
  append({key, key_len});
  append({buf, static_cast<size_t>(n)});
}

void Span::append_text(std::string_view key, std::string_view value) noexcept {
  if (attrs_len_ != 0) append(" ");
  append(key);
  append("=");
  append(value);
}

}  // namespace spanring

extern "C" void spanring_emit(const spanring_span* span) {
  if (span == nullptr || !spanring::enabled()) return;
  spanring::emit_record(span->name, span->invocation_id, span->callable_hash, span->depth,
                        span->timestamp_ns, span->duration_ns, span->attributes);
}

extern "C" int spanring_enabled(void) { return spanring::enabled() ? 1 : 0; }

extern "C" int64_t spanring_now_ns(void) { return spanring::now_ns(); }
