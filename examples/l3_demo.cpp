// spanring-l3-demo: a small host scheduler that traces itself like the runtimes the [STRACE]
// format comes from (shared/strace-format.md), so that the whole pipeline (fork, several threads
// per process, invocations, device spans) can be exercised and checked end to end.
//
// Shape of one run:
//
//   parent process                                          chip child k (K of them)
//   ───────────────────────────────────────────────         ────────────────────────────────
//   orchestrator ── node.graph_build (once per round)
//                └─ node.submit (per task) ──> ready queue
//   scheduler    ── node.dispatch (per task) ──> worker queue w = dispatch_id % W
//   worker w     ── TaskMsg over task pipe of chip k = dispatch_id % K ──>  chip.run   (depth 0)
//                                                                            ├ chip.run.bind
//                                                                            │ └ chip.run.bind.args
//                                                                            └ chip.run.runner_run
//                                                                              └ ...device_wall
//                <── ReplyMsg over result pipe ────────────────────────────  (clk=dev, emit())
//                ── node.complete (per task)
//
// Rounds are sequential: the orchestrator waits until every task of a round has completed before
// it builds the next graph. Children are forked before any thread exists (fork in a threaded
// process would copy only the forking thread and any locks held by the others); spanring gives
// each child its own rings. When the parent closes a child's task pipe the child sends its span
// counts as a last ReplyMsg and exits; the parent reaps every child and sums the counts.
//
// Counts (--expect): every process counts each span where it creates it (counted_span /
// counted_emit below), whether or not tracing is enabled. So the JSON equals the per-name count
// of [STRACE] lines in the trace when tracing is enabled and the drainer reports no drops; with
// tracing disabled it is what the trace would have held. Names with a zero count are left out,
// so the object is exactly the trace's name histogram (a trace has no line for a zero count).

#include <spanring/span.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <pthread.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

constexpr const char* kProgram = "spanring-l3-demo";

// ---------------------------------------------------------------------------------------------
// Span names and per-process counts

enum class SpanKind : uint32_t {
  kGraphBuild,
  kSubmit,
  kDispatch,
  kComplete,
  kChipRun,
  kChipBind,
  kChipBindArgs,
  kChipRunnerRun,
  kChipDeviceWall,
  kCount,
};
constexpr uint32_t kSpanKindCount = static_cast<uint32_t>(SpanKind::kCount);

// Children are named `<parent>.<leaf>`: consumers build the span tree from the dotted names.
// The first word is the family the [STRACE] tool groups and draws by (strace-format.md, "Span
// families"): `node.*` is the host scheduler's per-task family, written outside any Invocation
// (inv=0 hid=0) with `role=facade|scheduler|worker` naming the lane; a `node.submit` and the
// `node.dispatch` with the same (pid, run_id, task_slot) are joined by a flow arrow. `chip.*`
// is a chip child's run, one Invocation per chip.run.
constexpr std::array<const char*, kSpanKindCount> kSpanNames = {
    "node.graph_build",
    "node.submit",
    "node.dispatch",
    "node.complete",
    "chip.run",
    "chip.run.bind",
    "chip.run.bind.args",
    "chip.run.runner_run",
    "chip.run.runner_run.device_wall",
};

// Spans created by this process, per name. Relaxed: the counters are independent tallies, read
// only after every thread that increments them has been joined (or, in a child, by the only
// thread), and join/exit already orders them.
class SpanCounts {
 public:
  void add(SpanKind kind) noexcept {
    counts_[static_cast<uint32_t>(kind)].fetch_add(1, std::memory_order_relaxed);
  }
  std::array<uint64_t, kSpanKindCount> snapshot() const noexcept {
    std::array<uint64_t, kSpanKindCount> out{};
    for (uint32_t i = 0; i < kSpanKindCount; ++i) {
      out[i] = counts_[i].load(std::memory_order_relaxed);
    }
    return out;
  }

 private:
  std::array<std::atomic<uint64_t>, kSpanKindCount> counts_{};
};

SpanCounts g_span_counts;

// The only ways this program creates spans, so that a span cannot be created without being
// counted. Returning the Span by value relies on C++17 guaranteed elision (Span is not movable).
spanring::Span counted_span(SpanKind kind) noexcept {
  g_span_counts.add(kind);
  return spanring::Span{kSpanNames[static_cast<uint32_t>(kind)]};
}

void counted_emit(SpanKind kind, int64_t ts_ns, int64_t dur_ns, const char* attrs) noexcept {
  g_span_counts.add(kind);
  // The result only says whether the record reached a ring; a drop is counted by spanring and
  // reported by the drainer, which is where a user looks for it.
  (void)spanring::emit(kSpanNames[static_cast<uint32_t>(kind)], ts_ns, dur_ns, attrs);
}

// ---------------------------------------------------------------------------------------------
// Simulated work. Real spans cover real work; a span around nothing would have dur=0 on a coarse
// clock and make the demo's timelines useless. Busy-waiting (not sleeping) keeps the durations
// close to these values and the default run (640 tasks) in the tens of milliseconds.

constexpr int64_t kGraphBuildWorkNs = 20'000;   // per round
constexpr int64_t kSubmitWorkNs = 1'000;        // per task, orchestrator
constexpr int64_t kDispatchWorkNs = 1'000;      // per task, scheduler
constexpr int64_t kCompleteWorkNs = 1'000;      // per task, worker
constexpr int64_t kBindWorkNs = 1'000;          // per task, chip child, outside bind.args
constexpr int64_t kBindArgWorkNs = 500;         // per tensor, chip child
constexpr int64_t kRunnerWorkNs = 3'000;        // per task, chip child, the "device" run

// Device spans carry a device-clock offset, not host time (strace-format.md, `clk=dev`). Like a
// device timer that starts near zero at each launch, every chip.run's device span starts at this
// origin, plus the child's task index so that records stay distinguishable.
constexpr int64_t kDeviceClockOrigin = 20'000;  // device-clock ns

// The callable hash of the one "kernel" the chip children run (written as `hid`).
constexpr uint64_t kChipCallableHash = 0x9f3c2a1b5d7e6f01ULL;

void spin_for(int64_t ns) noexcept {
  const int64_t end = spanring::now_ns() + ns;
  while (spanring::now_ns() < end) {
  }
}

// Thread names are what a viewer shows for a swimlane; spanring reads the name when a thread
// claims its ring (at its first span), so name a thread before its first span. The kernel
// limits names to 15 bytes plus NUL.
void name_this_thread(const std::string& name) noexcept {
  (void)pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

// ---------------------------------------------------------------------------------------------
// Pipe protocol between the parent and a chip child. Fixed-size binary messages: both ends are
// the same binary, so there is nothing to negotiate. Each message is far below PIPE_BUF, so a
// write is atomic and a reader never sees half of one unless the writer died.

// Parent -> child, one per task. EOF on the task pipe means "no more tasks".
struct TaskMsg {
  uint32_t run_id;
  uint32_t task_slot;
  uint32_t ntensor;
  uint32_t reserved;  // 0
  uint64_t dispatch_id;
  uint64_t inv;  // invocation id of this chip.run
};
static_assert(std::is_trivially_copyable_v<TaskMsg>);
static_assert(sizeof(TaskMsg) <= PIPE_BUF);

// Child -> parent: one kReplyDone per task, then one kReplyCounts after the task pipe's EOF.
constexpr uint32_t kReplyDone = 1;
constexpr uint32_t kReplyCounts = 2;

struct ReplyMsg {
  uint32_t kind;  // kReply*
  uint32_t run_id;
  uint32_t task_slot;
  uint32_t reserved;  // 0
  uint64_t dispatch_id;
  uint64_t counts[kSpanKindCount];  // kReplyCounts only: spans the child created, per SpanKind
};
static_assert(std::is_trivially_copyable_v<ReplyMsg>);
static_assert(sizeof(ReplyMsg) <= PIPE_BUF);

// Writes all of `len` bytes. Returns 0, or -errno (EPIPE when the reader is gone: SIGPIPE is
// ignored so that a dead child is an error message, not a silent death of the parent).
int write_all(int fd, const void* buf, size_t len) noexcept {
  const auto* p = static_cast<const char*>(buf);
  while (len > 0) {
    const ssize_t n = ::write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    p += n;
    len -= static_cast<size_t>(n);
  }
  return 0;
}

// Reads up to `len` bytes, stopping early only at EOF. Returns the bytes read (len, or fewer at
// EOF: 0 means a clean EOF before the message), or -errno.
ssize_t read_all(int fd, void* buf, size_t len) noexcept {
  auto* p = static_cast<char*>(buf);
  size_t got = 0;
  while (got < len) {
    const ssize_t n = ::read(fd, p + got, len - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(got);
}

std::string errno_text(int err) { return std::strerror(err); }

// ---------------------------------------------------------------------------------------------
// Chip child

// Runs one task as a chip invocation: a depth-0 chip.run under its own invocation id, with the
// same nesting a runtime's launch path has.
void run_chip_task(const TaskMsg& task, uint32_t chip, uint64_t task_index) noexcept {
  spanring::Invocation invocation{task.inv, kChipCallableHash};
  auto run = counted_span(SpanKind::kChipRun);
  run.attr("run_id", task.run_id)
      .attr("task_slot", task.task_slot)
      .attr("dispatch_id", task.dispatch_id)
      .attr("chip", chip);
  {
    auto bind = counted_span(SpanKind::kChipBind);
    spin_for(kBindWorkNs);
    auto args = counted_span(SpanKind::kChipBindArgs);
    args.attr("ntensor", task.ntensor);
    spin_for(kBindArgWorkNs * task.ntensor);
  }
  {
    auto runner = counted_span(SpanKind::kChipRunnerRun);
    const int64_t start = spanring::now_ns();
    spin_for(kRunnerWorkNs);
    const int64_t device_dur = spanring::now_ns() - start;
    // A child of runner_run (depth 2): emit() records at the thread's current depth.
    counted_emit(SpanKind::kChipDeviceWall, kDeviceClockOrigin + static_cast<int64_t>(task_index),
                 device_dur, "clk=dev");
  }
}

// The whole life of a chip child. Returns the process exit status.
int chip_child_main(uint32_t chip, int task_fd, int result_fd) {
  name_this_thread("l3-chip-" + std::to_string(chip));
  uint64_t tasks_run = 0;
  for (;;) {
    TaskMsg task{};
    const ssize_t n = read_all(task_fd, &task, sizeof task);
    if (n == 0) break;  // the parent closed the task pipe: no more tasks
    if (n < 0) {
      std::fprintf(stderr, "%s: chip child %u: reading the task pipe: %s\n", kProgram, chip,
                   errno_text(static_cast<int>(-n)).c_str());
      return 1;
    }
    if (static_cast<size_t>(n) != sizeof task) {
      std::fprintf(stderr, "%s: chip child %u: truncated task message (%zd of %zu bytes)\n",
                   kProgram, chip, n, sizeof task);
      return 1;
    }
    run_chip_task(task, chip, tasks_run++);

    ReplyMsg reply{};
    reply.kind = kReplyDone;
    reply.run_id = task.run_id;
    reply.task_slot = task.task_slot;
    reply.dispatch_id = task.dispatch_id;
    if (const int rc = write_all(result_fd, &reply, sizeof reply); rc < 0) {
      std::fprintf(stderr, "%s: chip child %u: writing the result pipe: %s\n", kProgram, chip,
                   errno_text(-rc).c_str());
      return 1;
    }
  }

  ReplyMsg counts{};
  counts.kind = kReplyCounts;
  const auto snapshot = g_span_counts.snapshot();
  std::copy(snapshot.begin(), snapshot.end(), std::begin(counts.counts));
  if (const int rc = write_all(result_fd, &counts, sizeof counts); rc < 0) {
    std::fprintf(stderr, "%s: chip child %u: sending span counts: %s\n", kProgram, chip,
                 errno_text(-rc).c_str());
    return 1;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Parent side

// The parent's view of one chip child.
struct ChipChild {
  uint32_t index = 0;
  pid_t pid = -1;
  int task_fd = -1;    // write end of the task pipe
  int result_fd = -1;  // read end of the result pipe
  // Held by a worker for a whole request/reply exchange, so that replies cannot be read by the
  // wrong worker. Rejected: a reader thread per child matching replies by dispatch_id; it adds
  // K threads to a demo whose point is the spans, not the transport.
  std::mutex exchange_mutex;
};

void close_fd(int& fd) noexcept {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "stopped with wait status " + std::to_string(status);
}

// Forks `count` chip children, each with its own task and result pipe. Must run before any
// thread is created. In a child this never returns: the child runs chip_child_main and exits.
// On failure, returns the children started so far and sets `error`.
std::vector<std::unique_ptr<ChipChild>> fork_children(uint32_t count, std::string& error) {
  std::vector<std::unique_ptr<ChipChild>> children;
  for (uint32_t i = 0; i < count; ++i) {
    int task_pipe[2];
    int result_pipe[2];
    if (::pipe2(task_pipe, O_CLOEXEC) != 0) {
      error = "creating the task pipe of chip child " + std::to_string(i) + ": " +
              errno_text(errno);
      return children;
    }
    if (::pipe2(result_pipe, O_CLOEXEC) != 0) {
      error = "creating the result pipe of chip child " + std::to_string(i) + ": " +
              errno_text(errno);
      ::close(task_pipe[0]);
      ::close(task_pipe[1]);
      return children;
    }
    // Nothing buffered may be written twice (once by the parent, once by the child).
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) {
      error = "forking chip child " + std::to_string(i) + ": " + errno_text(errno);
      for (int fd : {task_pipe[0], task_pipe[1], result_pipe[0], result_pipe[1]}) ::close(fd);
      return children;
    }
    if (pid == 0) {
      // The parent's ends, ours and the earlier children's: an inherited write end of another
      // child's task pipe would keep that child from ever seeing EOF while we live.
      for (auto& other : children) {
        close_fd(other->task_fd);
        close_fd(other->result_fd);
      }
      ::close(task_pipe[1]);
      ::close(result_pipe[0]);
      const int status = chip_child_main(i, task_pipe[0], result_pipe[1]);
      ::close(task_pipe[0]);
      ::close(result_pipe[1]);
      std::exit(status);
    }
    ::close(task_pipe[0]);
    ::close(result_pipe[1]);
    auto child = std::make_unique<ChipChild>();
    child->index = i;
    child->pid = pid;
    child->task_fd = task_pipe[1];
    child->result_fd = result_pipe[0];
    children.push_back(std::move(child));
  }
  return children;
}

// A task on its way from the orchestrator to a worker.
struct Task {
  uint32_t run_id = 0;
  uint32_t task_slot = 0;
  uint32_t ntensor = 0;
  uint32_t worker_id = 0;  // set by the scheduler
  uint32_t chip = 0;       // set by the scheduler
  uint64_t dispatch_id = 0;  // set by the scheduler
};

// An unbounded MPMC queue; close() wakes every waiter, and pop() then returns what is left
// before reporting the end. Rejected: moodycamel's queue; the hand-off rate here is a few
// thousand per second, and a mutex keeps the shutdown logic obvious.
template <class T>
class BlockingQueue {
 public:
  void push(T value) {
    {
      std::lock_guard lock{mutex_};
      items_.push_back(std::move(value));
    }
    ready_.notify_one();
  }
  void close() {
    {
      std::lock_guard lock{mutex_};
      closed_ = true;
    }
    ready_.notify_all();
  }
  // The next item, or nullopt once the queue is closed and empty.
  std::optional<T> pop() {
    std::unique_lock lock{mutex_};
    ready_.wait(lock, [this] { return !items_.empty() || closed_; });
    if (items_.empty()) return std::nullopt;
    T value = std::move(items_.front());
    items_.pop_front();
    return value;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<T> items_;
  bool closed_ = false;
};

struct Options {
  uint32_t rounds = 10;
  uint32_t tasks = 64;
  uint32_t children = 2;
  uint32_t workers = 2;
  std::string expect_path;  // empty: do not write counts
};

// The parent's threads and the state they share.
class Host {
 public:
  Host(const Options& options, std::vector<std::unique_ptr<ChipChild>>& children)
      : options_(options), children_(children) {
    for (uint32_t w = 0; w < options_.workers; ++w) {
      worker_queues_.push_back(std::make_unique<BlockingQueue<Task>>());
    }
  }

  // Runs all rounds on the orchestrator, scheduler and worker threads and joins them.
  void run() {
    std::vector<std::thread> threads;
    threads.reserve(2 + options_.workers);
    threads.emplace_back([this] { orchestrator(); });
    threads.emplace_back([this] { scheduler(); });
    for (uint32_t w = 0; w < options_.workers; ++w) {
      threads.emplace_back([this, w] { worker(w); });
    }
    for (auto& t : threads) t.join();
  }

  bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  std::string first_error() {
    std::lock_guard lock{error_mutex_};
    return first_error_;
  }

  // Records the first error and stops every thread: queues close, the orchestrator wakes.
  void fail(std::string message) {
    {
      std::lock_guard lock{error_mutex_};
      if (first_error_.empty()) first_error_ = std::move(message);
    }
    // release: pairs with the acquire in failed(); the message is already stored.
    failed_.store(true, std::memory_order_release);
    ready_queue_.close();
    for (auto& q : worker_queues_) q->close();
    {
      // Taken so that the orchestrator cannot check the predicate and then miss this notify.
      std::lock_guard lock{round_mutex_};
    }
    round_done_.notify_all();
  }

 private:
  // Deterministic "graph": tensor counts vary by slot and round so bind.args attrs differ.
  static uint32_t ntensor_for(uint32_t run_id, uint32_t task_slot) noexcept {
    return 1 + (task_slot * 7 + run_id) % 5;
  }

  void orchestrator() {
    name_this_thread("l3-orch");
    for (uint32_t round = 0; round < options_.rounds && !failed(); ++round) {
      std::vector<Task> graph;
      {
        auto build = counted_span(SpanKind::kGraphBuild);
        build.attr("run_id", round).attr("ntask", options_.tasks).attr("role", "facade");
        graph.reserve(options_.tasks);
        for (uint32_t slot = 0; slot < options_.tasks; ++slot) {
          Task task;
          task.run_id = round;
          task.task_slot = slot;
          task.ntensor = ntensor_for(round, slot);
          graph.push_back(task);
        }
        spin_for(kGraphBuildWorkNs);
      }
      {
        std::lock_guard lock{round_mutex_};
        round_completed_ = 0;
      }
      for (const Task& task : graph) {
        auto submit = counted_span(SpanKind::kSubmit);
        submit.attr("run_id", task.run_id).attr("task_slot", task.task_slot).attr("role", "facade");
        spin_for(kSubmitWorkNs);
        ready_queue_.push(task);
      }
      // Rounds do not overlap: the next graph is built once this one has fully completed.
      std::unique_lock lock{round_mutex_};
      round_done_.wait(lock, [&] { return round_completed_ == graph.size() || failed(); });
    }
    ready_queue_.close();
  }

  void scheduler() {
    name_this_thread("l3-sched");
    while (auto task = ready_queue_.pop()) {
      if (failed()) break;
      // Only this thread assigns dispatch ids, so a plain counter suffices.
      task->dispatch_id = next_dispatch_id_++;
      task->worker_id = static_cast<uint32_t>(task->dispatch_id % options_.workers);
      task->chip = static_cast<uint32_t>(task->dispatch_id % options_.children);
      auto dispatch = counted_span(SpanKind::kDispatch);
      dispatch.attr("run_id", task->run_id)
          .attr("task_slot", task->task_slot)
          .attr("worker_id", task->worker_id)
          .attr("dispatch_id", task->dispatch_id)
          .attr("role", "scheduler");
      spin_for(kDispatchWorkNs);
      worker_queues_[task->worker_id]->push(*task);
    }
    for (auto& q : worker_queues_) q->close();
  }

  void worker(uint32_t worker_id) {
    name_this_thread("l3-worker-" + std::to_string(worker_id));
    BlockingQueue<Task>& queue = *worker_queues_[worker_id];
    while (auto task = queue.pop()) {
      if (failed()) break;
      ChipChild& chip = *children_[task->chip];
      ReplyMsg reply{};
      if (!exchange(chip, *task, reply)) return;
      {
        auto complete = counted_span(SpanKind::kComplete);
        complete.attr("run_id", task->run_id)
            .attr("task_slot", task->task_slot)
            .attr("worker_id", worker_id)
            .attr("dispatch_id", task->dispatch_id)
            .attr("chip", chip.index)
            .attr("role", "worker");
        spin_for(kCompleteWorkNs);
      }
      {
        std::lock_guard lock{round_mutex_};
        ++round_completed_;
      }
      round_done_.notify_one();
    }
  }

  // Sends one task to a chip child and reads its reply. On failure calls fail() and returns false.
  bool exchange(ChipChild& chip, const Task& task, ReplyMsg& reply) {
    const std::string who =
        "chip child " + std::to_string(chip.index) + " (pid " + std::to_string(chip.pid) + ")";
    TaskMsg msg{};
    msg.run_id = task.run_id;
    msg.task_slot = task.task_slot;
    msg.ntensor = task.ntensor;
    msg.dispatch_id = task.dispatch_id;
    // inv 0 means "none" in [STRACE]; dispatch ids start at 0, so shift by one. Unique across
    // all children, so (pid, inv) and inv alone both identify one chip.run.
    msg.inv = task.dispatch_id + 1;

    std::lock_guard lock{chip.exchange_mutex};
    if (const int rc = write_all(chip.task_fd, &msg, sizeof msg); rc < 0) {
      fail("sending dispatch " + std::to_string(task.dispatch_id) + " to " + who + ": " +
           errno_text(-rc) + (rc == -EPIPE ? " (the child is gone)" : ""));
      return false;
    }
    const ssize_t n = read_all(chip.result_fd, &reply, sizeof reply);
    if (n < 0) {
      fail("reading the reply to dispatch " + std::to_string(task.dispatch_id) + " from " + who +
           ": " + errno_text(static_cast<int>(-n)));
      return false;
    }
    if (static_cast<size_t>(n) != sizeof reply) {
      fail(who + " closed its result pipe while running dispatch " +
           std::to_string(task.dispatch_id) + " (did it die?)");
      return false;
    }
    if (reply.kind != kReplyDone || reply.dispatch_id != task.dispatch_id ||
        reply.run_id != task.run_id || reply.task_slot != task.task_slot) {
      fail(who + " answered dispatch " + std::to_string(task.dispatch_id) +
           " with an unexpected message (kind " + std::to_string(reply.kind) + ", dispatch " +
           std::to_string(reply.dispatch_id) + ")");
      return false;
    }
    return true;
  }

  const Options& options_;
  std::vector<std::unique_ptr<ChipChild>>& children_;

  BlockingQueue<Task> ready_queue_;
  std::vector<std::unique_ptr<BlockingQueue<Task>>> worker_queues_;
  uint64_t next_dispatch_id_ = 0;  // scheduler thread only

  std::mutex round_mutex_;
  std::condition_variable round_done_;
  size_t round_completed_ = 0;  // tasks of the current round completed; guarded by round_mutex_

  std::atomic<bool> failed_{false};
  std::mutex error_mutex_;
  std::string first_error_;  // guarded by error_mutex_
};

// Closes the task pipes (the children's cue to report and exit), collects every child's span
// counts into `totals` and reaps it. Every child is reaped even after an error; returns the
// errors found, empty when all children reported and exited with status 0.
std::vector<std::string> finish_children(std::vector<std::unique_ptr<ChipChild>>& children,
                                         std::array<uint64_t, kSpanKindCount>& totals) {
  std::vector<std::string> errors;
  for (auto& child : children) close_fd(child->task_fd);
  for (auto& child : children) {
    const std::string who =
        "chip child " + std::to_string(child->index) + " (pid " + std::to_string(child->pid) + ")";
    ReplyMsg counts{};
    const ssize_t n = read_all(child->result_fd, &counts, sizeof counts);
    if (n < 0) {
      errors.push_back("reading the span counts of " + who + ": " +
                       errno_text(static_cast<int>(-n)));
    } else if (static_cast<size_t>(n) != sizeof counts) {
      errors.push_back(who + " exited before reporting its span counts");
    } else if (counts.kind != kReplyCounts) {
      errors.push_back(who + " sent message kind " + std::to_string(counts.kind) +
                       " where its span counts were expected");
    } else {
      for (uint32_t i = 0; i < kSpanKindCount; ++i) totals[i] += counts.counts[i];
    }
    close_fd(child->result_fd);

    int status = 0;
    pid_t waited;
    do {
      waited = ::waitpid(child->pid, &status, 0);
    } while (waited < 0 && errno == EINTR);
    if (waited < 0) {
      errors.push_back("waiting for " + who + ": " + errno_text(errno));
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      errors.push_back(who + " " + describe_wait_status(status));
    }
  }
  return errors;
}

bool write_expect(const std::string& path, const std::array<uint64_t, kSpanKindCount>& totals,
                  std::string& error) {
  // ordered_json keeps the names in pipeline order, which reads better than sorted.
  nlohmann::ordered_json expect = nlohmann::ordered_json::object();
  for (uint32_t i = 0; i < kSpanKindCount; ++i) {
    if (totals[i] != 0) expect[kSpanNames[i]] = totals[i];
  }
  std::ofstream out{path, std::ios::out | std::ios::trunc};
  if (!out) {
    error = "cannot open " + path + " for writing: " + errno_text(errno);
    return false;
  }
  out << expect.dump(2) << '\n';
  out.close();
  if (!out) {
    error = "writing " + path + " failed";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"spanring-l3-demo: a host scheduler (orchestrator, scheduler, workers) driving "
               "forked chip children, traced with spanring. Tracing is on when SPANRING_SEGMENT "
               "names a live segment, e.g. under `spanring run -o FILE -- spanring-l3-demo`."};
  // Bounds keep ids within the u32 message fields and the process/thread counts sane.
  app.add_option("--rounds", options.rounds, "rounds (graphs) to run, one after the other")
      ->check(CLI::Range(0u, 1'000'000u))
      ->capture_default_str();
  app.add_option("--tasks", options.tasks, "tasks per round")
      ->check(CLI::Range(0u, 1'000'000u))
      ->capture_default_str();
  app.add_option("--children", options.children, "chip child processes to fork")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
  app.add_option("--workers", options.workers, "worker threads in the parent")
      ->check(CLI::Range(1u, 256u))
      ->capture_default_str();
  app.add_option("--expect", options.expect_path,
                 "write the spans created per name, summed over all processes, as a JSON "
                 "object to this file (names with 0 spans are omitted); equals the trace's "
                 "per-name line counts when tracing is on and nothing was dropped");
  CLI11_PARSE(app, argc, argv);

  // A write to a dead child's pipe must fail with EPIPE and be reported, not kill us.
  ::signal(SIGPIPE, SIG_IGN);

  std::string error;
  auto children = fork_children(options.children, error);
  std::vector<std::string> errors;
  if (!error.empty()) {
    errors.push_back(error);
  } else {
    Host host{options, children};
    host.run();
    if (host.failed()) errors.push_back(host.first_error());
  }

  std::array<uint64_t, kSpanKindCount> totals = g_span_counts.snapshot();
  for (auto& e : finish_children(children, totals)) errors.push_back(std::move(e));

  if (!errors.empty()) {
    for (const auto& e : errors) std::fprintf(stderr, "%s: error: %s\n", kProgram, e.c_str());
    // No --expect file: counts from a failed run would not describe any complete trace.
    return 1;
  }

  if (!options.expect_path.empty() && !write_expect(options.expect_path, totals, error)) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, error.c_str());
    return 1;
  }

  uint64_t total_spans = 0;
  for (uint64_t n : totals) total_spans += n;
  std::fprintf(stderr,
               "%s: %u rounds x %u tasks, %u chip children, %u workers: %llu spans emitted "
               "(tracing %s)\n",
               kProgram, options.rounds, options.tasks, options.children, options.workers,
               static_cast<unsigned long long>(total_spans),
               spanring::enabled() ? "enabled" : "disabled");
  return 0;
}
