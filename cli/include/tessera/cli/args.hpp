#pragma once
// A small, strict command-line parser: declared options only, every error a
// UsageError naming the flag.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tessera/error.hpp"
#include "tessera/names.hpp"  // did_you_mean, for the commands' own hints

namespace tessera::cli {

/// Command-line misuse (unknown flag, missing value). Exit code 2.
class UsageError : public InputError {
 public:
  using InputError::InputError;
};

class ArgParser {
 public:
  /// `command` is used in messages ("tessera run").
  explicit ArgParser(std::string command) : command_(std::move(command)) {}
  /// Declares `--name VALUE`.
  ArgParser& option(const std::string& name);
  /// Declares a boolean `--name`.
  ArgParser& flag(const std::string& name);
  /// Parses; throws UsageError. Positional arguments are collected in order.
  void parse(const std::vector<std::string>& args);

  [[nodiscard]] bool has(const std::string& name) const;
  [[nodiscard]] std::optional<std::string> get(const std::string& name) const;
  /// Value of a mandatory option; throws UsageError naming it when absent.
  [[nodiscard]] std::string require(const std::string& name) const;
  [[nodiscard]] const std::vector<std::string>& positional() const { return positional_; }
  /// Exactly `n` positional arguments, named for the message; throws otherwise.
  void expect_positional(std::size_t n, const std::string& what) const;

 private:
  std::string command_;
  std::set<std::string> options_, flags_;
  std::map<std::string, std::string> values_;
  std::set<std::string> seen_flags_;
  std::vector<std::string> positional_;
};

/// A whole number in [1, max] given to `flag`: digits only (no sign, no
/// suffix, no spaces). Throws UsageError naming the flag otherwise.
int parse_positive_int(const std::string& text, const std::string& flag, int max = 1 << 30);
/// The same in [min, max] (min >= 1), one message for every value out of it.
int parse_int_in(const std::string& text, const std::string& flag, int min, int max = 1 << 30);

/// --data given one level above a dataset (../shared/data, which holds
/// neusight/, xla/ and vtrain/): DATA/`dataset` when that is a directory,
/// else `data` itself.
std::string dataset_folder(const std::string& data, const std::string& dataset);

/// A --svg file name: it must end in .svg (any case). The charts are SVG text,
/// which a name such as chart.png would hide from a viewer; throws a
/// UsageError that says so and how to make a PNG (rsvg-convert).
void check_svg_path(const std::string& path);

/// `s` cut at every `sep`, empty items kept ("a,,b" -> a, "", b; "a," -> a, "").
std::vector<std::string> split(const std::string& s, char sep);

}  // namespace tessera::cli
