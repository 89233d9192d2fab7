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
// What span.h's inline record path reads: every thread points at one closed state here (a
// gate never open, read-only), so it always calls begin() and end(). As the library's own
// (src/attach.cpp), zero but for early_ns: kClosedEarlyNs fails emit's ts test, which keeps
// its compare-and-exchange (a write, even when it fails) off this read-only state.
constinit const ThreadState g_closed_state{.ring = {},
                                           .inv = 0,
                                           .hid = 0,
                                           .depth = 0,
                                           .reentrant_drops = {},
                                           .early_ns = kClosedEarlyNs,
                                           .key_memo = {},
                                           .no_ring_wait = 0,
                                           .stash_count = 0,
                                           .stash = {},
                                           .name_set = 0,
                                           .name = {},
                                           .next_state = nullptr,
                                           .in_use = {}};
__attribute__((tls_model("initial-exec"), visibility("protected"))) __thread ThreadState* t_self =
    const_cast<ThreadState*>(&g_closed_state);
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
// SPANRING_EMIT's, and a plain emit's with literal strings (its own call site, span.h).
bool emit_site_slow(EmitSite&, const char* name, uint32_t, const char* attrs, uint32_t,
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

namespace {

void text_append(detail::SpanData& d, std::string_view text) noexcept {
  const size_t room = kAttrsRawMax - d.attrs_len_;
  const size_t n = text.size() < room ? text.size() : room;
  std::memcpy(d.attrs_ + d.attrs_len_, text.data(), n);
  d.attrs_len_ = static_cast<uint16_t>(d.attrs_len_ + n);
}

void text_number(detail::SpanData& d, std::string_view key, bool negative,
                   uint64_t magnitude) noexcept {
  char buf[24];
  const int n = std::snprintf(buf, sizeof buf, negative ? "=-%llu" : "=%llu",
                              static_cast<unsigned long long>(magnitude));
  if (d.attrs_len_ != 0) text_append(d, " ");
  text_append(d, key);
  text_append(d, {buf, static_cast<size_t>(n)});
}

// The integers span.h kept inline (literal keys, 32-bit values) become text first, in order:
// span.h keeps them whatever begin() set, and hands the span here only when it ends or when an
// attribute cannot be kept inline.
void text_spill(detail::SpanData& d) noexcept {
  if (d.spilled_ != 0) return;
  d.spilled_ = 1;
  for (uint32_t i = 0; i < d.count_; ++i) {
    const bool negative = (d.negative_ >> i & 1) != 0;
    const uint64_t magnitude =
        negative ? uint64_t{0} - static_cast<uint64_t>(static_cast<int32_t>(d.values_[i]))
                 : uint64_t{d.values_[i]};
    text_number(d, d.keys_[i], negative, magnitude);
  }
}

}  // namespace

detail::SpanData Span::begin(const char* name, size_t, uint16_t, detail::ModuleStrings*,
                             detail::SpanSite*) noexcept {
  LoggerThread& t = t_state;
  detail::SpanData d;
  d.name_ = name != nullptr ? name : "";
  d.packed_ = false;  // every attr() comes here and is formatted as text, as today's runtimes do
  d.spilled_ = 0;
  d.count_ = 0;
  d.negative_ = 0;
  d.strings_ = nullptr;  // no module table: nothing more is kept inline
  d.site_ = nullptr;
  d.tsc_ = false;
  d.inline_ = 0;  // never ends inline (finish): end() writes the line
  d.depth_ = t.depth++;
  d.inv_ = t.inv;
  d.hid_ = t.hid;
  d.attrs_len_ = 0;
  d.start_ = clock_ns();
  return d;
}

void Span::end(detail::SpanData d) noexcept { end_at(d, clock_ns()); }

void Span::end_at(detail::SpanData d, int64_t end_ns) noexcept {
  t_state.depth -= 1;
  text_spill(d);
  write_line(d.name_, d.inv_, d.hid_, d.depth_, d.start_, end_ns - d.start_, d.attrs_,
             d.attrs_len_);
}

// The attr() overloads are inline in span.h: with packed_ false, a check, then one of these.
detail::SpanData Span::append_uint(detail::SpanData d, std::string_view key,
                                   uint64_t value) noexcept {
  text_spill(d);
  text_number(d, key, false, value);
  return d;
}

detail::SpanData Span::append_int(detail::SpanData d, std::string_view key,
                                  int64_t value) noexcept {
  text_spill(d);
  text_number(d, key, value < 0,
                value < 0 ? 0 - static_cast<uint64_t>(value) : static_cast<uint64_t>(value));
  return d;
}

detail::SpanData Span::add_number(detail::SpanData d, const char* key, size_t key_len,
                                  bool negative, uint64_t magnitude) noexcept {
  text_spill(d);
  text_number(d, {key, key_len}, negative, magnitude);
  return d;
}

detail::SpanData Span::append_text(detail::SpanData d, std::string_view key,
                                   std::string_view value) noexcept {
  text_spill(d);
  if (d.attrs_len_ != 0) text_append(d, " ");
  text_append(d, key);
  text_append(d, "=");
  text_append(d, value);
  return d;
}

}  // namespace spanring

extern "C" void spanring_emit(const spanring_span* span) {
  if (span == nullptr || !spanring::enabled()) return;
  spanring::emit_record(span->name, span->invocation_id, span->callable_hash, span->depth,
                        span->timestamp_ns, span->duration_ns, span->attributes);
}

extern "C" int spanring_enabled(void) { return spanring::enabled() ? 1 : 0; }

extern "C" int64_t spanring_now_ns(void) { return spanring::now_ns(); }
