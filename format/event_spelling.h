// The encoded [STRACE] spelling of an event's name and attributes (printable ASCII, so it can
// go into JSON and tables as it is), whichever reader delivered the event: the text reader's
// events carry it, the binary reader's carry raw bytes, which are encoded here with the very
// functions the text drainer writes them with (spanring/encode.h, format/strace_format.h), so
// a trace reads the same in both formats.
//
// One instance per thread: the views returned point into the instance's buffers (for an event
// with raw bytes) or into the event, and are valid until the next call or the event's end.
#pragma once

#include "format/event.h"

#include <spanring/segment_layout.h>

#include <string_view>

namespace spanring {

class EventSpelling {
 public:
  struct Span {
    std::string_view name;   // 1..64 bytes
    std::string_view attrs;  // 0..192 bytes: `k=v` tokens separated by spaces
    bool device = false;     // attrs hold the token `clk=dev`: ts is a device-clock offset
  };
  // The spelling of a span's name and attributes. Never throws.
  Span span(const SpanEvent& e) noexcept;
  // An unfinished span's name as its [SPANRING_UNFINISHED] line spells it (`~` when cut,
  // `%3F` when none was recorded). Never throws.
  std::string_view unfinished_name(const UnfinishedEvent& e) noexcept;

 private:
  char name_[kNameCap];
  char attrs_[kAttrsCap];
};

}  // namespace spanring
