// The stand-in runtime (standin_runtime.h). Its spans go through the seam only: this file never
// names spanring. Built twice: linked with libspanring-simpler (the link-time way), and with
// STANDIN_OWN_LOGGER, carrying its own logger adapter (default visibility, so LD_PRELOAD of
// libspanring-simpler interposes it: the run-time way).
#include "adapter/tests/standin_runtime.h"

#include <spanring/simpler_host_span.h>

#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#ifdef STANDIN_OWN_LOGGER
// The runtime's own logger adapter, reduced to a marker line per span on stderr (the test
// checks that none is written when the adapter is preloaded). Default visibility: exported.
extern "C" __attribute__((visibility("default"))) int unified_log_host_span_enabled(void) {
  return 1;
}
extern "C" __attribute__((visibility("default"))) void unified_log_host_span(
    const SimplerHostSpan* span) {
  std::fprintf(stderr, "standin-logger: %s\n", span != nullptr && span->name ? span->name : "?");
}
#endif

namespace {

int64_t mono_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

std::string hex(const char* s) {
  static const char kDigits[] = "0123456789abcdef";
  std::string h;
  for (; s != nullptr && *s != '\0'; ++s) {
    const auto b = static_cast<unsigned char>(*s);
    h += kDigits[b >> 4];
    h += kDigits[b & 15];
  }
  return h;
}

// What one process handed to the seam, as JSON lines, written when the process is done.
struct Log {
  std::mutex mu;
  std::string lines;
  bool enabled = false;
  void add(const SimplerHostSpan& s) {
    const long tid = syscall(SYS_gettid);
    char head[320];
    std::snprintf(head, sizeof head,
                  "{\"pid\":%d,\"tid\":%ld,\"inv\":%llu,\"hid\":%llu,\"depth\":%d,\"ts\":%lld,"
                  "\"dur\":%lld,\"name\":\"",
                  static_cast<int>(getpid()), tid,
                  static_cast<unsigned long long>(s.invocation_id),
                  static_cast<unsigned long long>(s.callable_hash), s.depth,
                  static_cast<long long>(s.timestamp_ns), static_cast<long long>(s.duration_ns));
    std::string line = head + hex(s.name) + "\",\"attrs\":\"" + hex(s.attributes) + "\"}\n";
    std::lock_guard lock(mu);
    lines += line;
  }
};
Log g_log;

// The runtime's way: check the gate before building the span, then pass it by pointer.
void emit(uint64_t inv, uint64_t hid, int32_t depth, int64_t ts, int64_t dur, const char* name,
          const char* attrs) {
  if (!unified_log_host_span_enabled()) return;
  const SimplerHostSpan s{SIMPLER_HOST_SPAN_ABI_VERSION, sizeof(SimplerHostSpan), inv, hid, depth,
                          0, ts, dur, name, attrs};
  unified_log_host_span(&s);
  g_log.add(s);
}

// One invocation of a chip child's run and a few spans needing encoding, `spans` in all.
void worker(int index, int spans) {
  char attrs[96];
  for (int i = 0; i < spans; ++i) {
    const int64_t start = mono_ns();
    const uint64_t inv = static_cast<uint64_t>(index) * 1000 + static_cast<uint64_t>(i) + 1;
    const uint64_t hid = 0x9f3c2a1b5d7e6f01ULL ^ static_cast<uint64_t>(index);
    switch (i % 5) {
      case 0:
        std::snprintf(attrs, sizeof attrs, "run_id=%d slot_id=%d", index, i);
        emit(inv, hid, 0, start, mono_ns() - start + 1000, "chip.run", attrs);
        break;
      case 1:
        std::snprintf(attrs, sizeof attrs, "ntensor=%d", i);
        emit(inv, hid, 2, start, 120000, "chip.run.bind.args", attrs);
        break;
      case 2:  // device clock: a small offset, passed through unchanged
        emit(inv, hid, 3, 20000 + i, 300000, "chip.run.runner_run.device_wall.orch", "clk=dev");
        break;
      case 3:
        emit(0, 0, 0, start, 50000, "ext.standin.odd name=x", "why=[demo] tab=\t%");
        break;
      default:
        emit(inv, 0, 1, start, 7, "chip.run.runner_run", "");
        break;
    }
  }
}

// The scheduler: several spans per task, back to back, from one thread.
void scheduler(int burst) {
  char attrs[128];
  for (int task = 0; task < burst; ++task) {
    const int64_t t0 = mono_ns();
    std::snprintf(attrs, sizeof attrs,
                  "run_id=1 task_slot=%d worker_id=%d dispatch_id=%d role=scheduler", task % 64,
                  task % 4, task);
    emit(0, 0, 0, t0, 900, "node.dispatch", attrs);
  }
}

// The spans the seam must refuse, and one from a newer caller. Returns how many it refused.
int refused_and_newer() {
  if (!unified_log_host_span_enabled()) return 0;
  int invalid = 0;
  unified_log_host_span(nullptr);
  ++invalid;
  SimplerHostSpan s{2, sizeof(SimplerHostSpan), 1, 1, 0, 0, mono_ns(), 1, "ext.standin.v2", ""};
  unified_log_host_span(&s);  // abi_version 2: another layout
  ++invalid;
  s.abi_version = SIMPLER_HOST_SPAN_ABI_VERSION;
  s.name = nullptr;
  unified_log_host_span(&s);  // NULL name
  ++invalid;
  // An old, short caller: 8 bytes (abi_version, struct_size) ending where a PROT_NONE page
  // starts. Reading any field after struct_size faults.
  const long page = sysconf(_SC_PAGESIZE);
  void* map = mmap(nullptr, static_cast<size_t>(2 * page), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map == MAP_FAILED || mprotect(static_cast<char*>(map) + page, static_cast<size_t>(page),
                                    PROT_NONE) != 0)
    return -1;
  auto* short_span = static_cast<uint32_t*>(static_cast<void*>(static_cast<char*>(map) + page - 8));
  short_span[0] = SIMPLER_HOST_SPAN_ABI_VERSION;
  short_span[1] = 8;
  unified_log_host_span(static_cast<const SimplerHostSpan*>(static_cast<void*>(short_span)));
  ++invalid;
  munmap(map, static_cast<size_t>(2 * page));
  // A newer caller: the v1 fields, then one more, struct_size 72. Accepted; the extra ignored.
  struct Newer {
    SimplerHostSpan v1;
    uint64_t extra;
  } newer{{SIMPLER_HOST_SPAN_ABI_VERSION, sizeof(Newer), 77, 0xabcdef, 1, 0, mono_ns(), 4242,
           "ext.standin.newer", "extra=ignored"},
          0xffffffffffffffffULL};
  static_assert(sizeof(Newer) == 72);
  unified_log_host_span(&newer.v1);
  g_log.add(newer.v1);
  return invalid;
}

bool write_out(const char* path, int invalid, int spans) {
  char summary[160];
  std::snprintf(summary, sizeof summary,
                "{\"summary\":1,\"pid\":%d,\"enabled\":%d,\"invalid\":%d,\"spans\":%d}\n",
                static_cast<int>(getpid()), unified_log_host_span_enabled(), invalid, spans);
  std::string all = g_log.lines + summary;
  FILE* f = std::fopen(path, "a");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(all.data(), 1, all.size(), f) == all.size();
  return std::fclose(f) == 0 && ok;
}

int count_lines(const std::string& s) {
  int n = 0;
  for (const char c : s) n += c == '\n';
  return n;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int standin_run(const char* out_jsonl,
                                                                  int threads, int spans,
                                                                  int burst, int fork_child) {
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(worker, i, spans);
  pool.emplace_back(scheduler, burst);
  for (auto& t : pool) t.join();
  const int invalid = refused_and_newer();
  if (invalid < 0) return 1;
  int status = 0;
  if (fork_child != 0) {
    // The child writes only its own spans, not the parent's it would inherit.
    std::string parent_lines = std::move(g_log.lines);
    g_log.lines.clear();
    const pid_t child = fork();
    if (child < 0) return 1;
    if (child == 0) {
      std::thread t(worker, threads, spans);
      t.join();
      _exit(write_out(out_jsonl, 0, count_lines(g_log.lines)) ? 0 : 1);
    }
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
      return 1;
    g_log.lines = std::move(parent_lines);
  }
  return write_out(out_jsonl, invalid, count_lines(g_log.lines)) ? 0 : 1;
}
