#pragma once
// The help of `tessera`, kept once and rendered twice: as `tessera --help`
// (plain text) and as `tessera help --man` (a roff man page for `man -l -`).
#include <map>
#include <string>
#include <string_view>

namespace tessera::cli {

/// The parts of the program's help. Each is plain text, lines ending in
/// '\n'; the renderers add the headings.
struct HelpText {
  std::string_view name;         ///< one line for the man page's NAME ("forecast ...")
  std::string_view synopsis;     ///< "tessera <command> [options]   ..."
  std::string_view description;  ///< what the program does
  std::string_view commands;     ///< the commands, grouped, one or two lines each
  std::string_view files;        ///< the files it reads and writes
  std::string_view examples;     ///< command lines to start from
  std::string_view exit_codes;   ///< the exit codes, one paragraph
  /// Per command, the text of `tessera COMMAND --help` (starting "usage: ").
  const std::map<std::string, std::string>* command_help = nullptr;
};

/// `tessera --help`: usage, description, commands, files, examples, exit codes.
std::string format_usage(const HelpText& h);

/// `tessera help --man`: a man(7) page with the sections NAME, SYNOPSIS,
/// DESCRIPTION, COMMANDS (every command's help, verbatim, in the order
/// `commands` lists them), FILES, EXAMPLES and EXIT STATUS. `version` goes
/// in the page's footer.
std::string format_man_page(const HelpText& h, std::string_view version);

/// `text` with roff's special characters escaped (backslash, '-', and a
/// leading '.' or '\'' on a line), so that man prints it as written.
std::string roff_escape(std::string_view text);

}  // namespace tessera::cli
