// Fuzz target for the topology and graph XML readers: any input must give a value or an error, never a crash,
// hang or leak. Built three ways: as a libFuzzer target (clang, BRAID_FUZZ=ON), and into braid_fuzz_replay, which
// replays tests/fixtures/fuzz_corpus/ with the normal compiler in CI (ctest topo_fuzz_corpus).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "topology/topo.h"
#include "topology/topo_search.h"

namespace {

// A small topology to check graph files against (2 GPUs, 1 NIC).
const braid::TopoGraph& referenceTopology() {
  static const braid::TopoGraph* g = [] {
    auto xml = braid::parseXml(
        "<system version=\"1\"><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\" class=\"0x060400\" link_speed=\"16.0 "
        "GT/s PCIe\" link_width=\"16\"><pci busid=\"0000:02:00.0\" class=\"0x030200\"><gpu dev=\"0\" sm=\"80\"/></pci>"
        "<pci busid=\"0000:03:00.0\" class=\"0x030200\"><gpu dev=\"1\" sm=\"80\"/></pci><pci busid=\"0000:04:00.0\" "
        "class=\"0x020000\"><nic><net dev=\"0\" speed=\"100000\"/></nic></pci></pci></cpu></system>",
        "reference");
    if (!xml.isOk()) abort();
    auto graph = braid::TopoGraph::fromXml(*xml.value(), "reference");
    if (!graph.isOk()) abort();
    return new braid::TopoGraph(graph.take());
  }();
  return *g;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1 << 20)) return 0;
  std::string text(reinterpret_cast<const char*>(data), size);
  auto xml = braid::parseXml(text, "fuzz.xml");
  if (!xml.isOk()) {
    if (xml.status().message().find("fuzz.xml:") != 0) abort();  // every error names the input
    return 0;
  }
  // What we write, we read back identically.
  std::string written = braid::writeXml(*xml.value());
  auto again = braid::parseXml(written, "rewritten.xml");
  if (!again.isOk() || braid::writeXml(*again.value()) != written) abort();
  if (xml.value()->name == "system") {
    auto g = braid::TopoGraph::fromXml(*xml.value(), "fuzz.xml");
    if (!g.isOk()) return 0;
    // Keep searches small: the DFS is bounded, but 10^4 GPUs x speeds would be slow, not wrong.
    if (g.value().nodesOf(braid::NodeType::kGpu).size() <= 16) {
      (void)braid::searchHostGraphs(g.value(), false, 0);
      (void)braid::searchHostGraphs(g.value(), true, 2);
    }
    (void)g.value().describePaths();
  } else if (xml.value()->name == "graphs") {
    (void)braid::graphsFromXml(*xml.value(), "fuzz.xml", referenceTopology());
  }
  return 0;
}
