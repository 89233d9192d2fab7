#include "format/event_spelling.h"

#include "format/strace_format.h"

#include <spanring/encode.h>

namespace spanring {

EventSpelling::Span EventSpelling::span(const SpanEvent& e) noexcept {
  Span s;
  if (e.record != nullptr) {
    const RecordCopy& r = *e.record;
    s.name = std::string_view(name_, encode_name(r.name(), r.header.name_len, name_));
    s.attrs = std::string_view(attrs_, encode_attrs(r.attrs(), r.header.attrs_len, attrs_));
  } else {
    s.name = e.name;
    s.attrs = e.attrs;
  }
  // From the encoded attributes in both cases: a `clk=dev` cut off by the encoder's cap is
  // then not seen in either format.
  s.device = is_device_attrs(s.attrs);
  return s;
}

std::string_view EventSpelling::unfinished_name(const UnfinishedEvent& e) noexcept {
  if (!e.spelled_name.empty()) return e.spelled_name;
  return std::string_view(name_, encode_unfinished_name(name_, e.raw_name, e.name_cut));
}

}  // namespace spanring
