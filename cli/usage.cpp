#include "cli/usage.h"

#include "tools/cli_util.h"

#include <algorithm>
#include <cstdio>

namespace spanring {
namespace {

// Optimal string alignment distance (Damerau-Levenshtein without repeated edits of a
// substring): a swapped pair of letters, the commonest typo, costs 1.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

std::vector<std::string> subcommand_names(CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    names.push_back(sub->get_name());
  return names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

// The first argument before `--` that looks like an option `sub` does not have ("--bogus",
// "--bogus=1", "-x"), or "". "-" alone is a value (stdin/stdout), never an option.
std::string unknown_option(const CLI::App& sub, int first, int argc, char** argv) {
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-') continue;
    const std::string name = a.substr(0, a.find('='));
    if (name == "-h" || name == "--help") continue;
    if (sub.get_option_no_throw(name) == nullptr) return name;
  }
  return "";
}

int usage(const CLI::App& app, const std::string& prog, const std::string& problem) {
  std::fprintf(stderr, "%s: %s\n%sRun '%s --help' for more.\n", prog.c_str(), problem.c_str(),
               CLI::Formatter().make_usage(&app, prog).c_str(), prog.c_str());
  return kExitUsage;
}

}  // namespace

std::string nearest_name(const std::string& word, const std::vector<std::string>& names) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const std::string& n : names) {
    const size_t d = edit_distance(word, n);
    if (d < best_d) {
      best_d = d;
      best = n;
    }
  }
  return best_d <= std::max<size_t>(1, word.size() / 3) ? best : "";
}

int usage_error(CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  // --help, --help-all, --version: CLI11 prints them (stdout) and they are successes.
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
  const std::string prog = app.get_name();
  const std::vector<std::string> commands = subcommand_names(app);
  const std::string word = argc > 1 ? argv[1] : "";
  if (word.empty()) return usage(app, prog, "a command is required: " + joined(commands));
  if (word[0] == '-') {
    if (app.get_option_no_throw(word.substr(0, word.find('='))) == nullptr)
      return usage(app, prog, "unknown option " + word + " (commands: " + joined(commands) + ")");
    return usage(app, prog, e.what());
  }
  CLI::App* sub = nullptr;
  for (CLI::App* s : app.get_subcommands([](CLI::App*) { return true; }))
    if (s->check_name(word)) sub = s;
  if (sub == nullptr) {
    const std::string near = nearest_name(word, commands);
    return usage(app, prog, "unknown command '" + word + "'" +
                                (near.empty() ? "" : "; did you mean '" + near + "'?") +
                                " (commands: " + joined(commands) + ")");
  }
  const std::string sub_prog = prog + " " + sub->get_name();
  const std::string bad = unknown_option(*sub, 2, argc, argv);
  if (!bad.empty()) {
    std::string problem = "unknown option " + bad;
    const std::vector<CLI::Option*> positionals =
        sub->get_options([](CLI::Option* o) { return o->get_positional(); });
    // `spanring run ls -l`: the traced command's own options need the `--` in front of it.
    const bool has_dashes =
        std::find(argv + 2, argv + argc, std::string("--")) != argv + argc;
    if (!has_dashes && !positionals.empty() && positionals.back()->get_expected_max() > 1)
      problem += " (the command to trace and its arguments go after --)";
    return usage(*sub, sub_prog, problem);
  }
  return usage(*sub, sub_prog, e.what());
}

}  // namespace spanring
