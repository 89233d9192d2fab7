// signal_emitter: spans emitted from signal handlers at a high rate, interrupting spans on the
// same thread, including a thread whose first span of all is emitted in a handler
// (test_mp_fault_signals.cpp).
//
//   signal_emitter --out FILE.jsonl [--spans N]
//
// One handler serves SIGPROF and SIGALRM (SA_RESTART, nothing masked, so one can interrupt the
// other): it emits one spanring::Span (`sig.prof.span` / `sig.alrm.span`) and one
// spanring_emit record (`sig.prof.c` / `sig.alrm.c`), counting each attempt in lock-free
// per-thread counters before making it.
// Signal sources:
//   setitimer(ITIMER_PROF, 100 us): process-wide SIGPROF, delivered to whichever thread runs;
//   a 100 us CLOCK_MONOTONIC timer sending SIGPROF to `handler_only` (SIGEV_THREAD_ID);
//   130 us and 170 us timers sending SIGALRM to `both` and to `main`.
// Threads:
//   main          N spans, alternately spanring::Span `sig.main.span` (attr `k=<n>`) and
//                 spanring_emit `sig.main.c`, about 3 us apart (busy wait);
//   both          the same, concurrently;
//   handler_only  never emits outside the handler: its first record, and so its ring claim,
//                 happens inside a handler. It spins until main is done (main also waits until
//                 this thread's handler has run at least 50 times).
// At the end every timer is disarmed and each thread blocks both signals before its counters
// are read. JSON line: {"pid", "threads": [{"role", "tid", "counts": {name: attempts}}],
// "handler_calls": total}.
#include "emitter_util.h"

#include <CLI/CLI.hpp>

#include <spanring/span.h>
#include <spanring/spanring.h>

#include <signal.h>
#include <sys/time.h>
#include <time.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

using fault_emitter::append_json_line;
using fault_emitter::fail;
using fault_emitter::gettid_now;
using nlohmann::json;

namespace {

struct Slot {
  std::atomic<uint64_t> main_span{0};
  std::atomic<uint64_t> main_c{0};
  std::atomic<uint64_t> prof_span{0};
  std::atomic<uint64_t> prof_c{0};
  std::atomic<uint64_t> alrm_span{0};
  std::atomic<uint64_t> alrm_c{0};
  std::atomic<uint64_t> handler_calls{0};
  pid_t tid = 0;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

enum { kMain = 0, kBoth = 1, kHandlerOnly = 2, kThreads = 3 };
constexpr const char* kRoles[kThreads] = {"main", "both", "handler_only"};
Slot g_slots[kThreads];
// The calling thread's slot; set first thing in each thread. Executable TLS is static TLS: a
// handler may read it.
thread_local Slot* t_slot = nullptr;
std::atomic<bool> g_stop{false};

void on_signal(int sig) {
  const int saved_errno = errno;
  Slot* s = t_slot;
  if (s != nullptr) {
    s->handler_calls.fetch_add(1, std::memory_order_relaxed);
    const bool prof = sig == SIGPROF;
    (prof ? s->prof_span : s->alrm_span).fetch_add(1, std::memory_order_relaxed);
    {
      spanring::Span span{prof ? "sig.prof.span" : "sig.alrm.span"};
      span.attr("h", 1);
    }
    (prof ? s->prof_c : s->alrm_c).fetch_add(1, std::memory_order_relaxed);
    spanring_span r{};
    r.timestamp_ns = spanring_now_ns();
    r.duration_ns = 1;
    r.name = prof ? "sig.prof.c" : "sig.alrm.c";
    r.attributes = "h=1";
    spanring_emit(&r);
  }
  errno = saved_errno;
}

void block_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPROF);
  sigaddset(&set, SIGALRM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

timer_t thread_timer(pid_t tid, int sig, long interval_ns) {
  struct sigevent sev {};
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = sig;
#ifdef sigev_notify_thread_id
  sev.sigev_notify_thread_id = tid;
#else
  sev._sigev_un._tid = tid;
#endif
  timer_t t{};
  if (::timer_create(CLOCK_MONOTONIC, &sev, &t) != 0) fail("timer_create: %s", std::strerror(errno));
  const itimerspec its{{0, interval_ns}, {0, interval_ns}};
  if (::timer_settime(t, 0, &its, nullptr) != 0) fail("timer_settime: %s", std::strerror(errno));
  return t;
}

void spin_ns(int64_t ns) {
  const int64_t until = spanring::now_ns() + ns;
  while (spanring::now_ns() < until) {
  }
}

void emit_normal(Slot& s, uint64_t n) {
  for (uint64_t k = 0; k < n; ++k) {
    if (k % 2 == 0) {
      s.main_span.fetch_add(1, std::memory_order_relaxed);
      spanring::Span span{"sig.main.span"};
      span.attr("k", k);
    } else {
      s.main_c.fetch_add(1, std::memory_order_relaxed);
      spanring_span r{};
      r.timestamp_ns = spanring_now_ns();
      r.duration_ns = 2;
      r.name = "sig.main.c";
      r.attributes = "k=c";
      spanring_emit(&r);
    }
    spin_ns(3000);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  uint64_t n = 200000;
  CLI::App app{"signal_emitter: spans from signal handlers"};
  app.add_option("--out", out, "JSON lines file")->required();
  app.add_option("--spans", n, "spans of the main thread")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  t_slot = &g_slots[kMain];
  g_slots[kMain].tid = gettid_now();

  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (::sigaction(SIGPROF, &sa, nullptr) != 0 || ::sigaction(SIGALRM, &sa, nullptr) != 0) {
    fail("sigaction: %s", std::strerror(errno));
  }

  std::atomic<pid_t> handler_only_tid{0};
  std::atomic<pid_t> both_tid{0};
  std::thread handler_only([&] {
    t_slot = &g_slots[kHandlerOnly];
    g_slots[kHandlerOnly].tid = gettid_now();
    handler_only_tid.store(g_slots[kHandlerOnly].tid);
    // No span here: every record of this thread comes from the handler.
    while (!g_stop.load(std::memory_order_acquire)) {
    }
    block_signals();
  });
  std::thread both([&] {
    t_slot = &g_slots[kBoth];
    g_slots[kBoth].tid = gettid_now();
    both_tid.store(g_slots[kBoth].tid);
    emit_normal(g_slots[kBoth], n / 2);
    while (!g_stop.load(std::memory_order_acquire)) {
    }
    block_signals();
  });
  while (handler_only_tid.load() == 0 || both_tid.load() == 0) {
  }

  const timer_t t_handler_only = thread_timer(handler_only_tid.load(), SIGPROF, 100000);
  const timer_t t_both = thread_timer(both_tid.load(), SIGALRM, 130000);
  const timer_t t_main = thread_timer(g_slots[kMain].tid, SIGALRM, 170000);
  const itimerval prof{{0, 100}, {0, 100}};
  if (::setitimer(ITIMER_PROF, &prof, nullptr) != 0) fail("setitimer: %s", std::strerror(errno));

  emit_normal(g_slots[kMain], n);
  // handler_only's timer fires every 100 us; 50 calls take ~5 ms (10 s is a hang guard).
  const int64_t deadline = spanring::now_ns() + 10'000'000'000;
  while (g_slots[kHandlerOnly].handler_calls.load(std::memory_order_relaxed) < 50 &&
         spanring::now_ns() < deadline) {
  }

  const itimerval off{};
  ::setitimer(ITIMER_PROF, &off, nullptr);
  ::timer_delete(t_handler_only);
  ::timer_delete(t_both);
  ::timer_delete(t_main);
  block_signals();
  g_stop.store(true, std::memory_order_release);
  handler_only.join();
  both.join();

  json threads = json::array();
  uint64_t calls = 0;
  for (int i = 0; i < kThreads; ++i) {
    const Slot& s = g_slots[i];
    json counts = {{"sig.prof.span", s.prof_span.load()}, {"sig.prof.c", s.prof_c.load()},
                   {"sig.alrm.span", s.alrm_span.load()}, {"sig.alrm.c", s.alrm_c.load()},
                   {"sig.main.span", s.main_span.load()}, {"sig.main.c", s.main_c.load()}};
    threads.push_back({{"role", kRoles[i]}, {"tid", s.tid}, {"counts", counts},
                       {"handler_calls", s.handler_calls.load()}});
    calls += s.handler_calls.load();
  }
  append_json_line(out, json{{"pid", ::getpid()}, {"threads", threads}, {"handler_calls", calls}});
  return 0;
}
