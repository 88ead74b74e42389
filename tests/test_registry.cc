// The transport table's slot rule: a communicator's connections share one
// slot, the smallest that any transport it uses wants, and the tools that
// model a job (nodus-topo, nodus-sim) get the slot the runtime would.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "transports/registry.h"

namespace nodus {
namespace {

uint32_t bitOf(const char* name) {
  const auto table = transportTable();
  for (size_t t = 0; t < table.size(); ++t)
    if (std::string(table[t].name) == name) return 1u << t;
  ADD_FAILURE() << "no transport " << name;
  return 0;
}

size_t slotOf(const char* name) {
  for (const TransportEntry& e : transportTable())
    if (std::string(e.name) == name) return e.slotBytes;
  return 0;
}

TEST(TransportSlots, NetTransportsTakeLargerSlotsThanTheHostsOwn) {
  EXPECT_EQ(slotOf("shm"), static_cast<size_t>(kDefaultSlotBytes));
  EXPECT_EQ(slotOf("loopback"), static_cast<size_t>(kDefaultSlotBytes));
  EXPECT_EQ(slotOf("tcp"), 512u << 10);
  EXPECT_EQ(slotOf("verbs"), slotOf("tcp"));
}

TEST(TransportSlots, ACommunicatorTakesTheSmallestSlotOfTheTransportsItUses) {
  EXPECT_EQ(slotBytesFor(0), static_cast<size_t>(kDefaultSlotBytes));  // a lone rank
  EXPECT_EQ(slotBytesFor(bitOf("tcp")), slotOf("tcp"));
  EXPECT_EQ(slotBytesFor(bitOf("tcp") | bitOf("verbs")), slotOf("tcp"));
  EXPECT_EQ(slotBytesFor(bitOf("shm") | bitOf("tcp")), slotOf("shm"));
  EXPECT_EQ(slotBytesFor(bitOf("loopback") | bitOf("verbs")), slotOf("loopback"));
}

Topology placed(const std::vector<std::string>& hostOfRank) {
  Topology t;
  EXPECT_TRUE(Topology::build(FabricConfig{}, hostOfRank, std::vector<int>(hostOfRank.size(), 0), &t).isOk());
  return t;
}

TEST(TransportSlots, AModelledJobGetsTheSlotItsTransportsWouldUse) {
  EXPECT_EQ(modelledSlotBytes(placed({"a"})), static_cast<size_t>(kDefaultSlotBytes));
  EXPECT_EQ(modelledSlotBytes(placed({"a", "a", "a"})), slotOf("shm"));       // one host: shm
  EXPECT_EQ(modelledSlotBytes(placed({"a", "b", "c", "d"})), slotOf("verbs"));  // a rank per host
  EXPECT_EQ(modelledSlotBytes(placed({"a", "a", "b", "b"})), slotOf("shm"));    // both
}

}  // namespace
}  // namespace nodus
