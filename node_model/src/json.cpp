#include "tessera/node_model/json.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include "tessera/error.hpp"
#include "tessera/files.hpp"

namespace tessera::node_model {

const JsonValue* JsonValue::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  const auto& o = object();
  auto it = o.find(key);
  return it == o.end() ? nullptr : &it->second;
}

namespace {

class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : s_(text), source_(source) {}

  JsonValue parse_document() {
    // A UTF-8 byte-order mark (Windows editors write one) is read past, as
    // the CSV readers do (helper 116: "unexpected character '\xEF'").
    if (s_.substr(0, 3) == "\xEF\xBB\xBF") i_ = 3;
    skip_ws();
    JsonValue v = parse_value(0);
    skip_ws();
    if (i_ != s_.size()) fail("unexpected trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(std::string_view why) const {
    int line = 1;
    int col = 1;
    for (std::size_t j = 0; j < i_ && j < s_.size(); ++j) {
      if (s_[j] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw InputError(fmt::format("{}: line {}, column {}: malformed JSON: {}", source_, line, col, why));
  }
  void skip_ws() {
    while (i_ < s_.size() && (std::isspace(static_cast<unsigned char>(s_[i_])) != 0)) ++i_;
  }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void expect(char c) {
    if (peek() != c) fail(fmt::format("expected '{}'", c));
    ++i_;
  }

  JsonValue parse_value(int depth) {
    if (depth > 64) fail("nesting too deep");
    skip_ws();
    const char c = peek();
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return JsonValue(parse_string());
    if (c == 't' && s_.substr(i_, 4) == "true") { i_ += 4; return JsonValue(true); }
    if (c == 'f' && s_.substr(i_, 5) == "false") { i_ += 5; return JsonValue(false); }
    if (c == 'n' && s_.substr(i_, 4) == "null") { i_ += 4; return JsonValue(); }
    if (c == 'N' && s_.substr(i_, 3) == "NaN") { i_ += 3; return JsonValue(std::nan("")); }
    if (c == '-' || (std::isdigit(static_cast<unsigned char>(c)) != 0)) return JsonValue(parse_number());
    if (c == '\0') fail("unexpected end of input");
    // A byte that prints as no character is named by its value, so that the
    // one-line error stays text (helper 116: a raw \x01 on the terminal).
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7F) fail(fmt::format("unexpected byte 0x{:02X} (not JSON text)", byte));
    fail(fmt::format("unexpected character '{}'", c));
  }

  double parse_number() {
    const std::size_t start = i_;
    if (peek() == '-') ++i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) != 0 || s_[i_] == '.' ||
                              s_[i_] == 'e' || s_[i_] == 'E' || s_[i_] == '+' || s_[i_] == '-')) {
      ++i_;
    }
    const std::string num(s_.substr(start, i_ - start));
    char* end = nullptr;
    const double v = std::strtod(num.c_str(), &end);
    if (end != num.c_str() + num.size()) {
      i_ = start;
      fail(fmt::format("bad number '{}'", num));
    }
    return v;
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') break;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated string");
      const char e = s_[i_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          unsigned cp = hex4();
          // A UTF-16 surrogate pair is one code point; a lone half is malformed.
          if (cp >= 0xDC00 && cp <= 0xDFFF) fail("bad \\u escape: unpaired low surrogate");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (i_ + 2 > s_.size() || s_[i_] != '\\' || s_[i_ + 1] != 'u') {
              fail("bad \\u escape: unpaired high surrogate");
            }
            i_ += 2;
            const unsigned low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("bad \\u escape: unpaired high surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          if (cp < 0x80) {
            out += static_cast<char>(cp);
          } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
          }
          break;
        }
        default: out += e; break;
      }
    }
    return out;
  }

  /// Four hex digits of a \\u escape (anything else is malformed).
  unsigned hex4() {
    if (i_ + 4 > s_.size()) fail("bad \\u escape: expected 4 hex digits");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_ + static_cast<std::size_t>(k)];
      if (std::isxdigit(static_cast<unsigned char>(h)) == 0) fail("bad \\u escape: expected 4 hex digits");
      v = v * 16 + static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(h)) != 0
                                             ? h - '0'
                                             : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10);
    }
    i_ += 4;
    return v;
  }

  JsonValue parse_array(int depth) {
    expect('[');
    JsonValue::Array a;
    skip_ws();
    if (peek() == ']') { ++i_; return JsonValue(std::move(a)); }
    while (true) {
      a.push_back(parse_value(depth + 1));
      skip_ws();
      if (peek() == ',') { ++i_; continue; }
      if (peek() == ']') { ++i_; break; }
      fail("expected ',' or ']'");
    }
    return JsonValue(std::move(a));
  }

  JsonValue parse_object(int depth) {
    expect('{');
    JsonValue::Object o;
    skip_ws();
    if (peek() == '}') { ++i_; return JsonValue(std::move(o)); }
    while (true) {
      skip_ws();
      if (peek() != '"') fail("expected a key string");
      const std::size_t key_at = i_;
      std::string key = parse_string();
      skip_ws();
      expect(':');
      if (o.count(key) != 0U) {
        i_ = key_at;
        fail(fmt::format("duplicate key \"{}\"", key));
      }
      o[key] = parse_value(depth + 1);
      skip_ws();
      if (peek() == ',') { ++i_; continue; }
      if (peek() == '}') { ++i_; break; }
      fail("expected ',' or '}'");
    }
    return JsonValue(std::move(o));
  }

  std::string_view s_;
  std::string_view source_;
  std::size_t i_ = 0;
};

}  // namespace

JsonValue parse_json(std::string_view text, std::string_view source) {
  return Parser(text, source).parse_document();
}

std::string read_text_file(const std::string& path) { return read_input_file(path, "file"); }

JsonValue read_json_file(const std::string& path) { return parse_json(read_text_file(path), path); }

}  // namespace tessera::node_model
