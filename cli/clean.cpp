// `spanring clean`: removes the segments in /dev/shm that nothing can use any more.
#include "cli/commands.h"
#include "drain/process_identity.h"
#include "drain/unfinished_segment.h"

#include <spanring/error.h>
#include <spanring/segment.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

namespace spanring {
namespace {

// Why a segment is still in use ("" when every process that could use it is dead).
std::string live_user(const Segment& seg) {
  const auto& h = seg.header();
  if (recorded_process_alive(h.creator_pid, h.creator_start_time))
    return "its creator pid " + std::to_string(h.creator_pid) + " is alive";
  const uint32_t drainer = h.drainer_pid.load(std::memory_order_acquire);
  if (recorded_process_alive(drainer, h.drainer_start_time))
    return "its drainer pid " + std::to_string(drainer) + " is alive";
  for (uint32_t i = 0; i < seg.ring_count(); ++i) {
    const auto& r = seg.ring(i);
    const uint32_t state = r.state.load(std::memory_order_acquire);
    if ((state == kRingActive || state == kRingClaiming) &&
        recorded_process_alive(r.owner_pid, r.owner_start_time))
      return "ring owner pid " + std::to_string(r.owner_pid) + " is alive";
  }
  return {};
}

int clean_segments(bool dry_run) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    if (!entry.is_regular_file(ec)) continue;
    const std::string name = entry.path().filename().string();
    std::string why_kept;
    const char* why_removed = "no live creator, drainer or owner";
    try {
      Segment seg = Segment::open(name);
      why_kept = live_user(seg);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kNotASegment) {
        std::fprintf(stderr, "spanring: kept %s: %s\n", name.c_str(), e.what());
        continue;
      }
      // No magic: a segment whose creator was killed while creating it (at any step), or not
      // a spanring segment at all (not ours to judge, and not worth a line).
      const std::optional<UnfinishedSegment> unfinished = unfinished_segment(name);
      if (!unfinished) continue;
      if (unfinished->creator_alive)
        why_kept =
            "its creator pid " + std::to_string(unfinished->creator_pid) + " is still creating it";
      why_removed = "its creator died while creating it";
    }
    if (!why_kept.empty()) {
      std::fprintf(stderr, "spanring: kept %s: %s\n", name.c_str(), why_kept.c_str());
      continue;
    }
    if (dry_run) {
      std::fprintf(stderr, "spanring: would remove %s (%s)\n", name.c_str(), why_removed);
    } else if (Segment::remove(name)) {
      std::fprintf(stderr, "spanring: removed %s (%s)\n", name.c_str(), why_removed);
      ++removed;
    }
  }
  std::fprintf(stderr, "spanring: clean: %d segment(s) removed\n", removed);
  return 0;
}


}  // namespace

Command add_clean_command(CLI::App& app) {
  auto dry_run = std::make_shared<bool>(false);
  CLI::App* clean = app.add_subcommand(
      "clean", "Remove spanring segments in /dev/shm whose creator, drainer and ring owners "
               "are all dead; never a live one");
  clean->add_flag("-n,--dry-run", *dry_run, "Only say what would be removed");
  return {clean, [dry_run] { return clean_segments(*dry_run); }};
}

}  // namespace spanring
