#include "tessera/cli/args.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <sstream>

#include "tessera/names.hpp"

namespace tessera::cli {

ArgParser& ArgParser::option(const std::string& name) {
  options_.insert(name);
  return *this;
}

ArgParser& ArgParser::flag(const std::string& name) {
  flags_.insert(name);
  return *this;
}

void ArgParser::parse(const std::vector<std::string>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 || a == "--") {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2);
    std::optional<std::string> inline_value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (flags_.count(name) != 0U) {
      if (inline_value) throw UsageError(fmt::format("{}: --{} takes no value", command_, name));
      seen_flags_.insert(name);
    } else if (options_.count(name) != 0U) {
      // (helper 179: a repeated --json-out kept the last silently)
      if (values_.count(name) != 0U) {
        throw UsageError(fmt::format("{}: --{} given twice", command_, name));
      }
      if (inline_value) {
        values_[name] = *inline_value;
      } else {
        if (i + 1 >= args.size()) throw UsageError(fmt::format("{}: --{} needs a value", command_, name));
        // An option of this command where the value should be is one
        // (helper 179: `run S --trace --json` wrote a trace named --json
        // and printed text); a file of that name goes as --trace=--json.
        const std::string& next = args[i + 1];
        if (next.rfind("--", 0) == 0) {
          const std::string next_name = next.substr(2, next.find('=') - 2);  // (npos - 2: to the end)
          if (options_.count(next_name) != 0U || flags_.count(next_name) != 0U || next_name == "set") {
            throw UsageError(
                fmt::format("{}: --{} needs a value, not the option {} (a file of that name: --{}={})",
                            command_, name, next, name, next));
          }
        }
        values_[name] = args[++i];
      }
    } else {
      std::vector<std::string> known(options_.begin(), options_.end());
      known.insert(known.end(), flags_.begin(), flags_.end());
      std::sort(known.begin(), known.end());
      throw UsageError(fmt::format("{}: unknown option --{}{} (see '{} --help')", command_, name,
                                   did_you_mean(name, known, "--", ""), command_));
    }
  }
}

bool ArgParser::has(const std::string& name) const {
  return seen_flags_.count(name) != 0U || values_.count(name) != 0U;
}

std::optional<std::string> ArgParser::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string ArgParser::require(const std::string& name) const {
  auto v = get(name);
  if (!v) throw UsageError(fmt::format("{}: missing required option --{}", command_, name));
  return *v;
}

void ArgParser::expect_positional(std::size_t n, const std::string& what) const {
  if (positional_.size() != n) {
    throw UsageError(fmt::format("{}: expected {} ({} argument{}), got {}", command_, what, n,
                                 n == 1 ? "" : "s", positional_.size()));
  }
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);) out.push_back(item);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

std::string dataset_folder(const std::string& data, const std::string& dataset) {
  std::error_code ec;
  const std::filesystem::path inside = std::filesystem::path(data) / dataset;
  return std::filesystem::is_directory(inside, ec) ? inside.string() : data;
}

void check_svg_path(const std::string& path) {
  std::string tail = path.size() >= 4 ? path.substr(path.size() - 4) : path;
  std::transform(tail.begin(), tail.end(), tail.begin(), [](unsigned char c) { return std::tolower(c); });
  if (tail == ".svg") return;
  // (the names to give: this one's stem with .svg, and with .png for rsvg-convert)
  const std::filesystem::path given(path);
  const std::string svg = std::filesystem::path(given).replace_extension(".svg").string();
  const std::string png = std::filesystem::path(given).replace_extension(".png").string();
  throw UsageError(
      fmt::format("--svg {}: the chart is an SVG file: give a name ending in .svg (for a PNG: "
                  "--svg {}, then rsvg-convert -o {} {})",
                  path, svg, png, svg));
}

int parse_int_in(const std::string& text, const std::string& flag, int min, int max) {
  const bool digits = !text.empty() && text.size() <= 10 && text.find_first_not_of("0123456789") == std::string::npos;
  if (digits) {
    const long long v = std::stoll(text);
    if (v >= min && v <= max) return static_cast<int>(v);
    throw UsageError(
        fmt::format("{}: expected a whole number from {} to {}, got '{}'", flag, min, max, text));
  }
  throw UsageError(fmt::format(
      "{}: expected {}, got '{}'", flag,
      min == 1 ? std::string("a positive integer") : fmt::format("a whole number from {}", min), text));
}

int parse_positive_int(const std::string& text, const std::string& flag, int max) {
  return parse_int_in(text, flag, 1, max);
}

}  // namespace tessera::cli
