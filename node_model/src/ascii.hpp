// ASCII lower case for names a user may write in any case (dtypes,
// frameworks, kernel ops); private to node_model.
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

namespace tessera::node_model::detail {

inline std::string ascii_lower(std::string_view text) {
  std::string s(text);
  std::transform(s.begin(), s.end(), s.begin(),
                 [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; });
  return s;
}

}  // namespace tessera::node_model::detail
