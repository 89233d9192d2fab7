#include "cli/options.h"

#include <spanring/error.h>

#include <cerrno>

namespace spanring {

void add_limit_options(CLI::App* cmd, OutputLimits& limits, std::string& rotate) {
  cmd->add_option("--max-size", limits.max_size,
                  "Stop writing when the trace file would pass SIZE bytes (K/M/G suffixes, at "
                  "least 64K); later records are drained, counted (reason max_size) and not "
                  "written, and the file's last line says how many")
      ->transform(CLI::AsSizeValue(false))
      // After the transform (bytes). 0 is what OutputLimits holds for "no --max-size", so an
      // explicit 0 would leave the file unbounded: it is refused as every size below 64K is.
      // (CLI11 names the option: "--max-size: 0 is below ...").
      ->check([](const std::string& bytes) -> std::string {
        return bytes.find_first_not_of('0') == std::string::npos ? below_min_bytes(0)
                                                                  : std::string();
      });
  cmd->add_option("--rotate", rotate,
                  "Start a new file before the current one passes SIZE bytes and keep the newest "
                  "COUNT (default 4): FILE is the current one, FILE.1 the one before, ...; each "
                  "file reads alone")
      ->type_name("SIZE[:COUNT]");
}

void parse_limits(const std::string& rotate, OutputLimits& limits) {
  if (!rotate.empty()) {
    const size_t colon = rotate.find(':');
    std::string size = rotate.substr(0, colon);
    std::string bad;
    try {
      bad = CLI::AsSizeValue(false)(size);  // rewrites `size` as bytes
    } catch (const CLI::Error& e) {  // an unknown unit is thrown, not returned
      bad = e.what();
    }
    if (!bad.empty() || size.empty() || size[0] == '-' ||
        size.find_first_not_of("0123456789") != std::string::npos)
      throw Error(ErrorCode::kInvalidArgument,
                  "--rotate " + rotate + ": SIZE must be a size such as 64M: " + bad, EINVAL, "");
    const OutputLimits r = rotate_limits(
        std::stoull(size), colon == std::string::npos ? "" : rotate.substr(colon + 1));
    limits.rotate_size = r.rotate_size;
    limits.rotate_count = r.rotate_count;
  }
  check_limits(limits);
}

}  // namespace spanring
