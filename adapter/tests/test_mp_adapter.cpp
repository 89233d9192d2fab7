// The host-span adapter seam under `spanring run` (include/spanring/simpler_host_span.h): a stand-in
// runtime (standin_runtime.h) whose source never names spanring is traced through
// libspanring-simpler, linked, loaded with dlopen, and LD_PRELOADed over the runtime's own
// exported logger adapter. Every span the runtime handed to the seam is one [STRACE] line whose
// fields, decoded, are the ones it passed, in its thread's order; the spans the seam must refuse
// are exactly the drops, with reason `invalid`; nothing else is dropped at the default settings.
#include "mp_util.h"
#include "strace_parser.h"
#include "traced_run.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

using namespace spanring_test;

namespace {

std::string unhex(const std::string& h) {
  std::string s;
  for (size_t i = 0; i + 1 < h.size(); i += 2) s += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
  return s;
}

// The burst: 1,200 node.dispatch spans back to back from one thread, 3 slots each (78 raw
// bytes: a 13-byte name and 65 bytes of attributes), 3,600 of a default ring's 4,096 slots:
// none can be dropped however slowly the drainer runs (a loaded machine, qemu-user), so
// "nothing dropped at the default settings" is deterministic. A longer burst depends on the
// drainer keeping up (measured on this 2-core machine under load: 5,000 spans dropped 951,
// 1,500 dropped 55). Each worker thread's 200 spans take at most 400 slots.
const std::vector<std::string> kArgs = {"--threads", "4", "--spans", "200", "--burst", "1200",
                                        "--fork", "1"};
constexpr uint64_t kBurst = 1200;

// Everything the tests check about one traced run of the stand-in.
void check_adapter_run(const TracedRun& r, const std::vector<nlohmann::json>& emitted) {
  INFO("spanring run: ", r.run.describe());
  const Trace trace = load_trace(r.out);
  check_trace_invariants(trace, r.summary, r.run.err, r.out);
  CHECK(r.summary.unfinished == 0);
  CHECK(r.run.err.find("standin-logger:") == std::string::npos);

  // What the runtime handed to the seam, per (pid, tid) in its order, and its refusals.
  std::map<std::pair<uint64_t, uint64_t>, std::vector<nlohmann::json>> sent;
  uint64_t invalid = 0;
  uint64_t sent_total = 0;
  std::set<uint64_t> pids;
  for (const auto& j : emitted) {
    if (j.contains("summary")) {
      CHECK(j.at("enabled").get<int>() == 1);
      invalid += j.at("invalid").get<uint64_t>();
      pids.insert(j.at("pid").get<uint64_t>());
      continue;
    }
    sent[{j.at("pid").get<uint64_t>(), j.at("tid").get<uint64_t>()}].push_back(j);
    ++sent_total;
  }
  REQUIRE(pids.size() == 2);  // the stand-in and its forked child
  CHECK(invalid == 4);        // NULL, abi_version 2, struct_size 8, NULL name
  // The refusals are the only drops, each with reason `invalid`.
  CHECK(r.summary.dropped == invalid);
  CHECK(trace.dropped_total == invalid);
  for (const DropsLine& d : trace.drops) CHECK(d.reason == "invalid");
  // A refused span (its ts 0 or unread) moves no clock anchor: every span the stand-in sent
  // starts after its process attached, so no anchor is lowered to the clock's origin.
  for (const AnchorLine& a : trace.anchors)
    CHECK_MESSAGE(a.mono_ns != 0, "pid ", a.pid, "'s anchor was lowered to the clock's origin");

  // One line per span sent, in the sending thread's order, field by field.
  std::map<std::pair<uint64_t, uint64_t>, std::vector<const SpanLine*>> got;
  for (const SpanLine& s : trace.spans) got[{s.pid, s.tid}].push_back(&s);
  CHECK(trace.spans.size() == sent_total);
  REQUIRE(got.size() == sent.size());
  size_t compared = 0;
  for (const auto& [owner, lines] : sent) {
    INFO("pid ", owner.first, " tid ", owner.second);
    const auto g = got.find(owner);
    REQUIRE(g != got.end());
    REQUIRE(g->second.size() == lines.size());
    for (size_t i = 0; i < lines.size(); ++i) {
      const nlohmann::json& want = lines[i];
      const SpanLine& s = *g->second[i];
      INFO("span ", i, ": ", want.dump());
      CHECK(s.inv == want.at("inv").get<uint64_t>());
      CHECK(s.hid == want.at("hid").get<uint64_t>());
      CHECK(s.depth == want.at("depth").get<uint64_t>());
      CHECK(s.ts == want.at("ts").get<uint64_t>());
      CHECK(s.dur == want.at("dur").get<uint64_t>());
      CHECK(decode_field(s.name) == unhex(want.at("name").get<std::string>()));
      CHECK(decode_field(s.attrs) == unhex(want.at("attrs").get<std::string>()));
      // spanring's prefix: E = the span's end, P = the tid in hex (docs/output.md).
      REQUIRE(s.prefix.present);
      CHECK(s.prefix.thread == s.tid);
      ++compared;
    }
  }
  CHECK(compared == sent_total);

  // The encodings the runtime's logger writes (shared/strace-format.md), byte for byte.
  size_t odd = 0;
  for (const SpanLine& s : trace.spans) {
    if (s.name != "ext.standin.odd%20name%3Dx") continue;
    ++odd;
    CHECK(s.attrs == "why=%5Bdemo%5D tab=%09%25");
  }
  CHECK(odd > 0);
  // Device spans: ts passed through as the device clock's value, on no host clock.
  size_t device = 0;
  for (const SpanLine& s : trace.spans) {
    if (s.name != "chip.run.runner_run.device_wall.orch") continue;
    ++device;
    CHECK(is_device_span(s));
    CHECK(s.ts < 20000 + 200);
  }
  CHECK(device == 5 * 40);  // 4 threads and the child's one, 200 spans each, every 5th
  // The scheduler's burst, one thread back to back: every span kept.
  CHECK(trace.count("node.dispatch") == kBurst);
  // The newer caller's span (struct_size 72): kept, its extra field ignored.
  CHECK(trace.count("ext.standin.newer") == 1);
}

}  // namespace

TEST_SUITE("mp") {

TEST_CASE("a runtime linked with libspanring-simpler is traced with every field of its spans") {
  TempDir tmp;
  const EmitterRun e = run_emitter(tmp, "STANDIN_LINKED", {}, kArgs, 60);
  check_adapter_run(e, e.emitted);
}

TEST_CASE("a runtime loaded with dlopen, linked with libspanring-simpler, is traced the same") {
  TempDir tmp;
  std::vector<std::string> args = {"--lib", exe_from_env("STANDIN_RUNTIME_LIB")};
  args.insert(args.end(), kArgs.begin(), kArgs.end());
  const EmitterRun e = run_emitter(tmp, "STANDIN_DLOPEN", {}, args, 60);
  check_adapter_run(e, e.emitted);
}

TEST_CASE("LD_PRELOAD of libspanring-simpler replaces a runtime's exported logger adapter") {
  if (!exec_wrapper().empty()) {
    MESSAGE("skipped under an exec wrapper (qemu-user): LD_PRELOAD would load into the "
            "emulator, not into the emulated runtime");
    return;
  }
  TempDir tmp;
  const char* lib = std::getenv("SPANRING_SIMPLER_LIB");
  REQUIRE(lib != nullptr);
  // Under ASan the preloaded library comes before the ASan runtime in the initial library list,
  // which ASan refuses by default; the order is harmless here (both are sanitized).
  std::string asan = std::getenv("ASAN_OPTIONS") != nullptr ? std::getenv("ASAN_OPTIONS") : "";
  asan += std::string(asan.empty() ? "" : ":") + "verify_asan_link_order=0";
  const std::string jsonl = tmp.file("emitted.jsonl");
  std::vector<std::string> cmd = {"/usr/bin/env", std::string("LD_PRELOAD=") + lib,
                                  "ASAN_OPTIONS=" + asan, exe_from_env("STANDIN_LOGGER"), "--out",
                                  jsonl};
  cmd.insert(cmd.end(), kArgs.begin(), kArgs.end());
  const TracedRun r = run_traced(tmp.file("out.strace"), {}, cmd, 60);
  check_adapter_run(r, read_jsonl(jsonl));
}

TEST_CASE("outside spanring run the gate is closed and the runtime sends nothing") {
  TempDir tmp;
  const std::string jsonl = tmp.file("emitted.jsonl");
  std::vector<std::string> cmd = {exe_from_env("STANDIN_LINKED"), "--out", jsonl};
  cmd.insert(cmd.end(), kArgs.begin(), kArgs.end());
  const RunResult r = run_process(cmd, 60);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  const std::vector<nlohmann::json> emitted = read_jsonl(jsonl);
  REQUIRE(emitted.size() == 2);  // the two summaries, no span
  for (const auto& j : emitted) {
    CHECK(j.contains("summary"));
    CHECK(j.at("enabled").get<int>() == 0);
    CHECK(j.at("spans").get<int>() == 0);
  }
}

}  // TEST_SUITE("mp")
