// The command line's conventions, through the real `spanring` executable (tools/cli_util.h,
// cli/usage.h): --version, usage errors (exit 2, the subcommand's usage, "did you mean"),
// `-o -` as stdout, an existing output kept as FILE.old unless --force, an empty or rejected
// input leaving no output; and what `meson install` puts in place: the man page and the bash
// completion, which is run in bash with COMP_WORDS set.
#include "mp_util.h"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

using namespace spanring_test;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
  REQUIRE_MESSAGE(f.good(), "cannot write ", path);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The names in `dir`, but . and ..
std::set<std::string> listing(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.insert(e.path().filename().string());
  return names;
}

std::string env_or_empty(const char* var) {
  const char* v = std::getenv(var);
  return v == nullptr ? "" : v;
}

// A small [STRACE] trace of the demo, made once.
struct DemoTrace {
  TempDir tmp;
  std::string spanring = exe_from_env("SPANRING_EXE");
  std::string demo = exe_from_env("L3_DEMO");
  std::string text = tmp.file("demo.strace");
  std::string binary = tmp.file("demo.sptrace");
  DemoTrace() {
    for (const auto& [file, format] : {std::pair{text, "strace"}, std::pair{binary, "binary"}}) {
      const RunResult r = run_process({spanring, "run", "--format", format, "-o", file, "--",
                                       demo, "--rounds", "1", "--tasks", "8"});
      INFO("spanring run: ", r.describe());
      REQUIRE(r.exit_code == 0);
    }
  }
};
// The commands `spanring --help` lists, in its order (so that a command added later needs no
// edit here).
std::vector<std::string> commands(const std::string& spanring) {
  const std::string help = run_process({spanring, "--help"}).out;
  std::vector<std::string> names;
  size_t at = help.find("\nSubcommands:\n");
  REQUIRE(at != std::string::npos);
  at = help.find('\n', at + 1) + 1;
  while (at < help.size() && help.compare(at, 2, "  ") == 0) {
    const size_t end = help.find(' ', at + 2);
    names.push_back(help.substr(at + 2, end - at - 2));
    at = help.find('\n', at) + 1;
  }
  return names;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

const DemoTrace& demo_trace() {
  static DemoTrace d;
  return d;
}

}  // namespace

TEST_SUITE("cli") {

TEST_CASE("--version prints the Meson project version and exits 0; --help exits 0") {
  const std::string spanring = exe_from_env("SPANRING_EXE");
  const RunResult v = run_process({spanring, "--version"});
  CHECK(v.exit_code == 0);
  CHECK(v.out == "spanring " + env_or_empty("SPANRING_VERSION") + "\n");
  const RunResult h = run_process({spanring, "run", "--help"});
  CHECK(h.exit_code == 0);
  CHECK(contains(h.out, "Usage: spanring run [OPTIONS] cmd..."));
}

TEST_CASE("usage errors exit 2 with one line saying what is wrong and the subcommand's usage") {
  const std::string spanring = exe_from_env("SPANRING_EXE");
  struct Case {
    std::vector<std::string> args;
    std::string line;   // the first stderr line
    std::string usage;  // the usage line that follows
  };
  const std::string all = joined(commands(spanring));
  CHECK(all.rfind("run, ", 0) == 0);
  for (const char* c : {"drain", "convert", "report", "clean", "stat", "snapshot"})
    CHECK(contains(", " + all + ",", std::string(", ") + c + ","));
  const std::vector<Case> cases = {
      {{}, "spanring: a command is required: " + all, "Usage: spanring [OPTIONS] SUBCOMMAND"},
      {{"rn"}, "spanring: unknown command 'rn'; did you mean 'run'? (commands: " + all + ")",
       "Usage: spanring [OPTIONS] SUBCOMMAND"},
      {{"reprot", "x"}, "spanring: unknown command 'reprot'; did you mean 'report'?",
       "Usage: spanring [OPTIONS] SUBCOMMAND"},
      {{"xyzzy"}, "spanring: unknown command 'xyzzy' (commands:", "Usage: spanring"},
      {{"--bogus"}, "spanring: unknown option --bogus", "Usage: spanring [OPTIONS] SUBCOMMAND"},
      {{"run", "--bogus", "--", "/bin/true"}, "spanring run: unknown option --bogus\n",
       "Usage: spanring run [OPTIONS] cmd..."},
      {{"run", "ls", "-l"},
       "spanring run: unknown option -l (the command to trace and its arguments go after --)",
       "Usage: spanring run [OPTIONS] cmd..."},
      {{"report"}, "spanring report: file is required", "Usage: spanring report [OPTIONS] file"},
      {{"report", "--rings", "3", "x"}, "spanring report: unknown option --rings",
       "Usage: spanring report [OPTIONS] file"},
      {{"convert", "x"}, "spanring convert: --to is required",
       "Usage: spanring convert [OPTIONS] file"},
      {{"convert", "x", "--to", "svg"}, "spanring convert: --to: svg not in {strace,chrome}",
       "Usage: spanring convert"},
      {{"run", "--rings", "abc", "--", "/bin/true"},
       "spanring run: --rings: Value abc not in range", "Usage: spanring run"},
      {{"drain", "-o", "x"}, "spanring drain: --segment is required", "Usage: spanring drain"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv{spanring};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    const RunResult r = run_process(argv);
    CAPTURE(r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.out.empty());
    CHECK(r.err.rfind(c.line, 0) == 0);
    CHECK(contains(r.err, "\n" + c.usage));
    CHECK(!contains(r.err, "arguments were not expected"));
  }
}

TEST_CASE("-o - writes to stdout: run (the command's own stdout goes to stderr), convert, report") {
  const DemoTrace& d = demo_trace();
  TempDir tmp;
  // run: the trace on stdout, the traced command's stdout on stderr, no file named "-".
  // The traced command: a shell that prints a line, then runs the demo ($0 of `sh -c`).
  const RunResult run = run_process(
      {"/bin/sh", "-c", "cd \"$1\" && \"$0\" run -o - -- /bin/sh -c "
                        "'echo from-the-command; exec \"$0\" --rounds 1 --tasks 4' \"$2\"",
       d.spanring, tmp.path(), d.demo});
  INFO("spanring run -o -: ", run.describe());
  REQUIRE(run.exit_code == 0);
  const std::optional<Summary> s = parse_summary(run.err);
  REQUIRE(s.has_value());
  size_t lines = 0;
  for (size_t at = run.out.find("[STRACE] "); at != std::string::npos;
       at = run.out.find("[STRACE] ", at + 1))
    ++lines;
  CHECK(lines == s->written);
  CHECK(!contains(run.out, "from-the-command"));
  CHECK(contains(run.err, "from-the-command\n"));
  CHECK(contains(run.err, "spanring: wrote " + std::to_string(s->written) + " records to stdout"));
  CHECK(listing(tmp.path()).empty());

  // convert and report: stdout, the same bytes as a file; nothing named "-".
  const RunResult conv = run_process(
      {"/bin/sh", "-c", "cd \"$2\" && \"$0\" convert \"$1\" --to strace -o -", d.spanring,
       d.binary, tmp.path()});
  CHECK(conv.exit_code == 0);
  const std::string file = tmp.file("c.strace");
  REQUIRE(run_process({d.spanring, "convert", d.binary, "--to", "strace", "-o", file})
              .exit_code == 0);
  CHECK(conv.out == read_file(file));
  const RunResult rep = run_process(
      {"/bin/sh", "-c", "cd \"$2\" && \"$0\" report \"$1\" -o -", d.spanring, d.text,
       tmp.path()});
  CHECK(rep.exit_code == 0);
  CHECK(rep.out.rfind("spanring report: ", 0) == 0);
  CHECK(listing(tmp.path()) == std::set<std::string>{"c.strace"});
}

TEST_CASE("an existing output file is kept as FILE.old unless --force, for run, convert and report") {
  const DemoTrace& d = demo_trace();
  TempDir tmp;
  struct Cmd {
    const char* what;
    std::vector<std::string> argv;  // without -o
  };
  const std::vector<Cmd> cmds = {
      {"run", {d.spanring, "run", "--", d.demo, "--rounds", "1", "--tasks", "2"}},
      {"convert", {d.spanring, "convert", d.binary, "--to", "chrome"}},
      {"report", {d.spanring, "report", d.text}},
  };
  for (const Cmd& c : cmds) {
    CAPTURE(c.what);
    const std::string out = tmp.file(std::string(c.what) + ".out");
    auto run = [&](bool force) {
      std::vector<std::string> argv = c.argv;
      const auto at = c.what == std::string("run") ? argv.begin() + 2 : argv.end();
      std::vector<std::string> opts{"-o", out};
      if (force) opts.push_back("--force");
      argv.insert(at, opts.begin(), opts.end());
      const RunResult r = run_process(argv);
      INFO(r.describe());
      REQUIRE(r.exit_code == 0);
      return r;
    };
    write_file(out, "precious\n");
    const RunResult first = run(false);
    CHECK(read_file(out + ".old") == "precious\n");
    CHECK(contains(first.err, "spanring: kept the existing " + out + " as " + out + ".old\n"));
    const std::string made = read_file(out);
    CHECK(made != "precious\n");
    CHECK(!made.empty());
    // A second run replaces the older .old with what the first one made.
    run(false);
    CHECK(read_file(out + ".old") == made);
    // --force: overwritten, .old untouched.
    ::unlink((out + ".old").c_str());
    write_file(out, "precious\n");
    const RunResult forced = run(true);
    CHECK(!exists(out + ".old"));
    CHECK(read_file(out) != "precious\n");
    CHECK(!contains(forced.err, "kept the existing"));
    // An empty file is nothing to keep.
    write_file(out, "");
    run(false);
    CHECK(!exists(out + ".old"));
  }
  // Not a regular file: written in place, never renamed.
  const RunResult null = run_process({d.spanring, "report", d.text, "-o", "/dev/null"});
  CHECK(null.exit_code == 0);
  CHECK(!exists("/dev/null.old"));
}

TEST_CASE("convert and report refuse an empty input alike, and a rejected input leaves no output") {
  const DemoTrace& d = demo_trace();
  TempDir tmp;
  const std::string in_dir = tmp.file("in");
  const std::string out_dir = tmp.file("out");
  std::filesystem::create_directory(in_dir);
  std::filesystem::create_directory(out_dir);
  const std::string empty = in_dir + "/empty.strace";
  const std::string hello = in_dir + "/hello.txt";
  const std::string corrupt = in_dir + "/corrupt.sptrace";
  // Cut before anything complete: inside the binary magic, inside the binary file header (a
  // binary trace that holds nothing), inside a text trace's first line (no [STRACE] token read
  // yet: not a trace). Nothing to read, so rejected like an empty file.
  const std::string magic_cut = in_dir + "/magic_cut.sptrace";
  const std::string header_cut = in_dir + "/header_cut.sptrace";
  const std::string line_cut = in_dir + "/line_cut.strace";
  write_file(empty, "");
  write_file(hello, "hello world\n");
  std::string bytes = read_file(d.binary);
  REQUIRE(bytes.size() > 200);
  write_file(magic_cut, bytes.substr(0, 1));
  write_file(header_cut, bytes.substr(0, 20));
  const std::string text_bytes = read_file(d.text);
  REQUIRE(text_bytes.find('\n') > 20);
  write_file(line_cut, text_bytes.substr(0, 20));
  bytes[bytes.size() - 20] ^= 0x40;  // inside the last block's payload: checksum mismatch
  write_file(corrupt, bytes);

  for (const std::string& in : {empty, hello, corrupt, magic_cut, header_cut, line_cut}) {
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"convert", "--to", "strace"},
          std::vector<std::string>{"convert", "--to", "chrome"},
          std::vector<std::string>{"report"}, std::vector<std::string>{"report", "--json"}}) {
      const bool text_in = in == hello || in == line_cut;
      if (text_in && args[0] == "convert" && args[2] == "strace") continue;  // text: below
      const std::string out = out_dir + "/result";
      for (const bool existing : {false, true}) {
        CAPTURE(in);
        CAPTURE(args[0]);
        CAPTURE(args.back());
        CAPTURE(existing);
        if (existing) write_file(out, "precious\n");
        std::vector<std::string> argv{d.spanring, args[0], in};
        argv.insert(argv.end(), args.begin() + 1, args.end());
        argv.insert(argv.end(), {"-o", out});
        const RunResult r = run_process(argv);
        CHECK(r.exit_code == 1);
        if (in == empty)
          CHECK(r.err == "spanring: " + empty + " is not a trace: it is empty (0 bytes)\n");
        else if (in == hello || in == line_cut)
          CHECK(contains(r.err, in + " is not a trace"));
        else if (in == magic_cut || in == header_cut)
          CHECK(contains(r.err, in + " holds no trace: the file is cut at byte " +
                                    std::to_string(in == magic_cut ? 1 : 20) +
                                    ", inside its 32-byte file header"));
        else
          CHECK(contains(r.err, "is corrupt"));
        // No partial output, no temporary file left; an existing output untouched.
        CHECK(listing(out_dir) ==
              (existing ? std::set<std::string>{"result"} : std::set<std::string>{}));
        if (existing) CHECK(read_file(out) == "precious\n");
        ::unlink(out.c_str());
      }
    }
  }
  // --to strace of text: refused, no output.
  const RunResult text = run_process({d.spanring, "convert", d.text, "--to", "strace", "-o",
                                      out_dir + "/result"});
  CHECK(text.exit_code == 1);
  CHECK(listing(out_dir).empty());
  // Through stdout the events before a corrupt block are still there to salvage.
  const RunResult salvage = run_process({d.spanring, "convert", corrupt, "--to", "strace"});
  CHECK(salvage.exit_code == 1);
  CHECK(contains(salvage.err, "the [STRACE] text on stdout holds the "));
  const RunResult whole = run_process({d.spanring, "convert", d.binary, "--to", "strace"});
  REQUIRE(whole.exit_code == 0);
  CHECK(whole.out.compare(0, salvage.out.size(), salvage.out) == 0);  // a prefix of the whole
}

TEST_CASE("meson install puts the man page and the bash completion in place, and the completion completes") {
  const std::string meson = env_or_empty("MESON");
  const std::string build_root = env_or_empty("MESON_BUILD_ROOT");
  if (meson.empty() || build_root.empty()) {
    MESSAGE("MESON and MESON_BUILD_ROOT are not set (run through meson test)");
    std::exit(77);
  }
  TempDir tmp;
  const RunResult inst = run_process({meson, "install", "-C", build_root, "--no-rebuild",
                                      "--quiet", "--destdir", tmp.path()},
                                     50);
  INFO("meson install: ", inst.describe());
  REQUIRE(inst.exit_code == 0);
  std::string man, completion, installed_exe;
  auto ends_with = [](const std::string& s, const std::string& end) {
    return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
  };
  for (const auto& e : std::filesystem::recursive_directory_iterator(tmp.path())) {
    const std::string p = e.path().string();
    if (ends_with(p, "/share/man/man1/spanring.1")) man = p;
    if (ends_with(p, "/share/bash-completion/completions/spanring")) completion = p;
    if (ends_with(p, "/bin/spanring")) installed_exe = p;
  }
  CHECK(!installed_exe.empty());
  REQUIRE_MESSAGE(!completion.empty(), "no share/bash-completion/completions/spanring installed");
  if (env_or_empty("SPANRING_MAN_PAGE") == "1") {
    REQUIRE_MESSAGE(!man.empty(), "no man1/spanring.1 installed");
    const std::string page = read_file(man);
    CHECK(contains(page, ".TH \"spanring\" \"1\""));
    CHECK(contains(page, "spanring " + env_or_empty("SPANRING_VERSION")));
    // Every option of every command's --help is in the man page.
    const std::string spanring = exe_from_env("SPANRING_EXE");
    for (const std::string& cmd : commands(spanring)) {
      const std::string help = run_process({spanring, cmd, "--help"}).out;
      for (size_t at = help.find("\n  -"); at != std::string::npos;
           at = help.find("\n  -", at + 1)) {
        std::string names = help.substr(at + 3, help.find_first_of(" \n", at + 3) - at - 3);
        const std::string longest = names.substr(names.rfind(',') + 1);
        CAPTURE(cmd);
        CAPTURE(longest);
        CHECK(contains(page, longest));
      }
    }
  } else {
    MESSAGE("scdoc was not found at setup: the man page is not built (it is optional)");
    CHECK(man.empty());
  }

  // The completion, sourced into a plain bash (no bash-completion package), with COMP_WORDS
  // as bash sets them; it reads the options from the executable named in COMP_WORDS[0].
  const std::string spanring = exe_from_env("SPANRING_EXE");
  auto complete = [&](const std::vector<std::string>& words) {
    std::string script = "source \"$1\"; COMP_WORDS=(";
    for (const std::string& w : words) script += "'" + w + "' ";
    script += "); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _spanring; "
              "printf '%s\\n' \"${COMPREPLY[@]}\"";
    const RunResult r = run_process({"/bin/bash", "--norc", "-c", script, "bash", completion});
    INFO(r.describe());
    CHECK(r.exit_code == 0);
    std::set<std::string> got;
    size_t at = 0;
    while (at < r.out.size()) {
      const size_t nl = r.out.find('\n', at);
      if (nl > at) got.insert(r.out.substr(at, nl - at));
      at = nl + 1;
    }
    got.erase("");
    return got;
  };
  CHECK(complete({spanring, "r"}) == std::set<std::string>{"run", "report"});
  std::set<std::string> top{"-h", "--help", "--version"};
  for (const std::string& c : commands(spanring)) top.insert(c);
  CHECK(top.count("clean") == 1);
  CHECK(complete({spanring, ""}) == top);
  CHECK(complete({spanring, "run", "--f"}) ==
        std::set<std::string>{"--force", "--format", "--fail-on-loss", "--flight-recorder"});
  CHECK(complete({spanring, "run", "--format", ""}) == std::set<std::string>{"strace", "binary"});
  CHECK(complete({spanring, "convert", "x", "--to", ""}) ==
        std::set<std::string>{"strace", "chrome"});
  CHECK(complete({spanring, "report", "--j"}) == std::set<std::string>{"--json"});
  CHECK(complete({spanring, "clean", "--d"}) == std::set<std::string>{"--dry-run"});
  CHECK(complete({spanring, "run", "-o", "x", "--", "/bin/tru"}).count("/bin/true") == 1);
}

}  // TEST_SUITE("cli")
