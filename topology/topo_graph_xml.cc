// NCCL's graph XML (NCCL_GRAPH_DUMP_FILE / NCCL_GRAPH_FILE) and the GRAPH log description of a searched graph.
#include <cerrno>
#include <cstdlib>

#include "topology/topo_search.h"

namespace braid {

namespace {

std::string fmtBw(double bw) {
  return strPrintf("%g", bw);
}

class GraphReader {
 public:
  GraphReader(const std::string& source, const TopoGraph& g) : source_(source), g_(g) {}

  Status err(const XmlNode& e, const std::string& what) const { return xmlElementError(source_, e, what); }

  Status intAttr(const XmlNode& e, const char* key, int64_t fallback, bool required, int64_t* out) const {
    return xmlIntAttr(source_, e, key, required, fallback, out);
  }

  Status bwAttr(const XmlNode& e, const char* key, double* out) const {
    const std::string* v = e.attr(key);
    if (!v) return err(e, std::string("missing attribute '") + key + "'");
    char* end = nullptr;
    double x = strtod(v->c_str(), &end);
    if (v->empty() || *end != '\0' || !(x >= 0) || x > 1e6) {
      return err(e, std::string(key) + "=\"" + *v + "\" is not a bandwidth");
    }
    *out = x;
    return Status::ok();
  }

  Status typeAttr(const XmlNode& e, const char* key, PathType* out) const {
    const std::string* v = e.attr(key);
    if (!v) {
      *out = PathType::kLoc;
      return Status::ok();
    }
    auto t = parsePathType(*v);
    if (!t.isOk()) return err(e, t.status().message());
    *out = t.value();
    return Status::ok();
  }

  Status readGraph(const XmlNode& e, SearchedGraph* out) const {
    int64_t v = 0;
    BRAID_RETURN_IF_ERROR(intAttr(e, "id", 0, true, &v));
    if (v < 0 || v > 4) return err(e, "id " + std::to_string(v) + " is not a graph id (0-4)");
    out->id = static_cast<GraphId>(v);
    BRAID_RETURN_IF_ERROR(intAttr(e, "pattern", 4, true, &v));
    if (v < 1 || v > 6) return err(e, "pattern " + std::to_string(v) + " is not a pattern (1-6)");
    out->pattern = static_cast<GraphPattern>(v);
    BRAID_RETURN_IF_ERROR(intAttr(e, "crossnic", 0, false, &v));
    out->crossNic = static_cast<int>(v);
    int64_t n = 0;
    BRAID_RETURN_IF_ERROR(intAttr(e, "nchannels", 0, true, &n));
    BRAID_RETURN_IF_ERROR(bwAttr(e, "speedintra", &out->bwIntra));
    BRAID_RETURN_IF_ERROR(bwAttr(e, "speedinter", &out->bwInter));
    BRAID_RETURN_IF_ERROR(typeAttr(e, "typeintra", &out->typeIntra));
    BRAID_RETURN_IF_ERROR(typeAttr(e, "typeinter", &out->typeInter));
    BRAID_RETURN_IF_ERROR(intAttr(e, "samechannels", 1, false, &v));
    out->sameChannels = v != 0;
    size_t nGpus = g_.nodesOf(NodeType::kGpu).size();
    for (const auto& c : e.children) {
      if (c->name != "channel") continue;
      TopoChannel ch;
      std::vector<char> seen(nGpus, 0);
      for (const auto& x : c->children) {
        int64_t dev = 0;
        BRAID_RETURN_IF_ERROR(intAttr(*x, "dev", 0, true, &dev));
        if (x->name == "gpu") {
          int idx = -1;
          for (int i : g_.nodesOf(NodeType::kGpu)) {
            if (g_.node(i).dev == dev) idx = i;
          }
          if (idx < 0) return err(*x, "GPU dev " + std::to_string(dev) + " is not in the topology");
          size_t k = 0;
          while (g_.nodesOf(NodeType::kGpu)[k] != idx) ++k;
          if (seen[k]) return err(*x, "GPU dev " + std::to_string(dev) + " appears twice in one channel");
          seen[k] = 1;
          ch.gpus.push_back(static_cast<int>(dev));
        } else if (x->name == "net") {
          if (g_.findNode(NodeType::kNet, dev) < 0) {
            return err(*x, "NET dev " + std::to_string(dev) + " is not in the topology");
          }
          if (ch.gpus.empty()) {
            if (ch.netIn >= 0) return err(*x, "two NETs before the first GPU");
            ch.netIn = static_cast<int>(dev);
          } else {
            if (ch.netOut >= 0) return err(*x, "two NETs after the GPUs");
            ch.netOut = static_cast<int>(dev);
          }
        }
      }
      if (ch.gpus.size() != nGpus) {
        return err(*c, strPrintf("channel has %zu GPUs, the topology %zu", ch.gpus.size(), nGpus));
      }
      out->interNode = ch.netIn >= 0;
      out->channels.push_back(ch);
    }
    if (n != static_cast<int64_t>(out->channels.size())) {
      return err(
          e, strPrintf("nchannels=%lld but %zu <channel> elements", static_cast<long long>(n), out->channels.size()));
    }
    out->nChannels = static_cast<int>(n);
    return Status::ok();
  }

 private:
  const std::string& source_;
  const TopoGraph& g_;
};

}  // namespace

std::unique_ptr<XmlNode> graphsToXml(const std::vector<const SearchedGraph*>& graphs) {
  auto root = std::make_unique<XmlNode>();
  root->name = "graphs";
  root->setAttr("version", "1");
  for (const SearchedGraph* gr : graphs) {
    XmlNode* e = root->addChild("graph");
    e->setAttr("id", std::to_string(static_cast<int>(gr->id)));
    e->setAttr("pattern", std::to_string(static_cast<int>(gr->pattern)));
    e->setAttr("crossnic", std::to_string(gr->crossNic));
    e->setAttr("nchannels", std::to_string(gr->nChannels));
    e->setAttr("speedintra", fmtBw(gr->bwIntra));
    e->setAttr("speedinter", fmtBw(gr->bwInter));
    e->setAttr("latencyinter", "0");
    e->setAttr("typeintra", pathTypeName(gr->typeIntra));
    e->setAttr("typeinter", pathTypeName(gr->typeInter));
    e->setAttr("samechannels", gr->sameChannels ? "1" : "0");
    for (const TopoChannel& ch : gr->channels) {
      XmlNode* c = e->addChild("channel");
      if (ch.netIn >= 0) c->addChild("net")->setAttr("dev", std::to_string(ch.netIn));
      for (int dev : ch.gpus) c->addChild("gpu")->setAttr("dev", std::to_string(dev));
      if (ch.netOut >= 0) c->addChild("net")->setAttr("dev", std::to_string(ch.netOut));
    }
  }
  return root;
}

Result<std::vector<SearchedGraph>> graphsFromXml(const XmlNode& root, const std::string& source, const TopoGraph& g) {
  GraphReader r(source, g);
  if (root.name != "graphs") return r.err(root, "root element must be <graphs>");
  const std::string* version = root.attr("version");
  if (version && *version != "1") return r.err(root, "unsupported version '" + *version + "' (expected 1)");
  std::vector<SearchedGraph> out;
  for (const auto& c : root.children) {
    if (c->name != "graph") continue;
    SearchedGraph gr;
    BRAID_RETURN_IF_ERROR(r.readGraph(*c, &gr));
    out.push_back(std::move(gr));
  }
  return out;
}

std::string describeGraph(const SearchedGraph& gr) {
  std::string out = strPrintf("Pattern %d, crossNic %d, nChannels %d, bw %.1f/%.1f, type %s/%s, sameChannels %d\n",
                              static_cast<int>(gr.pattern), gr.crossNic, gr.nChannels, gr.bwIntra, gr.bwInter,
                              pathTypeName(gr.typeIntra), pathTypeName(gr.typeInter), gr.sameChannels ? 1 : 0);
  for (size_t c = 0; c < gr.channels.size(); ++c) {
    const TopoChannel& ch = gr.channels[c];
    out += strPrintf(" %2zu :", c);
    if (ch.netIn >= 0) out += strPrintf(" NET/%d", ch.netIn);
    for (int dev : ch.gpus) out += strPrintf(" GPU/%d", dev);
    if (ch.netOut >= 0) out += strPrintf(" NET/%d", ch.netOut);
    out += "\n";
  }
  return out;
}

}  // namespace braid
