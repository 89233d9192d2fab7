// Shared helpers of the benchmark programs (bench_record, bench_drain, bench_l3): CPU pinning,
// the TSC clock and its calibration against CLOCK_MONOTONIC, percentiles, the machine's name,
// and starting a real `spanring drain` process on its own CPU.
//
// Benchmark code only: nothing here is on spanring's hot path, and nothing in src/ uses it.
#pragma once

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace bench {

// ---- CPUs

inline int online_cpus() noexcept {
  const long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

// Pins the calling thread to `cpu` (wrapped modulo the online CPUs, so a 1-CPU machine still
// runs, with both sides on CPU 0). Returns the CPU used, or -1 when the kernel refused.
inline int pin_this_thread(int cpu) noexcept {
  cpu %= online_cpus();
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0 ? cpu : -1;
}

// "AMD EPYC" etc.: the first `model name` of /proc/cpuinfo.
inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string m = line.substr(colon + 1);
        m.erase(0, m.find_first_not_of(" \t"));
        return m;
      }
    }
  }
  return "unknown CPU";
}

inline std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

inline std::string now_utc() {
  char buf[64];
  const time_t t = ::time(nullptr);
  struct tm tm {};
  gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// ---- clocks

inline int64_t mono_ns() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Batch timing: lfence keeps the timed instructions from moving across the read (rdtsc is not
// ordered by itself); the cost of this pair is reported as the timer overhead.
inline uint64_t tsc_begin() noexcept {
  _mm_lfence();
  const uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
}
inline uint64_t tsc_end() noexcept {
  unsigned aux;
  const uint64_t t = __rdtscp(&aux);
  _mm_lfence();
  return t;
}

// TSC ticks -> ns, from two (TSC, CLOCK_MONOTONIC) pairs taken far apart in the same run. Each
// pair is read back to back; the pair with the shortest bracket of the three tries is kept.
struct TscPoint {
  uint64_t tsc;
  int64_t ns;
};
inline TscPoint tsc_point() noexcept {
  TscPoint best{0, 0};
  uint64_t best_gap = UINT64_MAX;
  for (int i = 0; i < 3; ++i) {
    const uint64_t a = tsc_begin();
    const int64_t ns = mono_ns();
    const uint64_t b = tsc_end();
    if (b - a < best_gap) {
      best_gap = b - a;
      best = {a + (b - a) / 2, ns};
    }
  }
  return best;
}
struct TscScale {
  double ns_per_tick = 0;
  double ghz() const noexcept { return ns_per_tick > 0 ? 1.0 / ns_per_tick : 0; }
};
inline TscScale tsc_scale(const TscPoint& a, const TscPoint& b) noexcept {
  return {static_cast<double>(b.ns - a.ns) / static_cast<double>(b.tsc - a.tsc)};
}

inline void sleep_us(int64_t us) noexcept {
  if (us <= 0) return;
  timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>((us % 1000000) * 1000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// ---- statistics

// Nearest-rank percentile of sorted values, p in [0, 100].
inline double percentile(const std::vector<double>& sorted, double p) noexcept {
  if (sorted.empty()) return NAN;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  if (rank == 0) rank = 1;
  return sorted[std::min(rank, sorted.size()) - 1];
}

inline double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// "12.3", "1,234" style: numbers in tables with precision that suits their size.
inline std::string fmt_ns(double v) {
  char buf[64];
  if (std::isnan(v)) return "-";
  if (v < 10) std::snprintf(buf, sizeof buf, "%.2f", v);
  else if (v < 1000) std::snprintf(buf, sizeof buf, "%.1f", v);
  else std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}
inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// ---- processes

// utime + stime of a process in clock ticks (fields 14 and 15 of /proc/PID/stat), -1 if gone.
inline long long proc_cpu_ticks(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!std::getline(in, s)) return -1;
  // The command name (field 2) may hold spaces: fields are counted after its closing paren.
  const auto paren = s.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream rest(s.substr(paren + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::atoll(field.c_str());
    if (i == 15) stime = std::atoll(field.c_str());
  }
  return utime + stime;
}

// Sum of the on-CPU ns of every thread of a process (/proc/PID/task/*/schedstat, first field):
// ns resolution where /proc/PID/stat counts 10 ms ticks.
inline long long proc_cpu_ns(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  long long total = 0;
  bool any = false;
  if (auto* d = ::opendir(dir.c_str())) {
    while (auto* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      std::ifstream in(dir + "/" + e->d_name + "/schedstat");
      long long ns = 0;
      if (in >> ns) {
        total += ns;
        any = true;
      }
    }
    ::closedir(d);
  }
  return any ? total : -1;
}

// A `spanring drain --segment NAME -o OUT` process pinned to one CPU (set in the child before
// exec, so every thread the drainer starts inherits it), its stderr kept in a file.
struct DrainerProcess {
  pid_t pid = -1;
  std::string stderr_path;
  rusage usage{};  // filled by stop()
  int status = 0;

  // `format`: empty (the drainer's default, [STRACE] text) or a value for its --format.
  bool start(const std::string& exe, const std::string& segment, const std::string& out,
             int cpu, const std::string& err_path, const std::string& format = {}) {
    stderr_path = err_path;
    const pid_t p = ::fork();
    if (p < 0) return false;
    if (p == 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu % online_cpus(), &set);
      ::sched_setaffinity(0, sizeof set, &set);
      const int fd = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) ::dup2(fd, 2);
      if (format.empty())
        ::execl(exe.c_str(), exe.c_str(), "drain", "--segment", segment.c_str(), "-o",
                out.c_str(), static_cast<char*>(nullptr));
      else
        ::execl(exe.c_str(), exe.c_str(), "drain", "--segment", segment.c_str(), "-o",
                out.c_str(), "--format", format.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    pid = p;
    return true;
  }

  // SIGTERM (the drainer then drains what is published, flushes, fsyncs and exits 0); waits.
  bool stop() {
    if (pid <= 0) return false;
    ::kill(pid, SIGTERM);
    pid_t r;
    do {
      r = ::wait4(pid, &status, 0, &usage);
    } while (r < 0 && errno == EINTR);
    pid = -1;
    return r > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }

  std::string stderr_text() const {
    std::ifstream in(stderr_path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // A `key=N` field of the drainer's summary line ("spanring: summary: written=... dropped=...").
  long long summary_field(const std::string& key) const {
    const std::string text = stderr_text();
    const auto at = text.rfind("summary:");
    if (at == std::string::npos) return -1;
    const auto k = text.find(" " + key + "=", at);
    if (k == std::string::npos) return -1;
    return std::atoll(text.c_str() + k + key.size() + 2);
  }
};

inline double rusage_cpu_s(const rusage& u) {
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// A fresh temporary directory (mkdtemp under $TMPDIR or /tmp).
inline std::string make_temp_dir(const char* tag) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + tag + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) return {};
  return buf.data();
}

}  // namespace bench
