// The `spanring` subcommands. Each cli/<command>.cpp registers its subcommand and options on the
// top-level app and returns a Command whose `run` calls the libraries with what was parsed;
// main() (cli/main.cpp) runs the one the command line chose.
//
// Conventions every command follows: exit statuses, `-o -`, FILE.old unless --force, no output
// for a rejected input (tools/cli_util.h); a command line that does not parse (cli/usage.h).
// Commands write their messages to stderr, and throw Error for what stops them before they
// start (the CLI prints it and exits 2). A new option or command also goes into
// docs/spanring.1.scd, the man page (tests/mp/test_mp_cli.cpp checks that it names every option
// of every command's --help); the bash completion (docs/spanring.bash) reads them from --help.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace spanring {

struct Command {
  CLI::App* app;             // the subcommand, owned by the top-level app
  std::function<int()> run;  // runs it with the parsed options; returns the exit status
};

// spanring run [-o FILE] [--format strace|binary] [--rings N] [--ring-records N]
//              [--max-size SIZE | --rotate SIZE[:COUNT]] [--flight-recorder SIZE] -- CMD ARGS
Command add_run_command(CLI::App& app);
// spanring drain --segment NAME -o FILE [--format strace|binary] [--max-size | --rotate]
Command add_drain_command(CLI::App& app);
// spanring snapshot --segment NAME [-o FILE]
Command add_snapshot_command(CLI::App& app);
// spanring clean [-n]
Command add_clean_command(CLI::App& app);
// spanring stat --segment NAME [--json]
Command add_stat_command(CLI::App& app);
// spanring convert FILE --to strace|chrome [-o OUT]
Command add_convert_command(CLI::App& app);
// spanring report FILE [--json] [-o OUT]
Command add_report_command(CLI::App& app);
#ifdef SPANRING_CLICKHOUSE
// spanring export FILE... --clickhouse URL [--follow] [--host-id NAME] ...
Command add_export_command(CLI::App& app);
#endif

}  // namespace spanring
