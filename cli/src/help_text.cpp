#include "tessera/cli/help_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

namespace tessera::cli {

namespace {

/// `text` as a roff no-fill block: printed line by line as written.
std::string verbatim(std::string_view text) {
  std::string out = ".nf\n";
  out += roff_escape(text);
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += ".fi\n";
  return out;
}

}  // namespace

std::string roff_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  bool line_start = true;
  for (const char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    line_start = c == '\n';
    switch (c) {
      case '\\':
        out += "\\e";
        break;
      case '-':
        out += "\\-";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string format_usage(const HelpText& h) {
  return fmt::format("usage: {}\n{}\n{}\nFiles:\n{}\nExamples:\n{}\nExit codes: {}", h.synopsis,
                     h.description, h.commands, h.files, h.examples, h.exit_codes);
}

std::string format_man_page(const HelpText& h, std::string_view version) {
  std::string out =
      fmt::format(".TH TESSERA 1 \"\" \"tessera {}\" \"User Commands\"\n", roff_escape(version));
  out += ".SH NAME\ntessera \\- " + roff_escape(h.name);
  out += ".SH SYNOPSIS\n" + verbatim(h.synopsis);
  out += ".SH DESCRIPTION\n" + roff_escape(h.description) + ".PP\n" + verbatim(h.commands);
  out += ".SH COMMANDS\n";
  if (h.command_help != nullptr) {
    // In the order the overview lists them ("  run SCENARIO.yaml ..."); any
    // it does not list, last, by name.
    std::vector<std::pair<std::size_t, const std::string*>> order;
    for (const auto& [command, text] : *h.command_help) {
      order.emplace_back(h.commands.find("\n  " + command + " "), &command);
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [position, command] : order) {
      out += ".SS " + roff_escape(*command) + "\n" + verbatim(h.command_help->at(*command));
    }
  }
  out += ".SH FILES\n" + verbatim(h.files);
  out += ".SH EXAMPLES\n" + verbatim(h.examples);
  out += ".SH \"EXIT STATUS\"\n" + roff_escape(h.exit_codes);
  return out;
}

}  // namespace tessera::cli
