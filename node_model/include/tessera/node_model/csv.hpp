#pragma once
// CSV input/output for kernel measurements (NeuSight's schema). Every error
// names the file, the row (1-based data row; the header is row 0) and the
// column. Output is written atomically: a temporary file renamed into place,
// so a failed run never leaves a partial file behind.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/node_model/kernel.hpp"

namespace tessera::node_model {

struct CsvTable {
  std::string path;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  /// The 1-based line of the file each row starts on (parallel to `rows`;
  /// blank lines and quoted line breaks make it differ from row + 2).
  std::vector<std::size_t> lines;

  /// Index of a column, or -1. Throws InputError "<file>: column '<name>'
  /// appears twice in the header" when two columns have the name (which of
  /// them is meant is not known).
  [[nodiscard]] int column(std::string_view name) const;
  /// Index of a column; throws InputError "<file>: missing column '<name>'"
  /// (or two of them, as column()).
  [[nodiscard]] std::size_t require_column(std::string_view name) const;
  /// Index of the first column of that name, for tables that repeat one on
  /// purpose (nccl-tests: out-of-place, then in-place `time(ns)`); throws
  /// InputError when there is none.
  [[nodiscard]] std::size_t require_first_column(std::string_view name) const;
  /// "row N" (1-based data row), with "(line L)" where the row is not on
  /// line N + 1 of the file (blank lines or quoted line breaks above it).
  [[nodiscard]] std::string row_name(std::size_t row) const;
  /// Cell as a finite decimal number (not hex: 0x10); throws InputError naming
  /// file, row and column.
  [[nodiscard]] double number(std::size_t row, std::size_t col) const;
  /// Cell as a positive integer dimension; throws InputError naming file, row and column.
  [[nodiscard]] std::int64_t positive_int(std::size_t row, std::size_t col) const;
};

/// Parses CSV text (RFC 4180 quoting). Rows with a different number of cells
/// than the header are errors.
CsvTable parse_csv(std::string_view text, const std::string& path);
CsvTable read_csv(const std::string& path);

/// The kernel described by one row: `OPName` plus `B,M,N,K` (GEMMs, NeuSight's
/// [B,M,N] x [B,N,K]: Kernel::n = column K, Kernel::k = column N) or `B,H`.
/// Throws InputError naming file, row and column (unknown op, missing column,
/// non-numeric or non-positive dimension).
Kernel kernel_from_row(const CsvTable& t, std::size_t row, DType dtype = DType::FP32);

/// The row's element type from column `dtype_col` (parse_dtype; spaces
/// around it ignored), or `fallback` when `dtype_col` < 0 or the cell is
/// empty; throws InputError naming file, row and column.
DType row_dtype(const CsvTable& t, std::size_t row, int dtype_col, DType fallback);

/// A data file's cell as a finite decimal number, blanks around it read past;
/// nullopt for an empty cell, hexadecimal (strtod's 0x10: no measurement is
/// written so), trailing text, NaN or infinity. The one reading of a number
/// that CsvTable::number, kernel overrides and nccl-tests logs share.
std::optional<double> decimal_number(std::string_view cell);

/// A measured latency in ms from column `col`: a positive number; throws
/// InputError naming file, row and column.
double row_latency_ms(const CsvTable& t, std::size_t row, std::size_t col);

/// Quotes a cell when needed.
std::string csv_escape(std::string_view cell);

}  // namespace tessera::node_model
