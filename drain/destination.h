// Where the drainer's formatted bytes go: the Destination interface. The Drainer (ring reading
// and accounting, drain/drainer.h) fills buffers a Destination hands it and hands them back with
// their Commit (drain/journal.h); the Destination says, through DestinationEvents, when each
// one is durable, and the Drainer then commits it (its rings' tails move). Implementations:
//   - OutputFiles (drain/output_files.h): a file, capped (--max-size) or rotated (--rotate),
//     written through a BufferedWriter; durable = written to the file, in file order.
//   - FlightRecorder (drain/flight_recorder.h): a window in memory; durable at once.
// Another destination (a network sink, say) is another implementation: the Drainer does not
// know which one it writes to.
//
// Drain thread only (not thread-safe).
#pragma once

#include "drain/journal.h"
#include "drain/uring_writer.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace spanring {

// What a Destination tells the drainer it is attached to. Called on the drain thread, from
// inside the Destination's methods.
class DestinationEvents {
 public:
  // The oldest buffer submitted and not reported yet is durable (`failed`: it is not, and
  // never will be: its records are lost). `end`: the destination holds complete buffers up to
  // this byte of its current file (the segment's commit offset; 0 where there is no file).
  // Exactly once per Destination::submit(), in submission order.
  virtual void durable(bool failed, uint64_t end) = 0;
  // The destination started its next file (--rotate): every earlier buffer is durable and
  // reported, and the next buffer begins the new file, whose identity (device, inode) the
  // segment's commit record must name from now on.
  virtual void new_file(uint64_t dev, uint64_t ino) = 0;
  // The destination no longer describes process `pid` (its process event is gone with it): if
  // the process appears again, it is announced again.
  virtual void forget_process(uint32_t pid) = 0;

 protected:
  ~DestinationEvents() = default;
};

class Destination {
 public:
  virtual ~Destination() = default;

  // Called once, by the Drainer that writes here, before anything else below: `events` must
  // outlive the Destination's use; `max_event_bytes` is the largest event its sink writes
  // (Sink::max_event_bytes(); a destination sizes its limits by it).
  virtual void attach(DestinationEvents& events, size_t max_event_bytes) = 0;

  // The identity (device, inode) of the file written now, for the segment's commit record;
  // (0, 0) when there is no file a restarted drainer could resume.
  virtual uint64_t dev() const noexcept = 0;
  virtual uint64_t ino() const noexcept = 0;
  // Committed bytes of a previous drainer that the current file starts with (0: it starts
  // empty).
  virtual uint64_t kept_bytes() const noexcept = 0;
  // How the destination is named in messages (a path).
  virtual const std::string& name() const noexcept = 0;

  // A buffer to fill. `capacity` is how many bytes the destination takes in it (at most the
  // buffer's size; lower near a size limit); 0 when it takes no more bytes at all (--max-size
  // reached, or a rotation failed): the buffer then carries its Commit only, and every later
  // one too. May wait for earlier buffers to be durable (reporting them) and may start the
  // next file (new_file()) first.
  virtual Buffer* take() = 0;
  // After take() gave capacity 0: a buffer whose capacity is the room the destination kept
  // back for a last line (what is left of the current file's limit).
  virtual Buffer* take_closing() = 0;
  // A taken buffer that will not be submitted.
  virtual void give_back(Buffer* b) noexcept = 0;
  // Hands over a taken buffer's first `b->len` bytes; `commit` is what they bring (read here
  // only; the drainer keeps it until durable() says so).
  virtual void submit(Buffer* b, const Commit& commit) = 0;

  // Reports the buffers durable by now: timeout_us <= 0, every one that is; else waits up to
  // timeout_us for the next one. Returns false, at once, when no buffer is on its way.
  virtual bool collect(int64_t timeout_us) = 0;
  // Buffers submitted and not yet reported durable.
  virtual size_t in_flight() const noexcept = 0;
  // Whether a partly filled buffer is worth handing over as soon as nothing is on its way
  // (Drainer::poll): true for a file, whose rings' tails then move a write after the records
  // were read instead of once a buffer is full; false (the default) where each buffer is a unit
  // of its own (the flight recorder's window blocks).
  virtual bool eager() const noexcept { return false; }
  // Waits until every buffer is durable and reported, then syncs the file. Returns false when
  // a write (to any of its files) failed.
  virtual bool finish() = 0;
};

}  // namespace spanring
