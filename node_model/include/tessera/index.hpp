#pragma once
// Row-major positions from int coordinates, computed in std::size_t: casting
// the int expression `row * width + col` instead would wrap before the cast
// for tables past 2^31 entries.
#include <cstddef>

namespace tessera {

/// `row * width + col` in std::size_t. The coordinates are non-negative.
[[nodiscard]] constexpr std::size_t flat_index(int row, int width, int col) {
  return static_cast<std::size_t>(row) * static_cast<std::size_t>(width) + static_cast<std::size_t>(col);
}

}  // namespace tessera
