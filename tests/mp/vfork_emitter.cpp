// vfork_emitter: a traced program for test_mp_fork.cpp's vfork case. The parent emits
// `vfork.parent.before`, calls vfork() (libspanring's wrapper: src/vfork_x86_64.S,
// src/vfork_aarch64.S); the child, on the parent's memory and thread state, emits K
// `vfork.child` spans and _exits without exec; the parent then emits `vfork.parent.after`.
// The child's spans must be dropped (reason `vfork`), never written into the parent's ring.
//
//   vfork_emitter --out FILE.json [--child-spans K]
// Writes {"parent_pid": P, "parent_tid": T, "child_spans": K, "child_status": S}; exits 0 when
// the child exited 0 and the file was written.
#include <spanring/span.h>

#include <CLI/CLI.hpp>

#include <string>

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  std::string out;
  int child_spans = 5;
  CLI::App app{"vfork_emitter: spans around a vfork whose child emits without exec"};
  app.add_option("--out", out, "JSON file")->required();
  app.add_option("--child-spans", child_spans, "spans the vfork child emits")
      ->check(CLI::Range(0, 1000000));
  CLI11_PARSE(app, argc, argv);
  { spanring::Span s("vfork.parent.before"); }
  const pid_t child = vfork();
  if (child == 0) {
    // On the parent's memory: only what vfork children may do, plus the spans under test.
    for (int i = 0; i < child_spans; ++i) spanring::Span s("vfork.child");
    _exit(0);
  }
  if (child < 0) return 1;
  int status = 0;
  if (waitpid(child, &status, 0) != child) return 1;
  { spanring::Span s("vfork.parent.after"); }
  FILE* f = std::fopen(out.c_str(), "w");
  if (f == nullptr) return 1;
  std::fprintf(f, "{\"parent_pid\":%d,\"parent_tid\":%ld,\"child_spans\":%d,\"child_status\":%d}\n",
               static_cast<int>(getpid()), static_cast<long>(syscall(SYS_gettid)), child_spans,
               status);
  return std::fclose(f) == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
