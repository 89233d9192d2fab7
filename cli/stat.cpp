// `spanring stat`: the live state of a segment (drain/segment_stat.h), read only, on stdout.
#include "cli/commands.h"
#include "drain/segment_stat.h"
#include "drain/unfinished_segment.h"

#include <spanring/error.h>
#include <spanring/segment.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

namespace spanring {
namespace {

// Opens segment `name` (Segment::open: a missing name, another program's object or a segment of
// another layout throw Error with the reason; a segment whose creation never finished throws
// Error naming its creator) and prints its state on stdout. Returns 0.
int show_stat(const std::string& name, bool json) {
  std::optional<Segment> seg;
  try {
    seg.emplace(Segment::open(name));
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kNotASegment) throw;
    // No magic: a creation that never finished says who made it; anything else is not ours.
    if (const auto unfinished = unfinished_segment(name)) {
      throw Error(ErrorCode::kNotASegment,
                  "segment '" + name + "' is not initialised: its creator pid " +
                      std::to_string(unfinished->creator_pid) +
                      (unfinished->creator_alive ? " is still creating it"
                             : " died while creating it (spanring clean removes it)"),
                  EPROTO, name);
    }
    throw;
  }
  const SegmentStat s = read_segment_stat(seg->view(), name, seg->size());
  const std::string text = json ? format_stat_json(s) : format_stat_text(s);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return 0;
}


struct StatOptions {
  std::string segment;
  bool json = false;
};

}  // namespace

Command add_stat_command(CLI::App& app) {
  auto o = std::make_shared<StatOptions>();
  CLI::App* stat = app.add_subcommand(
      "stat", "Show the live state of a segment (while a run drains it, or left behind): "
              "creator, drainer, rings in use with their owner, fill and drops; reads only");
  stat->add_option("--segment", o->segment, "Segment name (the value of SPANRING_SEGMENT)")
      ->required();
  stat->add_flag("--json", o->json, "One JSON object instead of text");
  return {stat, [o] { return show_stat(o->segment, o->json); }};
}

}  // namespace spanring
