// SPDX-License-Identifier: GPL-2.0-or-later
// The topology reader: the shipped files parse, bad ones are refused with
// a message that names the key.
#include "helpers.hpp"

#include <fstream>
#include <sstream>

namespace vrnic::fabric::test {

namespace {

std::string read(const std::string &name)
{
	std::ifstream in(std::string(FABRIC_TOPOLOGIES) + "/" + name);
	std::stringstream ss;
	ss << in.rdbuf();
	return ss.str();
}

std::string error_of(const std::string &json)
{
	const ParseResult r = parse_topology(json);
	EXPECT_FALSE(r.config.has_value()) << json;
	return r.error;
}

} // namespace

TEST(FabricConfig, ShippedTopologiesParse)
{
	for (const char *name : {"pair.json", "incast.json", "leaf-spine.json"}) {
		const ParseResult r = parse_topology(read(name));
		ASSERT_TRUE(r.config.has_value()) << name << ": " << r.error;
		RecordingSink sink;
		Fabric f(*r.config, sink);
		EXPECT_GE(f.host_count(), 2U) << name;
	}
	const TopologyConfig t = *parse_topology(read("incast.json")).config;
	ASSERT_EQ(t.hosts.size(), 3U);
	// Host links come first, host -> switch is a_to_b.
	EXPECT_EQ(t.links[2].a, "r");
	EXPECT_EQ(t.links[2].b_to_a.rate_bps, 1'000'000'000U);
	EXPECT_EQ(t.links[2].a_to_b.rate_bps, 10'000'000'000U);
	EXPECT_EQ(t.links[0].a_to_b.pfc.priorities, 0x08);
	EXPECT_EQ(t.links[0].a_to_b.pfc.xoff, 262144U);
	EXPECT_GT(t.links[0].a_to_b.pfc.xoff, t.links[0].b_to_a.ecn[3].kmax) << "ECN before PFC";
	EXPECT_EQ(t.links[0].a_to_b.delay_ns, 2000U);
	EXPECT_TRUE(t.links[0].b_to_a.ecn[3].enabled);
	EXPECT_EQ(t.links[0].b_to_a.ecn[3].kmin, 32768U);
}

TEST(FabricConfig, RefusesWhatItDoesNotKnow)
{
	EXPECT_EQ(error_of("{"), "not valid JSON");
	EXPECT_EQ(error_of("[]"), "topology: must be an object");
	EXPECT_NE(error_of(R"({"switches":[{"name":"s","bufer":1}],"hosts":[]})").find("\"bufer\""),
		  std::string::npos);
	EXPECT_NE(error_of(R"({"switches":[{"name":"s"}],"hosts":[{"name":"a","switch":"t"}]})")
			  .find("no switch"),
		  std::string::npos);
	EXPECT_NE(error_of(R"({"switches":[{"name":"s"}],"hosts":[{"name":"s","switch":"s"}]})")
			  .find("used twice"),
		  std::string::npos);
	EXPECT_NE(error_of(R"({"switches":[{"name":"s"}],"hosts":[{"name":"a","switch":"s",
		"impair":{"loss":1.5}}]})").find("hosts[0].impair.loss"),
		  std::string::npos);
	EXPECT_NE(error_of(R"({"switches":[{"name":"s"}],"hosts":[{"name":"a","switch":"s",
		"ecn":{"kmin":10,"kmax":5}}]})").find("kmax is below kmin"),
		  std::string::npos);
	EXPECT_NE(error_of(R"({"switches":[{"name":"s"}],"hosts":[{"name":"a","switch":"s",
		"pfc":{"priorities":[8]}}]})").find("priorities"),
		  std::string::npos);
	EXPECT_NE(error_of(R"({"switches":[{"name":"s"}],"hosts":[{"name":"a","switch":"s",
		"unix":"../x"}]})").find("plain file name"),
		  std::string::npos);
	EXPECT_NE(error_of(R"({"switches":[{"name":"s"},{"name":"t"}],"hosts":[],
		"links":[{"a":"s","b":"s"}]})").find("two different"),
		  std::string::npos);
	EXPECT_NE(error_of(R"({"switches":[{"name":"s\u0000x"}],"hosts":[]})").find("control characters"),
		  std::string::npos);
	EXPECT_NE(error_of(R"({"switches":[{"name":"s"}],"hosts":[{"name":"a\nb","switch":"s"}]})")
			  .find("control characters"),
		  std::string::npos);
	EXPECT_NE(error_of(R"({"switches":[{"name":"s"}],"hosts":[],"inject":[{"action":"eat","qpn":1,"psn":1}]})")
			  .find("drop, ecn or corrupt"),
		  std::string::npos);
}

// "nic" is for the harness: the switch checks its shape and ignores it.
TEST(FabricConfig, NicSettingsAreCheckedNotUsed)
{
	const std::string sw = R"({"switches":[{"name":"s"}],"hosts":[],)";
	EXPECT_TRUE(parse_topology(sw + R"("nic":{"cc_params":{"rp_time_reset":30000,
		"cc_algo":"dcqcn"}}})").config.has_value());
	EXPECT_TRUE(parse_topology(sw + R"("nic":{}})").config.has_value());
	EXPECT_NE(error_of(sw + R"("nic":{"cc":{}}})").find("nic: unknown key \"cc\""),
		  std::string::npos);
	EXPECT_NE(error_of(sw + R"("nic":{"cc_params":[]}})").find("nic.cc_params"),
		  std::string::npos);
	// The names become file names in the guest: no path, no shell.
	for (const char *bad : {R"("../x":1)", R"("a b":1)", R"("A":1)", R"("":1)"})
		EXPECT_NE(error_of(sw + R"("nic":{"cc_params":{)" + bad + "}}}")
				  .find("[a-z0-9_]"),
			  std::string::npos)
			<< bad;
	for (const char *bad : {R"("x":-1)", R"("x":1.5)", R"("x":4294967296)", R"("x":"a;b")",
				R"("x":true)", R"("x":null)"})
		EXPECT_NE(error_of(sw + R"("nic":{"cc_params":{)" + bad + "}}}")
				  .find("nic.cc_params.x: must be"),
			  std::string::npos)
			<< bad;
}

TEST(FabricConfig, DirectionsOverrideTheShared)
{
	const TopologyConfig t = topology(R"({"switches":[{"name":"s"}],"defaults":{"delay_us":3},
		"hosts":[{"name":"a","switch":"s","rate_gbps":25,"b_to_a":{"rate_gbps":1,
		"ecn":[{"kmin":1,"kmax":2,"pmax":1,"priorities":[3]},{"enabled":false,"priorities":[0]}]}}]})");
	ASSERT_EQ(t.links.size(), 1U);
	EXPECT_EQ(t.links[0].a_to_b.rate_bps, 25'000'000'000U);
	EXPECT_EQ(t.links[0].b_to_a.rate_bps, 1'000'000'000U);
	EXPECT_EQ(t.links[0].b_to_a.delay_ns, 3000U);
	EXPECT_TRUE(t.links[0].b_to_a.ecn[3].enabled);
	EXPECT_FALSE(t.links[0].b_to_a.ecn[0].enabled);
	EXPECT_FALSE(t.links[0].a_to_b.ecn[3].enabled);
}

} // namespace vrnic::fabric::test
