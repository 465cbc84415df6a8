#include "transports/net/ibverbs/ib_hca.h"

#include <cstdlib>

namespace braid {
namespace net {
namespace ib {

Result<IbHcaSpec> parseIbHca(const std::string& text) {
  IbHcaSpec spec;
  std::string s = text;
  if (!s.empty() && s[0] == '^') {
    spec.exclude = true;
    s = s.substr(1);
  }
  if (!s.empty() && s[0] == '=') {
    spec.exact = true;
    s = s.substr(1);
  }
  size_t pos = 0;
  while (pos <= s.size() && !s.empty()) {
    size_t comma = s.find(',', pos);
    std::string tok = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!tok.empty()) {
      IbHcaEntry e;
      size_t colon = tok.find(':');
      e.name = tok.substr(0, colon);
      if (colon != std::string::npos) {
        // NCCL also accepts hca:port:rail:plane; braid uses the port and ignores the rest.
        std::string port = tok.substr(colon + 1);
        port = port.substr(0, port.find(':'));
        char* end = nullptr;
        long p = strtol(port.c_str(), &end, 10);
        if (port.empty() || *end != '\0' || p < 1 || p > 255) {
          return invalidArgument("NCCL_IB_HCA=\"%s\": port \"%s\" of \"%s\" is not a number in 1..255", text.c_str(),
                                 port.c_str(), tok.c_str());
        }
        e.port = static_cast<int>(p);
      }
      if (e.name.empty())
        return invalidArgument("NCCL_IB_HCA=\"%s\": entry \"%s\" has no HCA name", text.c_str(), tok.c_str());
      spec.entries.push_back(e);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return spec;
}

bool matchIbHca(const IbHcaSpec& spec, const std::string& device, int port) {
  if (spec.entries.empty()) return true;
  bool matched = false;
  for (const IbHcaEntry& e : spec.entries) {
    bool nameOk = spec.exact ? device == e.name : device.compare(0, e.name.size(), e.name) == 0;
    if (nameOk && (e.port < 0 || e.port == port)) matched = true;
  }
  return spec.exclude ? !matched : matched;
}

}  // namespace ib
}  // namespace net
}  // namespace braid
