// A small XML document model for NCCL's topology and graph files (and nothing else).
//
// The subset: elements with attributes, nested elements, self-closing tags, comments, an optional <?xml ...?>
// declaration, the five predefined entities (&amp; &lt; &gt; &quot; &apos;) and numeric character references.
// Text content between elements is ignored (NCCL's files carry none); DOCTYPE, CDATA and processing instructions
// other than the declaration are rejected. Every element remembers the line it started on, so a consumer can report
// "file:line: <element>: problem".
//
// Parsing never throws and never crashes on any input: a malformed document gives an invalidArgument Status whose
// message names the file, the line and the element being read. Depth and size are bounded (kMaxXmlDepth,
// kMaxXmlElements) so hostile inputs cannot exhaust the stack or memory.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "src/common/status.h"

namespace braid {

constexpr int kMaxXmlDepth = 64;
constexpr int kMaxXmlElements = 1 << 20;

struct XmlNode {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;  // in document order; names are unique
  std::vector<std::unique_ptr<XmlNode>> children;
  int line = 0;  // 1-based line of the '<' that opened the element (0 for nodes built in memory)

  // Attribute value, or nullptr when absent.
  const std::string* attr(const std::string& key) const;
  std::string attrOr(const std::string& key, const std::string& fallback) const;
  bool hasAttr(const std::string& key) const { return attr(key) != nullptr; }
  // Sets (replacing or appending) an attribute.
  void setAttr(const std::string& key, std::string value);
  // Appends a child element and returns it.
  XmlNode* addChild(std::string childName);
  // First child with this element name and, when key is non-empty, attribute key == value; nullptr if none.
  XmlNode* findChild(const std::string& childName, const std::string& key = "", const std::string& value = "") const;
  std::unique_ptr<XmlNode> clone() const;
};

// Parses text; `source` names the input in error messages (a path, or "<string>"). Returns the root element.
Result<std::unique_ptr<XmlNode>> parseXml(const std::string& text, const std::string& source);
// Reads and parses a file; an unreadable file is a systemError naming the path.
Result<std::unique_ptr<XmlNode>> parseXmlFile(const std::string& path);

// An error about element e of the document `source`, in the form every reader reports: "source:line: <name>: what".
Status xmlElementError(const std::string& source, const XmlNode& e, const std::string& what);
// Integer attribute `key` of e (decimal, or hex with 0x). Absent: *out = fallback, or an error when required.
Status xmlIntAttr(const std::string& source, const XmlNode& e, const char* key, bool required, int64_t fallback,
                  int64_t* out);

// Serialises with two-space indentation, attributes in stored order, self-closing empty elements.
std::string writeXml(const XmlNode& root);
Status writeXmlFile(const XmlNode& root, const std::string& path);

}  // namespace braid
