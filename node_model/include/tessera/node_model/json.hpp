#pragma once
// A tiny JSON reader for the flat configuration files the node model reads
// (NeuSight device configs, HuggingFace model configs, measurement labels).
// Not a general-purpose library: no streaming, numbers are doubles.
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tessera::node_model {

class JsonValue {
 public:
  using Array = std::vector<JsonValue>;
  using Object = std::map<std::string, JsonValue, std::less<>>;

  JsonValue() = default;
  explicit JsonValue(bool b) : v_(b) {}
  explicit JsonValue(double d) : v_(d) {}
  explicit JsonValue(std::string s) : v_(std::move(s)) {}
  explicit JsonValue(Array a) : v_(std::make_shared<Array>(std::move(a))) {}
  explicit JsonValue(Object o) : v_(std::make_shared<Object>(std::move(o))) {}

  [[nodiscard]] bool is_null() const { return std::holds_alternative<std::monostate>(v_); }
  [[nodiscard]] bool is_number() const { return std::holds_alternative<double>(v_); }
  [[nodiscard]] bool is_string() const { return std::holds_alternative<std::string>(v_); }
  [[nodiscard]] bool is_bool() const { return std::holds_alternative<bool>(v_); }
  [[nodiscard]] bool is_object() const { return std::holds_alternative<std::shared_ptr<Object>>(v_); }
  [[nodiscard]] bool is_array() const { return std::holds_alternative<std::shared_ptr<Array>>(v_); }

  [[nodiscard]] double number() const { return std::get<double>(v_); }
  [[nodiscard]] const std::string& string() const { return std::get<std::string>(v_); }
  [[nodiscard]] bool boolean() const { return std::get<bool>(v_); }
  [[nodiscard]] const Object& object() const { return *std::get<std::shared_ptr<Object>>(v_); }
  [[nodiscard]] const Array& array() const { return *std::get<std::shared_ptr<Array>>(v_); }
  /// Member of an object, or nullptr when absent (or this is not an object).
  [[nodiscard]] const JsonValue* find(std::string_view key) const;

 private:
  std::variant<std::monostate, bool, double, std::string, std::shared_ptr<Array>,
               std::shared_ptr<Object>>
      v_;
};

/// Parses `text`; throws InputError "<source>: line L, column C: <why>".
JsonValue parse_json(std::string_view text, std::string_view source);
/// Reads and parses a file; throws InputError naming it.
JsonValue read_json_file(const std::string& path);

/// Reads a whole file; throws InputError naming it when it cannot be opened.
std::string read_text_file(const std::string& path);

}  // namespace tessera::node_model
