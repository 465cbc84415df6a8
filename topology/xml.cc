#include "topology/xml.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace braid {

const std::string* XmlNode::attr(const std::string& key) const {
  for (const auto& kv : attrs) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

std::string XmlNode::attrOr(const std::string& key, const std::string& fallback) const {
  const std::string* v = attr(key);
  return v ? *v : fallback;
}

void XmlNode::setAttr(const std::string& key, std::string value) {
  for (auto& kv : attrs) {
    if (kv.first == key) {
      kv.second = std::move(value);
      return;
    }
  }
  attrs.emplace_back(key, std::move(value));
}

XmlNode* XmlNode::addChild(std::string childName) {
  children.push_back(std::make_unique<XmlNode>());
  children.back()->name = std::move(childName);
  return children.back().get();
}

XmlNode* XmlNode::findChild(const std::string& childName, const std::string& key, const std::string& value) const {
  for (const auto& c : children) {
    if (c->name != childName) continue;
    if (key.empty()) return c.get();
    const std::string* v = c->attr(key);
    if (v && *v == value) return c.get();
  }
  return nullptr;
}

std::unique_ptr<XmlNode> XmlNode::clone() const {
  auto n = std::make_unique<XmlNode>();
  n->name = name;
  n->attrs = attrs;
  n->line = line;
  for (const auto& c : children) n->children.push_back(c->clone());
  return n;
}

namespace {

// A recursive-descent reader over the whole text. Recursion depth is bounded by kMaxXmlDepth.
class Parser {
 public:
  Parser(const std::string& text, const std::string& source) : s_(text), source_(source) {}

  Result<std::unique_ptr<XmlNode>> parseDocument() {
    BRAID_RETURN_IF_ERROR(skipMisc(true));
    if (pos_ >= s_.size()) return error("", "no root element");
    if (s_[pos_] != '<') return error("", "expected '<' to open the root element");
    std::unique_ptr<XmlNode> root;
    BRAID_RETURN_IF_ERROR(parseElement(&root, 1));
    BRAID_RETURN_IF_ERROR(skipMisc(false));
    if (pos_ < s_.size()) return error(root->name, "unexpected content after the root element");
    return root;
  }

 private:
  Status error(const std::string& element, const std::string& what) const {
    if (element.empty()) return invalidArgument("%s:%d: %s", source_.c_str(), line_, what.c_str());
    return invalidArgument("%s:%d: <%s>: %s", source_.c_str(), line_, element.c_str(), what.c_str());
  }

  void advance(size_t n = 1) {
    for (size_t i = 0; i < n && pos_ < s_.size(); ++i) {
      if (s_[pos_] == '\n') ++line_;
      ++pos_;
    }
  }
  bool startsWith(const char* lit) const { return s_.compare(pos_, strlen(lit), lit) == 0; }
  void skipSpace() {
    while (pos_ < s_.size() && isspace(static_cast<unsigned char>(s_[pos_]))) advance();
  }

  // Skips whitespace, comments and (before the root only) the XML declaration.
  Status skipMisc(bool allowDecl) {
    for (;;) {
      skipSpace();
      if (startsWith("<!--")) {
        size_t end = s_.find("-->", pos_ + 4);
        if (end == std::string::npos) return error("", "unterminated comment");
        advance(end + 3 - pos_);
      } else if (allowDecl && startsWith("<?xml")) {
        size_t end = s_.find("?>", pos_);
        if (end == std::string::npos) return error("", "unterminated XML declaration");
        advance(end + 2 - pos_);
        allowDecl = false;
      } else if (startsWith("<?") || startsWith("<!")) {
        return error("", "unsupported markup (DOCTYPE, CDATA or processing instruction)");
      } else {
        return Status::ok();
      }
    }
  }

  static bool nameChar(char c) {
    return isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' || c == ':';
  }
  std::string readName() {
    size_t start = pos_;
    while (pos_ < s_.size() && nameChar(s_[pos_])) advance();
    return s_.substr(start, pos_ - start);
  }

  // Decodes entities of an attribute value.
  Status decode(const std::string& raw, const std::string& element, std::string* out) const {
    out->clear();
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '&') {
        out->push_back(raw[i]);
        continue;
      }
      size_t semi = raw.find(';', i);
      if (semi == std::string::npos || semi - i > 10) return error(element, "bad entity in attribute value");
      std::string ent = raw.substr(i + 1, semi - i - 1);
      if (ent == "amp") {
        out->push_back('&');
      } else if (ent == "lt") {
        out->push_back('<');
      } else if (ent == "gt") {
        out->push_back('>');
      } else if (ent == "quot") {
        out->push_back('"');
      } else if (ent == "apos") {
        out->push_back('\'');
      } else if (ent.size() >= 2 && ent[0] == '#') {
        char* end = nullptr;
        errno = 0;
        long code = ent[1] == 'x' ? strtol(ent.c_str() + 2, &end, 16) : strtol(ent.c_str() + 1, &end, 10);
        if (errno != 0 || *end != '\0' || code <= 0 || code > 127) {
          return error(element, "unsupported character reference &" + ent + ";");
        }
        out->push_back(static_cast<char>(code));
      } else {
        return error(element, "unknown entity &" + ent + ";");
      }
      i = semi;
    }
    return Status::ok();
  }

  Status parseElement(std::unique_ptr<XmlNode>* out, int depth) {
    if (depth > kMaxXmlDepth) return error("", "elements nested deeper than " + std::to_string(kMaxXmlDepth));
    if (++elements_ > kMaxXmlElements) return error("", "more than " + std::to_string(kMaxXmlElements) + " elements");
    auto node = std::make_unique<XmlNode>();
    node->line = line_;
    advance();  // '<'
    node->name = readName();
    if (node->name.empty()) return error("", "expected an element name after '<'");
    // Attributes.
    for (;;) {
      size_t before = pos_;
      skipSpace();
      if (pos_ >= s_.size()) return error(node->name, "unexpected end of file inside the start tag");
      if (startsWith("/>")) {
        advance(2);
        *out = std::move(node);
        return Status::ok();
      }
      if (s_[pos_] == '>') {
        advance();
        break;
      }
      if (pos_ == before) return error(node->name, "expected whitespace before an attribute");
      std::string key = readName();
      if (key.empty()) return error(node->name, std::string("unexpected character '") + s_[pos_] + "' in start tag");
      skipSpace();
      if (pos_ >= s_.size() || s_[pos_] != '=') return error(node->name, "attribute '" + key + "' has no '='");
      advance();
      skipSpace();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) {
        return error(node->name, "attribute '" + key + "' value is not quoted");
      }
      char quote = s_[pos_];
      advance();
      size_t end = s_.find(quote, pos_);
      if (end == std::string::npos) return error(node->name, "attribute '" + key + "' value is not terminated");
      std::string raw = s_.substr(pos_, end - pos_);
      if (raw.find('<') != std::string::npos) return error(node->name, "'<' inside attribute '" + key + "'");
      advance(end + 1 - pos_);
      if (node->hasAttr(key)) return error(node->name, "duplicate attribute '" + key + "'");
      std::string value;
      BRAID_RETURN_IF_ERROR(decode(raw, node->name, &value));
      node->attrs.emplace_back(std::move(key), std::move(value));
    }
    // Content: children, comments, ignored text, then the end tag.
    for (;;) {
      while (pos_ < s_.size() && s_[pos_] != '<') advance();
      if (pos_ >= s_.size()) return error(node->name, "missing end tag </" + node->name + ">");
      if (startsWith("<!--")) {
        size_t end = s_.find("-->", pos_ + 4);
        if (end == std::string::npos) return error(node->name, "unterminated comment");
        advance(end + 3 - pos_);
      } else if (startsWith("</")) {
        advance(2);
        std::string closing = readName();
        skipSpace();
        if (pos_ >= s_.size() || s_[pos_] != '>') return error(node->name, "malformed end tag");
        if (closing != node->name) return error(node->name, "end tag </" + closing + "> does not match");
        advance();
        *out = std::move(node);
        return Status::ok();
      } else if (startsWith("<!") || startsWith("<?")) {
        return error(node->name, "unsupported markup inside the element");
      } else {
        std::unique_ptr<XmlNode> child;
        BRAID_RETURN_IF_ERROR(parseElement(&child, depth + 1));
        node->children.push_back(std::move(child));
      }
    }
  }

  const std::string& s_;
  const std::string& source_;
  size_t pos_ = 0;
  int line_ = 1;
  int elements_ = 0;
};

void escapeInto(const std::string& v, std::string* out) {
  for (char c : v) {
    switch (c) {
      case '&':
        *out += "&amp;";
        break;
      case '<':
        *out += "&lt;";
        break;
      case '>':
        *out += "&gt;";
        break;
      case '"':
        *out += "&quot;";
        break;
      default:
        out->push_back(c);
    }
  }
}

void writeNode(const XmlNode& n, int depth, std::string* out) {
  out->append(static_cast<size_t>(depth) * 2, ' ');
  *out += "<" + n.name;
  for (const auto& kv : n.attrs) {
    *out += " " + kv.first + "=\"";
    escapeInto(kv.second, out);
    *out += "\"";
  }
  if (n.children.empty()) {
    *out += "/>\n";
    return;
  }
  *out += ">\n";
  for (const auto& c : n.children) writeNode(*c, depth + 1, out);
  out->append(static_cast<size_t>(depth) * 2, ' ');
  *out += "</" + n.name + ">\n";
}

}  // namespace

Result<std::unique_ptr<XmlNode>> parseXml(const std::string& text, const std::string& source) {
  Parser p(text, source);
  return p.parseDocument();
}

Result<std::unique_ptr<XmlNode>> parseXmlFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return errnoError(errno, "cannot open XML file %s", path.c_str());
  std::stringstream ss;
  ss << in.rdbuf();
  return parseXml(ss.str(), path);
}

std::string writeXml(const XmlNode& root) {
  std::string out;
  writeNode(root, 0, &out);
  return out;
}

Status writeXmlFile(const XmlNode& root, const std::string& path) {
  FILE* f = fopen(path.c_str(), "w");
  if (!f) return errnoError(errno, "cannot write %s", path.c_str());
  std::string text = writeXml(root);
  size_t n = fwrite(text.data(), 1, text.size(), f);
  int rc = fclose(f);
  if (n != text.size() || rc != 0) return errnoError(errno, "short write to %s", path.c_str());
  return Status::ok();
}

Status xmlElementError(const std::string& source, const XmlNode& e, const std::string& what) {
  return invalidArgument("%s:%d: <%s>: %s", source.c_str(), e.line, e.name.c_str(), what.c_str());
}

Status xmlIntAttr(const std::string& source, const XmlNode& e, const char* key, bool required, int64_t fallback,
                  int64_t* out) {
  const std::string* v = e.attr(key);
  if (!v) {
    if (required) return xmlElementError(source, e, std::string("missing attribute '") + key + "'");
    *out = fallback;
    return Status::ok();
  }
  errno = 0;
  char* end = nullptr;
  long long x = strtoll(v->c_str(), &end, 0);
  if (v->empty() || errno != 0 || *end != '\0') {
    return xmlElementError(source, e, std::string("attribute ") + key + "=\"" + *v + "\" is not an integer");
  }
  *out = x;
  return Status::ok();
}

}  // namespace braid
