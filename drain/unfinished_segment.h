// A segment whose creation never finished: what `spanring clean` removes once its creator is
// dead, and what `spanring stat` names instead of refusing it as "not a segment".
//
// Segment::create() goes through these steps, and a creator killed at any instant leaves the
// object as it was after the last one (none of them is undone by a SIGKILL):
//
//   1. shm_open(O_CREAT|O_EXCL)   an object of 0 bytes
//   2. ftruncate, posix_fallocate the full size, all zero (no magic, no creator yet)
//   3. creator_pid, then          the header's creator fields
//      creator_start_time
//   4. the other pages zeroed, then the geometry fields one by one (a header half written)
//   5. magic (release)            a finished segment: Segment::open() reads it
//
// Steps 1-4 are recognised here, and only for an object that cannot be anything else: its name
// is exactly the one `spanring run` gives (spanring-<pid>-<8 hex digits>, the pid being the
// creator's), it is a regular file, and it is empty or holds a header with no magic in which
// every field is zero or the value create() writes there (the creator's pid being the name's).
// Any other object, spanring-named or not, is not ours to judge and is never touched.
//
// The creator is named by its pid (the name's) and, once step 3 is done, its start time. Before
// step 3 there is no start time: the pid counts as the creator only if that process started
// before the object was created (its ctime), so a pid reused by a later process does not keep
// the object forever.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace spanring {

struct UnfinishedSegment {
  uint32_t creator_pid = 0;
  bool creator_alive = false;  // still running: the creation may be in progress
};

// What /dev/shm/`name` is, when it is a creation that never finished (above); nullopt for
// anything else: a finished segment, another program's object, a name that does not exist.
// Reads only.
std::optional<UnfinishedSegment> unfinished_segment(const std::string& name);

}  // namespace spanring
