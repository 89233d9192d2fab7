// no_syscall_emitter: proves that after a thread's first record, emitting makes no syscall
// (span.h and spanring.h promise it), by forbidding every syscall and counting attempts.
//
//   no_syscall_emitter [--count N] [--report FILE] [--call-getpid]
//
// 1. Checks that tracing is on (exit 3 if not: the proof would be vacuous), installs a SIGSYS
//    handler that counts, maps FILE (if given) to report into, and emits ONE span: the thread's
//    first record, which claims its ring (and may make syscalls; that is allowed).
// 2. Installs a seccomp filter (PR_SET_NO_NEW_PRIVS + SECCOMP_SET_MODE_FILTER) that returns
//    SECCOMP_RET_TRAP for every syscall except rt_sigreturn (the handler's return), exit and
//    exit_group. A trapped syscall is not executed; the handler counts it.
// 3. Probes the clock: if libc's clock_gettime(CLOCK_MONOTONIC) traps, this machine's clock
//    source has no vDSO path, no tracer could avoid the syscall, and the program exits 77
//    (the test is then skipped, as a test the machine cannot run).
// 4. With --call-getpid: syscall(SYS_getpid) once (the negative control: must be counted).
// 5. Emits N spans (default 100,000), alternating the RAII Span with 4 integer attributes (every
//    other one through SPANRING_SPAN, whose call site is first used here) and the C ABI's
//    spanring_emit (every other one named the same through SPANRING_EMIT, whose call site is
//    first used here), then exit_group(trapped == 0 ? 0 : 1) directly.
// Between 2 and the exit nothing else runs: no stdio, no allocation, no locks. The report
// page (MAP_SHARED) is plain memory, so writing it is no syscall; it tells the test how many
// syscalls were trapped and the number of the first one.
#include <spanring/span.h>
#include <spanring/spanring.h>

#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__x86_64__)
#define SPANRING_TEST_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SPANRING_TEST_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

namespace {

// Shared with the test through the report file; field order is the file format.
struct Report {
  volatile uint64_t trapped;  // syscalls trapped after the filter
  volatile int64_t first_nr;  // number of the first trapped syscall, -1 = none
  volatile uint64_t phase;    // 1 filter installed, 2 clock probed, 3 all spans emitted
  volatile uint64_t emitted;  // spans emitted, the first one included
};
Report g_local_report{0, -1, 0, 0};
Report* g_report = &g_local_report;

constexpr int kExitSkip = 77;

void on_sigsys(int, siginfo_t* info, void*) {
  if (g_report->trapped == 0) g_report->first_nr = info->si_syscall;
  g_report->trapped = g_report->trapped + 1;
}

// Decimal without the C library (nothing here may risk a syscall or a lock).
char* put_u64(char* p, uint64_t v) {
  char tmp[20];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0) *p++ = tmp[--n];
  return p;
}

[[noreturn]] void exit_group_now(int status) {
  ::syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

int install_filter() {
#ifndef SPANRING_TEST_AUDIT_ARCH
  std::fprintf(stderr, "no_syscall_emitter: no seccomp arch constant for this CPU\n");
  return -1;
#else
  struct sock_filter filter[] = {
      // A foreign syscall ABI (e.g. a 32-bit int 0x80 on x86-64) numbers calls differently.
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SPANRING_TEST_AUDIT_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_rt_sigreturn, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_exit_group, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    std::fprintf(stderr, "no_syscall_emitter: PR_SET_NO_NEW_PRIVS: %s\n", std::strerror(errno));
    return -1;
  }
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
    // Written before anything is filtered: the call failed, so nothing is.
    std::fprintf(stderr, "no_syscall_emitter: seccomp(SECCOMP_SET_MODE_FILTER): %s\n",
                 std::strerror(errno));
    return -1;
  }
  return 0;
#endif
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t count = 100000;
  std::string report_option;
  bool call_getpid = false;
  CLI::App app{"no_syscall_emitter: spans without a single syscall, under seccomp"};
  app.add_option("--count", count, "spans after the first record");
  app.add_option("--report", report_option, "file to map and report into");
  app.add_flag("--call-getpid", call_getpid, "one getpid after the filter (the control)");
  CLI11_PARSE(app, argc, argv);
  const char* report_path = report_option.empty() ? nullptr : report_option.c_str();
  if (spanring_enabled() == 0) {
    std::fprintf(stderr, "no_syscall_emitter: tracing is off (run it under `spanring run`)\n");
    return 3;
  }
  if (report_path != nullptr) {
    const int fd = ::open(report_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ::ftruncate(fd, sizeof(Report)) != 0) {
      std::fprintf(stderr, "no_syscall_emitter: %s: %s\n", report_path, std::strerror(errno));
      return 2;
    }
    void* p = ::mmap(nullptr, sizeof(Report), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "no_syscall_emitter: mmap %s: %s\n", report_path, std::strerror(errno));
      return 2;
    }
    ::close(fd);
    g_report = static_cast<Report*>(p);
    g_report->trapped = 0;
    g_report->first_nr = -1;
    g_report->phase = 0;
    g_report->emitted = 0;
  }

  struct sigaction sa {};
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  if (::sigaction(SIGSYS, &sa, nullptr) != 0) {
    std::fprintf(stderr, "no_syscall_emitter: sigaction: %s\n", std::strerror(errno));
    return 2;
  }

  // The thread's first record: claims its ring (syscalls allowed here).
  {
    spanring::Span first{"nosys.first"};
    first.attr("a", 1).attr("b", 2).attr("c", 3).attr("d", 4);
  }
  uint64_t emitted = 1;
  std::fflush(stderr);

  if (install_filter() != 0) return kExitSkip;
  // ---- From here on: no syscall except through the code under test (and exit_group). ----
  g_report->phase = 1;

  struct timespec probe {};
  ::clock_gettime(CLOCK_MONOTONIC, &probe);
  if (g_report->trapped != 0) exit_group_now(kExitSkip);  // no vDSO clock on this machine
  g_report->phase = 2;

  if (call_getpid) ::syscall(SYS_getpid);

  char attrs[32];
  for (uint64_t i = 0; i < count; ++i) {
    if (i % 4 == 0) {
      spanring::Span span{"nosys.span"};
      span.attr("a", i).attr("b", i * 2).attr("c", i * 3).attr("d", i ^ 0x55u);
    } else if (i % 4 == 2) {
      // The same span through SPANRING_SPAN: its site is first used (the name interned, the key
      // set stored) under the filter.
      SPANRING_SPAN(span, "nosys.span");
      span.attr("a", i).attr("b", i * 2).attr("c", i * 3).attr("d", i ^ 0x55u);
    } else if (i % 8 == 7) {
      // The C ABI's name through SPANRING_EMIT: its site is first used (both strings interned,
      // the site filled) under the filter.
      SPANRING_EMIT("nosys.c", spanring::now_ns(), 1, "site=1");
    } else if (spanring_enabled() != 0) {  // as C ABI callers do before building a record
      char* p = attrs;
      std::memcpy(p, "seq=", 4);
      p = put_u64(p + 4, i);
      *p = '\0';
      spanring_span s{};
      s.invocation_id = i;
      s.callable_hash = 0xabcu;
      s.depth = 0;
      s.timestamp_ns = spanring_now_ns();
      s.duration_ns = 1;
      s.name = "nosys.c";
      s.attributes = attrs;
      spanring_emit(&s);
    }
    ++emitted;
  }
  g_report->emitted = emitted;
  g_report->phase = 3;
  exit_group_now(g_report->trapped == 0 ? 0 : 1);
}
