#include "cli/drain_session.h"

#include "cli/child_process.h"
#include "tools/cli_util.h"

#include <spanring/error.h>
#include <spanring/segment_layout.h>

#include <unistd.h>

#include <random>

namespace spanring {

std::string unique_segment_name() {
  std::random_device rd;
  char buf[64];
  std::snprintf(buf, sizeof buf, "spanring-%d-%08x", static_cast<int>(::getpid()), rd());
  return buf;
}


void print_summary(const Drainer& d, const std::string& out, bool ok,
                   const OutputLimits& limits) {
  const auto& s = d.stats();
  std::fprintf(stderr, "spanring: wrote %llu records to %s%s\n",
               static_cast<unsigned long long>(s.written), out.c_str(),
               ok ? "" : " (some writes failed, see above)");
  std::fprintf(stderr,
               "spanring: summary: written=%llu dropped=%llu unfinished=%llu processes=%llu "
               "threads=%llu\n",
               static_cast<unsigned long long>(s.written),
               static_cast<unsigned long long>(s.dropped),
               static_cast<unsigned long long>(s.unfinished),
               static_cast<unsigned long long>(s.processes),
               static_cast<unsigned long long>(s.threads));
  if (s.unwritten != 0 && s.unwritten_before != 0)
    std::fprintf(stderr, "spanring: unwritten: %llu records were drained but could not be "
                 "written to the file (%llu of them by an earlier drainer of this segment)\n",
                 static_cast<unsigned long long>(s.unwritten),
                 static_cast<unsigned long long>(s.unwritten_before));
  else if (s.unwritten != 0)
    std::fprintf(stderr, "spanring: unwritten: %llu records were drained but could not be "
                 "written to the file (see the error above)\n",
                 static_cast<unsigned long long>(s.unwritten));
  if (s.corrupt_rings != 0)
    std::fprintf(stderr, "spanring: quarantined: %llu corrupt ring(s)\n",
                 static_cast<unsigned long long>(s.corrupt_rings));
  // Every loss gets a line saying what to do about it; a run that lost nothing stays quiet.
  static constexpr struct {
    DropReason reason;
    const char* advice;
  } kAdvice[] = {
      {DropReason::kRingFull, "a thread's ring was full: raise --ring-records"},
      {DropReason::kNoRing,
       "a thread got no ring (every ring was taken, or /dev/shm had no room to commit one): "
       "raise --rings, or give /dev/shm more room"},
      {DropReason::kInvalid,
       "the caller passed a record that cannot be written: an empty name, a negative ts, dur "
       "or depth, or (spanring-simpler) no span, or one of another ABI version or size"},
      {DropReason::kCorrupt,
       "unreadable records: in rings quarantined as corrupt, or naming a string-table entry "
       "that did not check (see the lines above)"},
      {DropReason::kVfork, "emitted by vfork children before exec"},
      {DropReason::kReentrant,
       "emitted by signal handlers that interrupted a record write on the same thread"},
      {DropReason::kMaxSize,
       "the file had reached --max-size (they were drained and counted, not written): raise "
       "--max-size, or keep the newest records with --rotate SIZE:COUNT"},
  };
  for (const auto& a : kAdvice) {
    const uint64_t n = s.dropped_by_reason[static_cast<size_t>(a.reason)];
    if (n != 0)
      std::fprintf(stderr, "spanring: warning: %llu records dropped (reason %s): %s\n",
                   static_cast<unsigned long long>(n), drop_reason_name(a.reason), a.advice);
  }
  if (s.unfinished != 0)
    std::fprintf(stderr, "spanring: warning: %llu spans were still open when their process "
                 "died ([SPANRING_UNFINISHED] lines)\n",
                 static_cast<unsigned long long>(s.unfinished));
  if (limits.rotating()) {
    const uint32_t kept = static_cast<uint32_t>(std::min<uint64_t>(s.files, limits.rotate_count));
    std::string names = out;
    if (kept > 1) names += " (newest) .. " + OutputFiles::rotated_path(out, kept - 1) + " (oldest)";
    std::fprintf(stderr, "spanring: rotated: %llu files written by this drainer, %u kept: %s\n",
                 static_cast<unsigned long long>(s.files), kept, names.c_str());
  }
}

// Whether the drainer lost records: dropped (any reason) or drained but not written.
bool lost(const Drainer& d) { return d.stats().dropped != 0 || d.stats().unwritten != 0; }

std::string absolute(const std::string& path) {
  if (is_stdout_path(path)) return shown_path(path);
  if (!path.empty() && path[0] == '/') return path;
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

// One line when the output goes through the synchronous fallback writer (UringWriter).
void say_fallback(const UringWriter& writer) {
  if (writer.synchronous())
    std::fprintf(stderr, "spanring: io_uring is unavailable (%s): writing with write(2) instead, "
                 "same output (--require-tracing makes this an error)\n",
                 writer.fallback_cause().c_str());
}

// Whether `path` is the file the segment was last drained into (same device and inode, as
// recover() decides what to keep).
bool is_segment_output(const Segment& segment, const std::string& path) {
  const SegmentHeader& h = segment.view().header();
  struct stat st {};
  return h.output_ino != 0 && ::stat(path.c_str(), &st) == 0 && st.st_dev == h.output_dev &&
         st.st_ino == h.output_ino;
}

// The output options a restarted drainer needs to write on the same way (" --max-size N" or
// " --rotate SIZE:COUNT", in bytes).
std::string limit_options(const OutputLimits& l) {
  if (l.rotating())
    return " --rotate " + std::to_string(l.rotate_size) + ":" + std::to_string(l.rotate_count);
  if (l.max_size != 0) return " --max-size " + std::to_string(l.max_size);
  return {};
}


UringWriter::Fallback fallback_for(bool require_tracing) {
  return require_tracing ? UringWriter::Fallback::kRequired : UringWriter::Fallback::kSynchronous;
}


// The end of a `run` (file or flight recorder), after the summary: the hint when no thread of
// the command wrote a record, then the exit status (the command's, or kLossExitStatus).
int finish_run(const Drainer& drainer, int status, const std::vector<std::string>& cmd,
               const TracingPolicy& policy) {
  if (drainer.stats().threads == 0)
    std::fprintf(stderr, "spanring: warning: no thread of %s wrote a record: is it linked with "
                 "libspanring, and does it keep SPANRING_SEGMENT in its environment?\n",
                 cmd[0].c_str());
  const int cmd_status = exit_status(status);
  if (cmd_status == 0 && policy.fail_on_loss && lost(drainer)) return kLossExitStatus;
  return cmd_status;
}


std::optional<Segment> create_segment_or_say(const std::string& name, const SegmentOptions& opts,
                                             bool require_tracing,
                                             const std::vector<std::string>& cmd,
                                             const char* lost_what) {
  try {
    std::optional<Segment> segment = Segment::create(name, opts);
    // A ring's pages are committed when a thread claims it: a /dev/shm that holds fewer rings
    // than the segment has still traces, but not every thread. Said now, not found later in
    // the drop counts.
    const uint64_t fit = Segment::rings_that_fit(segment->ring_capacity());
    if (fit < segment->ring_count())
      std::fprintf(stderr,
                   "spanring: warning: /dev/shm has room for %llu of the segment's %u rings "
                   "(%u slots, %llu KiB each): at most %llu threads trace at once, the records "
                   "of any other are counted as no_ring drops (--ring-records or --rings "
                   "make rings smaller or fewer)\n",
                   static_cast<unsigned long long>(fit), segment->ring_count(),
                   segment->ring_capacity(),
                   static_cast<unsigned long long>(uint64_t{segment->ring_capacity()} *
                                                   kSlotBytes / 1024),
                   static_cast<unsigned long long>(fit));
    return segment;
  } catch (const Error& e) {
    // Never stop the workload for the tracer's sake, unless asked to.
    if (require_tracing) throw;
    std::fprintf(stderr, "spanring: cannot trace: %s; running %s untraced, %s "
                 "(--require-tracing makes this an error)\n",
                 e.what(), cmd[0].c_str(), lost_what);
    return std::nullopt;
  }
}

}  // namespace spanring
