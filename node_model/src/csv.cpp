#include "tessera/node_model/csv.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tessera/error.hpp"
#include "tessera/names.hpp"
#include "tessera/node_model/gpu_spec.hpp"
#include "tessera/node_model/json.hpp"

namespace tessera::node_model {

int CsvTable::column(std::string_view name) const {
  int found = -1;
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] != name) continue;
    if (found >= 0) {
      throw InputError(fmt::format("{}: column '{}' appears twice in the header (columns {} and {})", path,
                                   name, found + 1, i + 1));
    }
    found = static_cast<int>(i);
  }
  return found;
}

std::size_t CsvTable::require_column(std::string_view name) const {
  const int c = column(name);
  if (c < 0) throw InputError(fmt::format("{}: missing column '{}'", path, name));
  return static_cast<std::size_t>(c);
}

std::size_t CsvTable::require_first_column(std::string_view name) const {
  for (std::size_t i = 0; i < header.size(); ++i) {
    if (header[i] == name) return i;
  }
  throw InputError(fmt::format("{}: missing column '{}'", path, name));
}

std::string CsvTable::row_name(std::size_t row) const {
  // A blank line or a quoted line break above the row puts it elsewhere
  // than row + 1 lines below the header (helper 143: "row 2" on line 5).
  if (row < lines.size() && lines[row] != row + 2)
    return fmt::format("row {} (line {})", row + 1, lines[row]);
  return fmt::format("row {}", row + 1);
}

double CsvTable::number(std::size_t row, std::size_t col) const {
  // Spaces around a number are read past, at both ends (helper 102: a
  // leading one was, strtod's, a trailing one refused), as they are around
  // the header's names and the dtype words.
  const std::string& raw = rows.at(row).at(col);
  const auto v = decimal_number(raw);
  if (!v) {
    throw InputError(
        fmt::format("{}: {}, column '{}': '{}' is not a number", path, row_name(row), header.at(col), raw));
  }
  return *v;
}

std::optional<double> decimal_number(std::string_view text) {
  const std::string cell(trim_blanks(text));
  if (cell.empty() || cell.find_first_of("xX") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(cell.c_str(), &end);
  if (end != cell.c_str() + cell.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::int64_t CsvTable::positive_int(std::size_t row, std::size_t col) const {
  const double v = number(row, col);
  if (v <= 0 || v != std::floor(v) || v > 9e15) {
    throw InputError(fmt::format("{}: {}, column '{}': dimension must be a positive integer (got '{}')", path,
                                 row_name(row), header.at(col), rows[row][col]));
  }
  return static_cast<std::int64_t>(v);
}

CsvTable parse_csv(std::string_view text, const std::string& path) {
  CsvTable t;
  t.path = path;
  std::vector<std::string> cells;
  std::string cell;
  bool in_quotes = false;
  bool any = false;
  std::size_t line = 1;
  std::size_t row_start_line = 1;
  auto end_row = [&]() {
    cells.push_back(std::move(cell));
    cell.clear();
    if (!(cells.size() == 1 && cells[0].empty())) {  // skip blank lines
      if (t.header.empty()) {
        t.header = std::move(cells);
      } else {
        if (cells.size() != t.header.size()) {
          throw InputError(fmt::format("{}: row {} (line {}): {} cells, but the header has {} columns", path,
                                       t.rows.size() + 1, row_start_line, cells.size(), t.header.size()));
        }
        t.rows.push_back(std::move(cells));
        t.lines.push_back(row_start_line);
      }
    }
    cells = {};
    any = false;
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    // A NUL is no CSV text (a binary file, or a damaged one), and it would
    // cut every message that quotes its cell short.
    if (c == '\0') {
      throw InputError(fmt::format(
          "{}: line {}: a NUL byte: not a UTF-8 text CSV file (binary, UTF-16 or damaged)", path, line));
    }
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          cell += '"';
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        cell += c;
      }
      continue;
    }
    if (!any) row_start_line = line;
    any = true;
    if (c == '"') {
      in_quotes = true;
    } else if (c == ',') {
      cells.push_back(std::move(cell));
      cell.clear();
    } else if (c == '\n' || (c == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'))) {
      end_row();  // LF, CRLF (its CR dropped below) or a lone CR (old Mac files)
      ++line;
    } else if (c != '\r') {
      cell += c;
    }
  }
  if (in_quotes) throw InputError(fmt::format("{}: line {}: unterminated quoted cell", path, row_start_line));
  if (any || !cell.empty() || !cells.empty()) end_row();
  if (t.header.empty()) throw InputError(fmt::format("{}: empty CSV file (no header)", path));
  // Strip a UTF-8 byte-order mark and surrounding spaces from column names.
  if (t.header[0].starts_with("\xEF\xBB\xBF")) t.header[0] = t.header[0].substr(3);
  for (auto& h : t.header) {
    while (!h.empty() && h.front() == ' ') h.erase(h.begin());
    while (!h.empty() && h.back() == ' ') h.pop_back();
  }
  return t;
}

CsvTable read_csv(const std::string& path) { return parse_csv(read_text_file(path), path); }

Kernel kernel_from_row(const CsvTable& t, std::size_t row, DType dtype) {
  const std::size_t op_col = t.require_column("OPName");
  KernelOp op{};
  try {
    op = parse_kernel_op(t.rows.at(row).at(op_col));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}, column 'OPName': {}", t.path, t.row_name(row), e.what()));
  }
  // NeuSight's columns describe [B, M, N] x [B, N, K] -> [B, M, K]: N is
  // the reduction and K the output width (the library's grid is
  // ceil(K / tile) x ceil(M / tile) on every measured row). Kernel uses the
  // BLAS names (M x K times K x N): swap.
  const Kernel k = is_gemm(op) ? Kernel::gemm(op, t.positive_int(row, t.require_column("B")),
                                              t.positive_int(row, t.require_column("M")),
                                              t.positive_int(row, t.require_column("K")),
                                              t.positive_int(row, t.require_column("N")), dtype)
                               : Kernel::vector(op, t.positive_int(row, t.require_column("B")),
                                                t.positive_int(row, t.require_column("H")), dtype);
  try {
    k.validate();
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}: {}", t.path, t.row_name(row), e.what()));
  }
  return k;
}

std::string csv_escape(std::string_view cell) {
  if (cell.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(cell);
  std::string out = "\"";
  for (char c : cell) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

DType row_dtype(const CsvTable& t, std::size_t row, int dtype_col, DType fallback) {
  if (dtype_col < 0) return fallback;
  // Spaces around the cell are not part of it (as in the number columns); an
  // empty cell is a row without a dtype: the fallback (--dtype).
  std::string_view cell = t.rows.at(row).at(static_cast<std::size_t>(dtype_col));
  while (!cell.empty() && cell.front() == ' ') cell.remove_prefix(1);
  while (!cell.empty() && cell.back() == ' ') cell.remove_suffix(1);
  if (cell.empty()) return fallback;
  try {
    return parse_dtype(cell);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}, column 'dtype': {}", t.path, t.row_name(row), e.what()));
  }
}

double row_latency_ms(const CsvTable& t, std::size_t row, std::size_t col) {
  const double ms = t.number(row, col);
  if (!(ms > 0)) {
    throw InputError(fmt::format("{}: {}, column '{}': latency must be positive (got '{}')", t.path,
                                 t.row_name(row), t.header.at(col), t.rows.at(row).at(col)));
  }
  // No kernel runs for a day: a unit slip, or a damaged cell (helper 116:
  // 1e300 was read and scored as a 100% error).
  if (ms > 86'400e3) {
    throw InputError(fmt::format("{}: {}, column '{}': latency {} ms is more than a day (in milliseconds?)",
                                 t.path, t.row_name(row), t.header.at(col), t.rows.at(row).at(col)));
  }
  return ms;
}

}  // namespace tessera::node_model
