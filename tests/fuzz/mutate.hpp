#pragma once
// The deterministic mutation of the standalone fuzz drivers (scenario_fuzz,
// loader_fuzz): byte flips, insertions, deletions, copies, tokens that
// loaders find hard, truncation.
#include <algorithm>
#include <cstddef>
#include <iterator>
#include <random>
#include <string>

namespace tessera::fuzz {

inline std::string mutate(std::string s, std::mt19937_64& rng) {
  static const char* kTokens[] = {":", "- ", "{", "}", "[", "]", "\n", "  ", "#", "'", "\"", "&a", "*a", "!!int",
                                  "-1", "0", "1e400", "999999999999999999999", "nan", "400Gbs", "~", "? ", "|",
                                  ",", "\\u", "\\uD800", "null", "true", "[[", "((", "-0", "1e308", "\r\n"};
  auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  switch (rng() % 6) {
    case 0:
      if (!s.empty()) s[pick(s.size())] = static_cast<char>(rng() % 128);
      break;
    case 1: s.insert(pick(s.size() + 1), 1, static_cast<char>(rng() % 128)); break;
    case 2:
      if (!s.empty()) s.erase(pick(s.size()), 1 + pick(16));
      break;
    case 3: {
      const std::size_t a = pick(s.size() + 1);
      const std::size_t len = std::min<std::size_t>(pick(64), s.size() - a);
      s.insert(pick(s.size() + 1), s.substr(a, len));
      break;
    }
    case 4: s.insert(pick(s.size() + 1), kTokens[pick(std::size(kTokens))]); break;
    default:
      if (!s.empty()) s.resize(pick(s.size()));
      break;
  }
  return s;
}

}  // namespace tessera::fuzz
