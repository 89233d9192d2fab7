// Bounded random-mutation fuzzing of every reader: binary traces (with and without their
// checksums repaired, so that hostile content also reaches the event parser) and [STRACE] text,
// each read through the strace renderer, the Chrome writer (whose output must still be valid
// JSON) and the report. Nothing may crash, hang or read out of bounds (CI runs this under
// ASan+UBSan); every outcome must be one of the documented ones, with a message.
//
// SPANRING_FUZZ_SECONDS (default 3) bounds the run; SPANRING_FUZZ_SEED (default: time) picks
// the sequence, printed so that a failure can be replayed.
#include "binary_util.h"
#include "format/trace_reader.h"
#include "tools/chrome_json.h"
#include "tools/convert.h"
#include "tools/report.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

using namespace spanring;
using namespace binary_test;

namespace {

double fuzz_seconds() {
  const char* s = std::getenv("SPANRING_FUZZ_SECONDS");
  return s != nullptr ? std::atof(s) : 3.0;
}

uint64_t fuzz_seed() {
  const char* s = std::getenv("SPANRING_FUZZ_SEED");
  if (s != nullptr) return std::strtoull(s, nullptr, 10);
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

std::string mutate(std::string f, std::mt19937_64& rng) {
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int s = 0; s < steps && !f.empty(); ++s) {
    const size_t at = rng() % f.size();
    switch (rng() % 9) {
      case 0:  // flip bits
        f[at] = static_cast<char>(f[at] ^ (1u << (rng() % 8)));
        break;
      case 1:  // random byte
        f[at] = static_cast<char>(rng());
        break;
      case 2:  // truncate
        f.resize(at);
        break;
      case 3: {  // duplicate a region
        const size_t n = std::min<size_t>(rng() % 512, f.size() - at);
        f.insert(rng() % (f.size() + 1), f.substr(at, n));
        break;
      }
      case 4: {  // delete a region
        f.erase(at, rng() % 64);
        break;
      }
      case 5: {  // an extreme 16/32-bit value (lengths, counts)
        const uint32_t v[] = {0, 1, 0x7f, 0xff, 0xffff, 0x10000, 0x7fffffff, 0xffffffff};
        const uint32_t x = v[rng() % 8];
        const size_t n = std::min<size_t>(rng() % 2 ? 2 : 4, f.size() - at);
        std::memcpy(f.data() + at, &x, n);
        break;
      }
      case 6:  // insert random bytes
        f.insert(at, std::string(1 + rng() % 16, static_cast<char>(rng())));
        break;
      case 7: {  // overwrite with another part of the file
        const size_t from = rng() % f.size();
        const size_t n = std::min({static_cast<size_t>(rng() % 64), f.size() - at,
                                   f.size() - from});
        std::memmove(f.data() + at, f.data() + from, n);
        break;
      }
      default:  // a NUL, LF or space (text grammar)
        f[at] = "\0\n =%"[rng() % 5];
    }
  }
  return f;
}

// Runs one input through every reader path; checks the outcomes are well formed.
void exercise(const std::string& input) {
  {
    TextRenderer r;
    TraceInput in = TraceInput::memory(input, "fuzz");
    const ReadResult res = read_binary_trace(in, r);
    if (res.status != ReadResult::Status::kComplete) REQUIRE(!res.message.empty());
    REQUIRE(res.good_bytes <= input.size());
  }
  {
    std::string text;
    TraceInput in = TraceInput::memory(input, "fuzz");
    TraceOutput out = TraceOutput::memory(&text);
    const ReadResult res = convert_trace(in, out, ConvertTo::kStrace);
    if (res.status != ReadResult::Status::kComplete) REQUIRE(!res.message.empty());
    out.finish();
  }
  {
    std::string chrome;
    TraceInput in = TraceInput::memory(input, "fuzz");
    TraceOutput out = TraceOutput::memory(&chrome);
    const ReadResult res = convert_trace(in, out, ConvertTo::kChrome);
    out.finish();
    if (res.status != ReadResult::Status::kNotATrace) {
      // Whatever the input, the output is JSON a strict parser accepts.
      const auto j = nlohmann::json::parse(chrome, nullptr, false);
      REQUIRE_MESSAGE(!j.is_discarded(), "invalid JSON from a mutated input");
    }
  }
  {
    std::string rep;
    std::string err;
    TraceInput in = TraceInput::memory(input, "fuzz");
    TraceOutput out = TraceOutput::memory(&rep);
    const int rc = run_report(in, out, (input.size() & 1) != 0, &err);
    out.finish();
    REQUIRE((rc == 0 || rc == 1));
    if (rc == 1) REQUIRE(!err.empty());
  }
}

}  // namespace

TEST_SUITE("binary") {

TEST_CASE("random mutations of binary and text traces never crash a reader") {
  const uint64_t seed = fuzz_seed();
  std::printf("binary_fuzz: seed %llu (replay with SPANRING_FUZZ_SEED=%llu)\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const TraceBuilder base = synthetic_trace(6, static_cast<uint32_t>(seed));
  REQUIRE(base.bytes.size() < 64 * 1024);
  // Version 3: string definitions and runs of ring records (compact, ordinary, packed).
  const TraceBuilder base3 = synthetic_v3_trace(4, static_cast<uint32_t>(seed));
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(fuzz_seconds());
  uint64_t runs = 0;
  uint64_t parsed_events = 0;  // how often the mutated binary still had readable blocks
  while (std::chrono::steady_clock::now() < deadline || runs < 50) {
    const int kind = static_cast<int>(rng() % 14);
    std::string input;
    if (kind < 4) {
      input = mutate(base.bytes, rng);  // checksums catch it: the block-level checks
    } else if (kind < 8) {
      input = mutate(base.bytes, rng);
      fix_crcs(input);  // checksums repaired: the event parser sees the damage
    } else if (kind < 10) {
      input = mutate(base3.bytes, rng);
    } else if (kind < 12) {
      input = mutate(base3.bytes, rng);
      fix_crcs(input);  // the run walker and the record decoder see the damage
    } else {
      input = mutate(base.text, rng);  // the strict text reader
    }
    CAPTURE(runs);
    exercise(input);
    TextRenderer r;
    read_bytes(input, r);
    parsed_events += r.events;
    ++runs;
  }
  std::printf("binary_fuzz: %llu inputs, %llu events read from mutated binaries\n",
              static_cast<unsigned long long>(runs), static_cast<unsigned long long>(parsed_events));
  CHECK(runs >= 50);
  CHECK(parsed_events > 0);
}

}  // TEST_SUITE("binary")
