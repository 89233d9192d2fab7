// The in-process set-up of the drainer's unit tests: a segment, a real Drainer whose
// destination is a flight recorder (nothing is written to disk), and this process attached to
// the segment as a producer, so that the test's own threads write the rings the drainer reads.
#pragma once

#include "drain/drainer.h"
#include "drain/flight_recorder.h"

#include <doctest/doctest.h>

#include <spanring/segment.h>
#include <spanring/span.h>

#include <string>
#include <utility>

namespace spanring::test {

struct InProcessDrainer {
  // `segment_name`: unique per test (the segment lives in /dev/shm until the destructor);
  // `options`: its ring count and size.
  explicit InProcessDrainer(std::string segment_name, SegmentOptions options = {4, 1024})
      : name(std::move(segment_name)), seg(Segment::create(name, options)) {
    REQUIRE(attach(name.c_str()));
  }
  ~InProcessDrainer() { Segment::remove(name); }
  InProcessDrainer(const InProcessDrainer&) = delete;
  InProcessDrainer& operator=(const InProcessDrainer&) = delete;

  std::string name;
  Segment seg;
  FlightRecorder recorder{FlightRecorder::kMinBytes, UringWriter::Fallback::kSynchronous};
  FlightSink sink{recorder};
  Drainer drainer{seg, recorder, sink};
};

}  // namespace spanring::test
