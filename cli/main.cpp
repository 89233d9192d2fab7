// spanring: the command line. Builds the parser from the commands (cli/commands.h, one file per
// command), parses, and runs the command chosen. What a command line that does not parse gets
// (exit 2, the usage, "did you mean") is in cli/usage.h; an Error a command throws before it
// starts is one line and exit 2.
#include "cli/commands.h"
#include "cli/usage.h"
#include "tools/cli_util.h"

#include <spanring/error.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  CLI::App app{"spanring: drain a shared-memory span trace into a [STRACE] text or binary file, "
               "convert and report traces", "spanring"};
  app.require_subcommand(1);
  // SPANRING_VERSION: the Meson project version (cli/meson.build).
  app.set_version_flag("--version", std::string("spanring ") + SPANRING_VERSION,
                       "Print the version and exit");

  // In the order `spanring --help` lists them.
  const std::vector<spanring::Command> commands = {
      spanring::add_run_command(app),     spanring::add_snapshot_command(app),
      spanring::add_drain_command(app),   spanring::add_convert_command(app),
      spanring::add_report_command(app),
#ifdef SPANRING_CLICKHOUSE
      spanring::add_export_command(app),
#endif
      spanring::add_clean_command(app),   spanring::add_stat_command(app),
  };

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return spanring::usage_error(app, e, argc, argv);
  }

  try {
    for (const spanring::Command& c : commands)
      if (*c.app) return c.run();
    return spanring::kExitUsage;  // require_subcommand(1): not reached
  } catch (const spanring::Error& e) {
    std::fprintf(stderr, "spanring: %s\n", e.what());
    return spanring::kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spanring: %s\n", e.what());
    return spanring::kExitUsage;
  }
}
