// clock_emitter: Spans bracketed by CLOCK_MONOTONIC reads, for tests/mp/test_mp_clock.cpp.
//
//   clock_emitter --out FILE.json [--spans N] [--gap-us G]
//
// For i in 0..N-1: before = spanring::now_ns(); a Span `clock.check` with attr i=<i> that
// busy-waits i % 7 us; after = now_ns(); then sleeps G us. The spans are spread over N * G us,
// so the drainer converts TSC times across many of its clock samples. Half of them run in a
// forked child (the child keeps its parent's clock anchor). JSON, one line per process:
// {"pid": P, "first": i0, "before": [...], "after": [...]}. Exit 0; CLI11's code on bad usage.
#include <spanring/span.h>

#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

void run(const char* out, uint64_t first, uint64_t count, uint64_t gap_us) {
  std::vector<int64_t> before(count), after(count);
  for (uint64_t k = 0; k < count; ++k) {
    const uint64_t i = first + k;
    before[k] = spanring::now_ns();
    {
      spanring::Span s{"clock.check"};
      s.attr("i", i);
      const int64_t until = spanring::now_ns() + int64_t(i % 7) * 1000;
      while (spanring::now_ns() < until) {
      }
    }
    after[k] = spanring::now_ns();
    const timespec gap{0, long(gap_us) * 1000};
    nanosleep(&gap, nullptr);
  }
  std::string line = "{\"pid\": " + std::to_string(::getpid()) + ", \"first\": " +
                     std::to_string(first) + ", \"before\": [";
  for (uint64_t k = 0; k < count; ++k) line += (k ? "," : "") + std::to_string(before[k]);
  line += "], \"after\": [";
  for (uint64_t k = 0; k < count; ++k) line += (k ? "," : "") + std::to_string(after[k]);
  line += "]}\n";
  // One write(2) of the whole line to an O_APPEND file: parent and child finish together, and
  // stdio would split a line this long (~5 KB) into several writes that interleave.
  const int fd = ::open(out, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    std::exit(1);
  ::close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  uint64_t spans = 200;
  uint64_t gap_us = 5000;
  CLI::App app{
      "clock_emitter: spans bracketed by CLOCK_MONOTONIC reads (tests/mp/test_mp_clock.cpp)"};
  app.add_option("--out", out, "JSON lines file, one line per process")->required();
  app.add_option("--spans", spans, "spans in all, half of them in a forked child");
  app.add_option("--gap-us", gap_us, "sleep between spans, us");
  CLI11_PARSE(app, argc, argv);
  const uint64_t half = spans / 2;
  const pid_t child = ::fork();
  if (child == 0) {
    run(out.c_str(), half, spans - half, gap_us);
    std::fflush(nullptr);
    ::_exit(0);
  }
  run(out.c_str(), 0, half, gap_us);
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    return 1;
  return 0;
}
