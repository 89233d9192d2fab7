// kinds_emitter: every kind of record the producer writes, in an order and with values drawn from
// a seed, from a few threads, for the binary suite's byte-identity test (convert of the binary
// trace against the [STRACE] text the same drainer wrote from the same records).
//
//   kinds_emitter --seed S [--count N] [--threads T] [--burst B] [--unfinished 1]
//
// Kinds: compact spans (literal name and literal integer keys, 0..4 of them, values signed and
// unsigned within 32 bits), compact emits (literal name and literal attribute text), ordinary
// spans with packed integer attributes (a value past 32 bits, or 5 keys), ordinary spans with
// text attributes (escapes, spaces, %, bytes past 0x7f, a NUL inside a value), dynamic names
// (cut past 64 bytes, needing escapes), explicit emits (emit_record: inv, hid, depth, explicit
// times, clk=dev attributes), invalid records (negative time or empty name: a drop marker),
// nested spans, and bursts of B records with no pause (on a small ring: ring_full drops).
// --unfinished 1: the main thread ends with _exit inside three open spans (unfinished spans).
// --victim DIR: first a thread named "victim" writes 50 compact spans `k.victim v=I` (sequence
//   numbers 0..49), then writes "SEGMENT_NAME TID\n" to DIR/ready and waits (up to 60 s) for
//   DIR/go, writing nothing more, so that a test can write records into its ring meanwhile.
// Exit 0; CLI11's code on bad usage.
#include <spanring/span.h>

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sys/syscall.h>

#include <cstdint>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string dynamic_name(std::mt19937_64& rng) {
  static const char* const kPieces[] = {"dyn", ".x", " sp", "%pc", "[b]", "é", "=eq", "_long_"};
  std::string s;
  const int n = static_cast<int>(rng() % 16) + 1;
  for (int i = 0; i < n; ++i) s += kPieces[rng() % 8];
  return s;  // up to ~100 bytes: past 64 the name is cut
}

void one(std::mt19937_64& rng, uint64_t i) {
  const uint32_t v32 = static_cast<uint32_t>(rng());
  const int32_t s32 = static_cast<int32_t>(rng());
  switch (rng() % 12) {
    case 0: {
      spanring::Span s("k.compact0");
      break;
    }
    case 1: {
      spanring::Span s("k.compact2");
      s.attr("a", v32).attr("b", s32);
      break;
    }
    case 2: {
      spanring::Span s("k.compact4");
      s.attr("a", v32).attr("bb", s32).attr("ccc", int64_t{-5}).attr("d", uint64_t{i});
      break;
    }
    case 3: {
      spanring::Span s("k.packed");
      s.attr("big", uint64_t{rng()}).attr("neg", -static_cast<int64_t>(rng() >> 2));
      break;
    }
    case 4: {
      spanring::Span s("k.five");
      s.attr("a", 1).attr("b", 2).attr("c", 3).attr("d", 4).attr("e", static_cast<int64_t>(s32));
      break;
    }
    case 5: {
      spanring::Span s("k.text");
      s.attr("s", std::string_view("v a%l[u]e\xc3\xa9", 12)).attr("z", std::string_view("x\0y", 3));
      break;
    }
    case 6: {
      const std::string n = dynamic_name(rng);
      spanring::Span s(n.c_str());
      s.attr(std::string_view(n).substr(0, 5), int64_t{s32});
      break;
    }
    case 7:
      spanring::emit("k.emit", static_cast<int64_t>(1'000'000 + i), static_cast<int64_t>(v32 % 1000),
                     "lit=1 other=two");
      break;
    case 8: {
      const std::string n = dynamic_name(rng);
      const std::string a = "clk=dev n=" + std::to_string(v32);
      spanring::emit_record(n.c_str(), rng() % 5, rng() % 3, static_cast<int32_t>(rng() % 4),
                            static_cast<int64_t>(2'000'000 + i), static_cast<int64_t>(v32 % 77),
                            (rng() & 1) ? a.c_str() : nullptr);
      break;
    }
    case 9:
      // A drop marker (reason invalid): a negative start, or an empty name.
      if (rng() & 1)
        spanring::emit_record("k.invalid", 0, 0, 0, -1, 1, nullptr);
      else
        spanring::emit_record("", 0, 0, 0, 1, 1, nullptr);
      break;
    case 10: {
      spanring::Span outer("k.outer");
      outer.attr("depth", 0);
      spanring::Span inner("k.inner");
      inner.attr("v", uint64_t{v32} << 20);
      break;
    }
    default: {
      // A long attribute list: text cut at the record's bound.
      spanring::Span s("k.long");
      for (int k = 0; k < 12; ++k) s.attr(std::string_view("key_number_"), std::string_view("value_text_"));
      break;
    }
  }
}

void work(uint64_t seed, uint64_t count, uint64_t burst) {
  std::mt19937_64 rng(seed);
  for (uint64_t i = 0; i < count; ++i) {
    one(rng, i);
    // A pause now and then lets the drainer keep up; bursts (no pause) fill a small ring.
    if (burst == 0) ::usleep(rng() % 200);
    else if (i % burst == burst - 1) ::usleep(20000);
  }
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 1;
  uint64_t count = 3000;
  unsigned threads = 3;
  uint64_t burst = 0;
  bool unfinished = false;
  std::string victim;
  CLI::App app{"kinds_emitter: every kind of record, drawn from a seed"};
  app.add_option("--seed", seed, "random seed");
  app.add_option("--count", count, "records per thread");
  app.add_option("--threads", threads, "threads besides the main one");
  app.add_option("--burst", burst, "records written with no pause between pauses (0: pause each)");
  app.add_option("--unfinished", unfinished, "1: _exit inside three open spans");
  app.add_option("--victim", victim, "DIR: a victim thread that pauses for a test (see above)");
  CLI11_PARSE(app, argc, argv);
  if (!victim.empty()) {
    std::thread v([&] {
      spanring::set_thread_name("victim");
      for (uint32_t i = 0; i < 50; ++i) spanring::Span("k.victim").attr("v", i);
      const char* seg = std::getenv("SPANRING_SEGMENT");
      {
        std::ofstream f(victim + "/ready.tmp");
        f << (seg ? seg : "") << ' ' << ::syscall(SYS_gettid) << '\n';
      }
      std::rename((victim + "/ready.tmp").c_str(), (victim + "/ready").c_str());
      for (int i = 0; i < 12000 && ::access((victim + "/go").c_str(), F_OK) != 0; ++i)
        ::usleep(5000);
    });
    v.join();
  }
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t)
    ts.emplace_back([=] {
      spanring::set_thread_name(("kinds-" + std::to_string(t)).c_str());
      work(seed * 1000 + t + 1, count, burst);
    });
  work(seed * 1000, count, burst);
  for (std::thread& t : ts) t.join();
  if (unfinished) {
    static const std::string kLong(70, 'u');  // a name cut in the open-span entry
    spanring::Span a("k.open.a");
    spanring::Span b(kLong.c_str());
    spanring::Span c("k.open.c");
    ::_exit(0);
  }
  return 0;
}
