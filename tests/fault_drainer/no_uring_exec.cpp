// no_uring_exec: runs a program on a kernel where io_uring is "not there": installs a seccomp
// filter under which io_uring_setup fails with ENOSYS (every other syscall is allowed), then
// execs the program. The filter is inherited by everything the program starts.
//
//   no_uring_exec PROGRAM [ARGS...]
//
// Exit 77 when the filter cannot be installed (no seccomp here: the test is skipped), 127 when
// the exec fails, CLI11's code on bad usage; otherwise the program's own status.
#include <CLI/CLI.hpp>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#if defined(__x86_64__)
#define NO_URING_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NO_URING_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

int main(int argc, char** argv) {
  std::string program;
  CLI::App app{"no_uring_exec: run PROGRAM with io_uring_setup failing with ENOSYS"};
  app.add_option("program", program, "the program to exec (a path)")->required();
  // Everything after PROGRAM is its own arguments, options included.
  app.prefix_command();
  CLI11_PARSE(app, argc, argv);
  std::vector<std::string> args = app.remaining();
  args.insert(args.begin(), program);
  std::vector<char*> exec_argv;
  for (std::string& a : args) exec_argv.push_back(a.data());
  exec_argv.push_back(nullptr);
#if !defined(NO_URING_AUDIT_ARCH) || !defined(__NR_io_uring_setup)
  std::fprintf(stderr, "no_uring_exec: no seccomp arch constant or io_uring_setup number here\n");
  return 77;
#else
  struct sock_filter filter[] = {
      // Another syscall ABI numbers calls differently: allow it untouched (spanring is native).
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NO_URING_AUDIT_ARCH, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
    std::fprintf(stderr, "no_uring_exec: cannot install the seccomp filter: %s\n",
                 std::strerror(errno));
    return 77;
  }
  ::execv(program.c_str(), exec_argv.data());
  std::fprintf(stderr, "no_uring_exec: exec %s: %s\n", program.c_str(), std::strerror(errno));
  return 127;
#endif
}
