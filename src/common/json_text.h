// Writing JSON text: the library's flight recorder dumps and the perf tools' reports quote strings the same way.
#pragma once

#include <string>

namespace braid {

// `s` as a JSON string literal: quoted, with '"', '\\' and newlines escaped and other control characters as \u00XX.
std::string jsonQuote(const std::string& s);

}  // namespace braid
