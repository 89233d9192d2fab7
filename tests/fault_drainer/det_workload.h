// The deterministic workload of the io_uring fault tests: record i of N is a fixed function of i
// (name, inv, hid, depth, ts, dur, attributes), emitted with spanring::emit_record from one
// thread by det_emitter. The test builds the lines the drainer must write for it from
// shared/strace-format.md with a plain synchronous writer of its own, and compares bytes.
//
// The records cover what the format spec is particular about: names and attributes that need
// escapes (space, =, %, [, ], tab, LF, UTF-8, 0xFF), names and attributes cut at their caps (with
// a whole escape dropped at the cap), fields exactly at the caps, no attributes (NULL and ""),
// device spans (clk=dev, ts passed through), inv/hid/depth, and records the producer refuses (a
// NULL name, a negative duration), which the drainer reports as drops with reason `invalid`.
//
// Host timestamps start at kHostBase ns (1 s of CLOCK_MONOTONIC, before any process here
// attached) and increase with i, so the first record is the pid's earliest span.
#pragma once

#include <cstdint>
#include <string>

namespace det {

inline constexpr int64_t kHostBase = 1000000000;  // ns
inline constexpr uint32_t kKinds = 16;

struct Record {
  bool null_name = false;   // emitted with name == NULL: an `invalid` drop
  std::string name;         // raw bytes (may hold NUL-free non-ASCII)
  uint64_t inv = 0;
  uint64_t hid = 0;
  int32_t depth = 0;
  int64_t ts = 0;
  int64_t dur = 0;          // negative: an `invalid` drop
  bool null_attrs = false;  // emitted with attrs == NULL
  std::string attrs;        // raw `k=v ...` text
  bool invalid() const { return null_name || name.empty() || ts < 0 || dur < 0 || depth < 0; }
};

inline Record record(uint64_t i) {
  Record r;
  r.ts = kHostBase + static_cast<int64_t>(i) * 1000;
  r.dur = 500 + static_cast<int64_t>(i % 7);
  const std::string n = std::to_string(i);
  switch (i % kKinds) {
    case 0:
      r.name = "det.plain";
      r.attrs = "i=" + n + " role=scheduler";
      break;
    case 1:
      r.name = "ext.app.odd name=x";  // space and = escaped in names
      r.attrs = "why=[demo] pct=50% i=" + n;
      break;
    case 2:
      r.name = "det.utf8.\xC3\xA9";
      r.attrs = "city=Z\xC3\xBCrich tab=\t nl=\n i=" + n;
      break;
    case 3:
      r.name = std::string(100, 'n');  // cut at 64 with ~
      r.attrs = "";                    // empty: the line ends `dur=<n> `
      break;
    case 4: {
      r.name = "det.long_attrs";
      std::string a;
      for (int k = 0; a.size() < 250; ++k) a += (k ? " k" : "k") + std::to_string(k) + "=v" + n;
      r.attrs = a;  // cut at 192 with ~
      break;
    }
    case 5:
      r.name = "det.spec_example";
      r.attrs = "\n" + std::string(186, 'x') + "\ny";  // %0A + 186 x + ~ (the spec's example)
      break;
    case 6:
      r.name = "det.no_attrs";
      r.null_attrs = true;
      break;
    case 7:
      r.name = "det.[bracket]%";
      r.attrs = "i=" + n;
      break;
    case 8:
      r.name = "chip.run.device_wall";
      r.ts = 20000 + static_cast<int64_t>(i);  // device clock offset, passed through
      r.attrs = "clk=dev i=" + n;
      break;
    case 9:
      r.name = "node.dispatch";
      r.inv = i;
      r.hid = 0x9f3c2a1b5d7e6f01ULL ^ i;
      r.depth = static_cast<int32_t>(i % 5);
      r.attrs = "task_slot=" + n + " role=scheduler";
      break;
    case 10:
      r.null_name = true;  // refused by the producer: reported as `invalid`
      r.attrs = "i=" + n;
      break;
    case 11:
      r.name = "det.negative_dur";
      r.dur = -1;  // refused by the producer: reported as `invalid`
      break;
    case 12:
      r.name = std::string(64, 'm');   // exactly the cap: no cut
      r.attrs = "k=" + std::string(190, 'z');  // 192 bytes: exactly the cap
      break;
    case 13:
      r.name = std::string(63, 'a') + "\xC3\xA9";  // the escape does not fit: 63 a + ~
      r.attrs = "i=" + n;
      break;
    case 14:
      r.name = std::string(64, 'b') + "c";  // at the cap with more input: 63 b + ~
      r.attrs = "i=" + n + " x=\xFF";
      break;
    default:
      r.name = "ext.x.y";
      r.attrs = "=lead eq==twice i=" + n;
      break;
  }
  return r;
}

}  // namespace det
