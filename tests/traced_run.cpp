// See traced_run.h.
#include "traced_run.h"

#include <doctest/doctest.h>

#include <exception>
#include <sstream>

namespace spanring_test {

RunResult spanring_run(const std::string& out, const std::vector<std::string>& run_options,
                       const std::vector<std::string>& command, int timeout_s) {
  std::vector<std::string> argv = {exe_from_env("SPANRING_EXE"), "run", "-o", out};
  argv.insert(argv.end(), run_options.begin(), run_options.end());
  argv.emplace_back("--");
  const std::vector<std::string> cmd = exec_argv(command);  // emulated runs: see exec_argv
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  return run_process(argv, timeout_s);
}

TracedRun run_traced(const std::string& out, const std::vector<std::string>& run_options,
                     const std::vector<std::string>& command, int timeout_s) {
  TracedRun t{out, spanring_run(out, run_options, command, timeout_s), {}};
  INFO("spanring run: ", t.run.describe());
  REQUIRE_FALSE(t.run.timed_out);
  REQUIRE(t.run.exit_code == 0);
  const std::optional<Summary> summary = parse_summary(t.run.err);
  REQUIRE(summary.has_value());
  t.summary = *summary;
  return t;
}

EmitterRun run_emitter(const TempDir& tmp, const char* emitter_var,
                       const std::vector<std::string>& run_options,
                       const std::vector<std::string>& emitter_args, int timeout_s) {
  EmitterRun e;
  e.jsonl = tmp.file("emitted.jsonl");
  std::vector<std::string> command = {exe_from_env(emitter_var), "--out", e.jsonl};
  command.insert(command.end(), emitter_args.begin(), emitter_args.end());
  static_cast<TracedRun&>(e) = run_traced(tmp.file("out.strace"), run_options, command, timeout_s);
  e.emitted = read_jsonl(e.jsonl);
  return e;
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_file(path));
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(line));
    } catch (const std::exception& e) {
      FAIL_CHECK(path, " line ", n, " is not JSON: ", e.what());
    }
  }
  return out;
}

}  // namespace spanring_test
