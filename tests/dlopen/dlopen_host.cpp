// A host that never linked spanring and loads plugins that did (tests/dlopen/test_dlopen.cpp runs
// it under `spanring run`), the way Python, JVM agents and plugin runtimes load libraries:
//  1. it first uses up glibc's static-TLS surplus with copies of a library that has 64 bytes of
//     initial-exec TLS (each copy is another file, so another module), until dlopen fails with
//     glibc's "cannot allocate memory in static TLS block"; then it closes the last `--free`
//     copies again, so less than (free + 1) * 64 bytes of the surplus remain;
//  2. a keeper plugin linked with libspanring.so stays loaded throughout (so libspanring.so
//     does too) and records `--spans` spans on the main thread;
//  3. on a worker thread that lives across every dlclose: plugin A (libspanring.so) records,
//     is closed (and must then be unloaded: dlopen RTLD_NOLOAD finds it no more); plugin B, built from the same source with other literals of the same lengths,
//     is loaded (at A's address, if the loader reuses it) and records;
//  4. on a second worker thread: the plugin linked with libspanring.a records, is closed, is
//     loaded again and records again; the thread exits after both copies are gone (a key
//     destructor left behind in the unmapped copy would crash it).
// Writes one JSON line to --out: what it loaded and recorded. Exit 77 when the surplus could
// not be used up (another loader), 1 with a message on stderr when a dlopen fails.
//
//   dlopen_host --out FILE --filler SO --keeper SO --plugin-a SO --plugin-b SO
//               --plugin-static SO [--spans N] [--free K]
#include <dlfcn.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Plugin {
  void* handle = nullptr;
  const char* (*span_name)() = nullptr;
  void (*record)(int) = nullptr;
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "dlopen_host: %s\n", what.c_str());
  std::exit(1);
}

Plugin load(const std::string& path) {
  Plugin p;
  p.handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (p.handle == nullptr) fail("dlopen " + path + ": " + dlerror());
  p.span_name = reinterpret_cast<const char* (*)()>(dlsym(p.handle, "plugin_span_name"));
  p.record = reinterpret_cast<void (*)(int)>(dlsym(p.handle, "plugin_record"));
  if (p.span_name == nullptr || p.record == nullptr) fail(path + ": plugin symbols missing");
  return p;
}

// Closes `p` (loaded from `path`) and says whether it is really gone: dlopen with RTLD_NOLOAD
// finds a library only while it is still loaded (a unique symbol, STB_GNU_UNIQUE, such as a
// static of an inline function, would keep it).
bool unload(Plugin& p, const std::string& path, const std::string& what) {
  if (dlclose(p.handle) != 0) fail("dlclose " + what + ": " + dlerror());
  p = Plugin{};
  void* still = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (still == nullptr) return true;
  dlclose(still);
  return false;
}

// A thread that runs the jobs it is given, one at a time, and lives until it is stopped.
class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  // Runs `job` on the worker and waits for it.
  void run(std::function<void()> job) {
    std::unique_lock lock(mutex_);
    job_ = std::move(job);
    cv_.notify_all();
    cv_.wait(lock, [this] { return !job_; });
  }
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      cv_.notify_all();
    }
    thread_.join();
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || job_; });
      if (job_) {
        job_();
        job_ = nullptr;
        cv_.notify_all();
        continue;
      }
      return;
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool stop_ = false;
  std::thread thread_;
};

std::string copy_file(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  std::ofstream out(to, std::ios::binary);
  out << in.rdbuf();
  if (!in || !out) fail("cannot copy " + from + " to " + to);
  return to;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> opt{{"--spans", "100"}, {"--free", "2"}};
  for (int i = 1; i + 1 < argc; i += 2) opt[argv[i]] = argv[i + 1];
  for (const char* need :
       {"--out", "--filler", "--keeper", "--plugin-a", "--plugin-b", "--plugin-static"})
    if (opt.count(need) == 0) fail(std::string("missing ") + need);
  const int spans = std::atoi(opt["--spans"].c_str());
  const int free_copies = std::atoi(opt["--free"].c_str());

  // 1. Use up the static-TLS surplus.
  char dir[] = "/tmp/spanring-dlopen-XXXXXX";
  if (mkdtemp(dir) == nullptr) fail("mkdtemp");
  std::vector<void*> fillers;
  std::vector<std::string> files;
  std::string refusal;
  for (int i = 0; i < 4096 && refusal.empty(); ++i) {
    const std::string file =
        copy_file(opt["--filler"], std::string(dir) + "/filler-" + std::to_string(i) + ".so");
    files.push_back(file);
    if (void* h = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL); h != nullptr)
      fillers.push_back(h);
    else
      refusal = dlerror();
  }
  for (const std::string& f : files) unlink(f.c_str());
  rmdir(dir);
  if (refusal.find("static TLS") == std::string::npos) {
    std::fprintf(stderr, "dlopen_host: the static-TLS surplus was not used up (%s)\n",
                 refusal.empty() ? "4096 copies loaded" : refusal.c_str());
    return 77;
  }
  const size_t filled = fillers.size();
  // The copies loaded last hold the end of the used static TLS: closing them gives it back.
  for (int i = 0; i < free_copies && !fillers.empty(); ++i) {
    if (dlclose(fillers.back()) != 0) fail("dlclose filler");
    fillers.pop_back();
  }

  // 2. The keeper keeps libspanring.so loaded.
  Plugin keeper = load(opt["--keeper"]);
  keeper.record(spans);

  // 3. Plugin A, closed, then plugin B, on a thread alive across the dlclose.
  Worker worker;
  Plugin a = load(opt["--plugin-a"]);
  const char* a_name = a.span_name();
  worker.run([&] { a.record(spans); });
  bool unloaded = unload(a, opt["--plugin-a"], "plugin A");
  Plugin b = load(opt["--plugin-b"]);
  const bool same_address = b.span_name() == a_name;
  worker.run([&] { b.record(spans); });
  unloaded &= unload(b, opt["--plugin-b"], "plugin B");

  // 4. The static plugin, twice, on a thread that outlives both copies.
  Worker static_worker;
  Plugin s = load(opt["--plugin-static"]);
  const char* s_name = s.span_name();
  static_worker.run([&] { s.record(spans); });
  unloaded &= unload(s, opt["--plugin-static"], "the static plugin");
  s = load(opt["--plugin-static"]);
  const bool static_same_address = s.span_name() == s_name;
  static_worker.run([&] { s.record(spans); });
  unloaded &= unload(s, opt["--plugin-static"], "the static plugin (again)");
  static_worker.stop();
  worker.stop();
  unload(keeper, opt["--keeper"], "the keeper");

  std::ofstream out(opt["--out"], std::ios::app);
  out << "{\"pid\":" << getpid() << ",\"fillers\":" << filled << ",\"freed\":" << free_copies
      << ",\"refusal\":\"" << (refusal.find('"') == std::string::npos ? refusal : "?")
      << "\",\"spans\":" << spans << ",\"same_address\":" << (same_address ? "true" : "false")
      << ",\"static_same_address\":" << (static_same_address ? "true" : "false")
      << ",\"unloaded\":" << (unloaded ? "true" : "false") << "}\n";
  return out ? 0 : 1;
}
