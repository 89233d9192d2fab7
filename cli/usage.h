// How `spanring` answers a command line it cannot parse (CLI11's ParseError), so that every
// subcommand, including ones added later, follows the same conventions:
//
//   --help, --version   printed by CLI11, exit 0
//   a usage error       one line `spanring [SUB]: what is wrong`, then the usage line of the
//                       command concerned and where its help is, on stderr; exit kExitUsage (2)
//                       (CLI11's own statuses are 105-109, which no caller expects)
//   unknown command     `unknown command 'rn'; did you mean 'run'?` (nearest_name) and the list
//   unknown option      `unknown option --bogus` (CLI11 would say "arguments were not expected")
//
// CLI thread only.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace spanring {

// Prints what `e` calls for (see above) and returns the exit status. `app` is the top-level
// app that threw; argv is what it parsed.
int usage_error(CLI::App& app, const CLI::ParseError& e, int argc, char** argv);

// The name in `names` nearest to `word` by edit distance (insert, delete, substitute, or swap two
// neighbours: "rn" -> "run", "reprot" -> "report"), or "" when even the nearest needs more than
// max(1, size/3) edits (a guess that far off helps nobody). Ties: the first in `names`.
std::string nearest_name(const std::string& word, const std::vector<std::string>& names);

}  // namespace spanring
