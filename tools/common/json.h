// A small JSON reader for the tools: braid-train's DeepSpeed-style config and braid-info's flight recorder dumps. It
// keeps what a config needs: objects, arrays, numbers (as double), strings, true/false/null. Errors name the line and
// column.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace braid {

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0.0;
  std::string text;  // kString: the value; kNumber: the literal as written (for messages)
  std::vector<JsonValue> items;
  // Objects keep their keys in file order so that errors name the first unknown key the user wrote.
  std::vector<std::pair<std::string, JsonValue>> members;

  const JsonValue* find(const std::string& key) const;
  // The value as the user wrote it, for error messages ("5e8", "\"auto\"", "true", "{...}").
  std::string show() const;
};

// Parses `text`; on failure returns false and sets *error to "line L, column C: what".
bool parseJson(const std::string& text, JsonValue* out, std::string* error);

}  // namespace braid
