#include "tessera/names.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace tessera {

std::string_view trim_blanks(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

std::string ascii_lower(std::string_view text) {
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
  return s;
}

namespace {
/// Optimal-string-alignment distance between `a` and `b`, case ignored.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      const std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1]))
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

/// The digits of `s`, in order ("llama2-70b" -> "270").
std::string digits(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c)) != 0) out += c;
  }
  return out;
}
}  // namespace

std::vector<std::string> closest_names(const std::string& name, const std::vector<std::string>& candidates) {
  const std::size_t limit = std::max<std::size_t>(1, name.size() / 3);
  std::vector<std::string> best;
  std::size_t best_distance = limit + 1;
  for (const std::string& c : candidates) {
    if (c == name) return {};
    // The distance is at least the difference in length: skip the far ones
    // (a hostile, huge name costs nothing).
    const std::size_t gap = c.size() > name.size() ? c.size() - name.size() : name.size() - c.size();
    if (gap > limit) continue;
    // Numbers are not typos: a size or a generation that differs is another
    // thing (llama2-7b is not llama2-70b, B300 not B200).
    if (digits(c) != digits(name)) continue;
    const std::size_t d = edit_distance(name, c);
    if (d < best_distance) {
      best_distance = d;
      best.clear();
    }
    if (d == best_distance && std::find(best.begin(), best.end(), c) == best.end()) best.push_back(c);
  }
  return best;
}

std::string did_you_mean(const std::string& name, const std::vector<std::string>& candidates,
                         const std::string& prefix, const std::string& suffix) {
  const std::vector<std::string> close = closest_names(name, candidates);
  std::string out;
  for (std::size_t i = 0; i < close.size(); ++i) {
    const char* sep = i == 0 ? ", did you mean " : (i + 1 == close.size() ? " or " : ", ");
    out += fmt::format("{}{}{}{}", sep, prefix, close[i], suffix);
  }
  return out.empty() ? out : out + "?";
}

}  // namespace tessera
