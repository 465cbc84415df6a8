#include "tools/common/json.h"

#include <cstdlib>

namespace braid {

const JsonValue* JsonValue::find(const std::string& key) const {
  for (const auto& m : members) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

std::string JsonValue::show() const {
  switch (kind) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return boolean ? "true" : "false";
    case Kind::kNumber:
      return text;
    case Kind::kString:
      return "\"" + text + "\"";
    case Kind::kArray:
      return "[...]";
    case Kind::kObject:
      return "{...}";
  }
  return "?";
}

namespace {

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}

  bool parseDocument(JsonValue* out, std::string* error) {
    skipSpace();
    if (!parseValue(out, 0)) return fail(error);
    skipSpace();
    if (pos_ != s_.size()) {
      what_ = "unexpected text after the top-level value";
      return fail(error);
    }
    return true;
  }

 private:
  static constexpr int kMaxDepth = 64;

  bool fail(std::string* error) {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    *error = "line " + std::to_string(line) + ", column " + std::to_string(col) + ": " + what_;
    return false;
  }

  void skipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }

  bool literal(const char* word) {
    size_t n = 0;
    while (word[n] != '\0') ++n;
    if (s_.compare(pos_, n, word) != 0) return false;
    pos_ += n;
    return true;
  }

  bool parseValue(JsonValue* v, int depth) {
    if (depth > kMaxDepth) {
      what_ = "nesting deeper than 64 levels";
      return false;
    }
    if (pos_ >= s_.size()) {
      what_ = "unexpected end of input";
      return false;
    }
    const char c = s_[pos_];
    if (c == '{') return parseObject(v, depth);
    if (c == '[') return parseArray(v, depth);
    if (c == '"') {
      v->kind = JsonValue::Kind::kString;
      return parseString(&v->text);
    }
    if (literal("true")) {
      v->kind = JsonValue::Kind::kBool;
      v->boolean = true;
      return true;
    }
    if (literal("false")) {
      v->kind = JsonValue::Kind::kBool;
      return true;
    }
    if (literal("null")) return true;
    if (c == '-' || (c >= '0' && c <= '9')) return parseNumber(v);
    what_ = std::string("unexpected character '") + c + "'";
    return false;
  }

  bool parseNumber(JsonValue* v) {
    const size_t start = pos_;
    if (s_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t d = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ > d;
    };
    if (!digits()) {
      what_ = "a number needs digits";
      return false;
    }
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (!digits()) {
        what_ = "a number needs digits after '.'";
        return false;
      }
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (!digits()) {
        what_ = "a number needs digits in its exponent";
        return false;
      }
    }
    v->kind = JsonValue::Kind::kNumber;
    v->text = s_.substr(start, pos_ - start);
    v->number = std::strtod(v->text.c_str(), nullptr);
    return true;
  }

  bool parseString(std::string* out) {
    ++pos_;  // opening quote
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\\') {
        if (pos_ >= s_.size()) break;
        const char e = s_[pos_++];
        switch (e) {
          case 'n':
            c = '\n';
            break;
          case 't':
            c = '\t';
            break;
          case 'r':
            c = '\r';
            break;
          case 'b':
            c = '\b';
            break;
          case 'f':
            c = '\f';
            break;
          case '"':
          case '\\':
          case '/':
            c = e;
            break;
          default:
            // \uXXXX is not needed by any config key or value braid-train accepts.
            what_ = std::string("unsupported escape '\\") + e + "'";
            return false;
        }
      }
      out->push_back(c);
    }
    if (pos_ >= s_.size()) {
      what_ = "unterminated string";
      return false;
    }
    ++pos_;
    return true;
  }

  bool parseArray(JsonValue* v, int depth) {
    v->kind = JsonValue::Kind::kArray;
    ++pos_;
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    for (;;) {
      skipSpace();
      v->items.emplace_back();
      if (!parseValue(&v->items.back(), depth + 1)) return false;
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == ']') {
        ++pos_;
        return true;
      }
      what_ = "expected ',' or ']' in an array";
      return false;
    }
  }

  bool parseObject(JsonValue* v, int depth) {
    v->kind = JsonValue::Kind::kObject;
    ++pos_;
    skipSpace();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    for (;;) {
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '"') {
        what_ = "expected a quoted key";
        return false;
      }
      std::string key;
      if (!parseString(&key)) return false;
      if (v->find(key) != nullptr) {
        what_ = "duplicate key \"" + key + "\"";
        return false;
      }
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != ':') {
        what_ = "expected ':' after key \"" + key + "\"";
        return false;
      }
      ++pos_;
      skipSpace();
      JsonValue value;
      if (!parseValue(&value, depth + 1)) return false;
      v->members.emplace_back(std::move(key), std::move(value));
      skipSpace();
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < s_.size() && s_[pos_] == '}') {
        ++pos_;
        return true;
      }
      what_ = "expected ',' or '}' in an object";
      return false;
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string what_;
};

}  // namespace

bool parseJson(const std::string& text, JsonValue* out, std::string* error) {
  *out = JsonValue();
  return Parser(text).parseDocument(out, error);
}

}  // namespace braid
