// SPDX-License-Identifier: GPL-2.0-or-later
// device/control: the line parser of vrnic-device's control channel,
// fed what a client sends and what a hostile one might.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "control.hpp"

namespace {

using ctl::Value;

TEST(Control, ParsesQmpShapedRequests)
{
	std::string err;
	auto r = ctl::parse(R"({"execute":"set_link","arguments":{"name":"wire","up":false}})", err);
	ASSERT_TRUE(r) << err;
	EXPECT_EQ(r->execute, "set_link");
	ASSERT_NE(r->arg("up"), nullptr);
	EXPECT_EQ(r->arg("up")->kind, Value::Kind::Bool);
	EXPECT_FALSE(r->arg("up")->b);
	EXPECT_EQ(r->arg("name")->s, "wire");
	EXPECT_EQ(r->arg("nothing"), nullptr);

	r = ctl::parse(R"( { "arguments" : { "property" : "x-fault-admin", "value" : 4294967295 } ,)"
		       R"( "execute" : "qom-set", "id" : 7 } )", err);
	ASSERT_TRUE(r) << err;
	EXPECT_EQ(r->execute, "qom-set");
	EXPECT_EQ(r->arg("value")->kind, Value::Kind::Int);
	EXPECT_EQ(r->arg("value")->i, 4294967295);

	r = ctl::parse(R"({"execute":"capture-stop"})", err);
	ASSERT_TRUE(r) << err;
	EXPECT_TRUE(r->args.empty());

	r = ctl::parse(R"({"execute":"x","arguments":{"s":"a\"\\\/\n\u00e9\ud83d\ude00","n":null,"m":-3}})", err);
	ASSERT_TRUE(r) << err;
	EXPECT_EQ(r->arg("s")->s, "a\"\\/\n\xc3\xa9\xf0\x9f\x98\x80");
	EXPECT_EQ(r->arg("n")->kind, Value::Kind::Null);
	EXPECT_EQ(r->arg("m")->i, -3);
}

TEST(Control, RefusesWhatIsNotARequest)
{
	const char *bad[] = {
		"",
		"[]",
		"{",
		"{}",					// no execute
		R"({"execute":1})",
		R"({"execute":"a","execute":"b"})",
		R"({"execute":"a"} x)",
		R"({"execute":"a",})",
		R"({"execute":"a","other":1})",
		R"({"execute":"a","arguments":[]})",
		R"({"execute":"a","arguments":{"v":{"deep":1}}})",
		R"({"execute":"a","arguments":{"v":1.5}})",
		R"({"execute":"a","arguments":{"v":1e3}})",
		R"({"execute":"a","arguments":{"v":01}})",
		R"({"execute":"a","arguments":{"v":99999999999999999999}})",
		R"({"execute":"a","arguments":{"v":tru}})",
		R"({"execute":"a","arguments":{"v":"\x"}})",
		R"({"execute":"a","arguments":{"v":"\ud800"}})",
		R"({"execute":"a","arguments":{"v":"\u12"}})",
		"{\"execute\":\"a\nb\"}",		// a raw control character
		"{\"execute\":\"unterminated",
	};
	for (const char *line : bad) {
		std::string err;
		EXPECT_FALSE(ctl::parse(line, err)) << line;
		EXPECT_FALSE(err.empty()) << line;
	}
}

// Last-one-wins would let a line say one thing to a reader and do
// another: a repeated member or argument is refused, as "execute" is.
TEST(Control, RefusesDuplicates)
{
	std::string err;
	EXPECT_FALSE(ctl::parse(R"({"execute":"a","execute":"b"})", err));
	EXPECT_FALSE(ctl::parse(R"({"execute":"set_link","arguments":{"up":true},)"
				R"("arguments":{"up":false}})", err));
	EXPECT_NE(err.find("'arguments' must be one object"), std::string::npos) << err;
	EXPECT_FALSE(ctl::parse(R"({"execute":"set_link","arguments":{}, "arguments":{}})", err));
	EXPECT_FALSE(ctl::parse(R"({"execute":"set_link","arguments":{"up":true,"up":false}})",
				err));
	EXPECT_NE(err.find("argument 'up' is given twice"), std::string::npos) << err;
	EXPECT_TRUE(ctl::parse(R"({"execute":"set_link","arguments":{"up":true,"name":"wire"}})",
			       err)) << err;
}

TEST(Control, EchoesTheId)
{
	std::string err;
	auto r = ctl::parse(R"({"execute":"qmp_capabilities","id":7})", err);
	ASSERT_TRUE(r) << err;
	EXPECT_EQ(ctl::with_id(ctl::reply_ok(), r->id), "{\"return\":{},\"id\":7}\n");
	r = ctl::parse(R"({"id":"a\"b","execute":"x"})", err);
	ASSERT_TRUE(r) << err;
	EXPECT_EQ(ctl::with_id(ctl::reply_error("no", "CommandNotFound"), r->id),
		  "{\"error\":{\"class\":\"CommandNotFound\",\"desc\":\"no\"},"
		  "\"id\":\"a\\\"b\"}\n");
	r = ctl::parse(R"({"execute":"x","id":null})", err);
	ASSERT_TRUE(r) << err;
	EXPECT_EQ(ctl::with_id(ctl::reply_ok("3"), r->id), "{\"return\":3,\"id\":null}\n");
	r = ctl::parse(R"({"execute":"x"})", err);
	ASSERT_TRUE(r) << err;
	EXPECT_EQ(ctl::with_id(ctl::reply_ok(), r->id), "{\"return\":{}}\n");
	EXPECT_FALSE(ctl::parse(R"({"execute":"x","id":1,"id":2})", err));
	EXPECT_FALSE(ctl::parse(R"({"execute":"x","id":{}})", err));
}

TEST(Control, BoundsTheLine)
{
	std::string err;
	std::string pad(ctl::kMaxLine, ' ');
	const std::string req = R"({"execute":"a"})";
	EXPECT_TRUE(ctl::parse(req + pad.substr(req.size()), err)) << err;
	EXPECT_FALSE(ctl::parse(req + pad, err));
	EXPECT_NE(err.find("longer"), std::string::npos);
	// Deep nesting is refused at the second level, not recursed into.
	const std::string deep = R"({"execute":"a","arguments":{"v":)" +
				 std::string(1000, '[') + "}}";
	EXPECT_FALSE(ctl::parse(deep, err));
}

TEST(Control, RepliesAreOneAsciiLine)
{
	EXPECT_EQ(ctl::reply_ok(), "{\"return\":{}}\n");
	EXPECT_EQ(ctl::reply_ok("3"), "{\"return\":3}\n");
	EXPECT_EQ(ctl::reply_error("bad \"x\"\n\xff"),
		  "{\"error\":{\"class\":\"GenericError\",\"desc\":"
		  "\"bad \\\"x\\\"\\u000a\\u00ff\"}}\n");
	EXPECT_EQ(ctl::reply_error("no", "CommandNotFound"),
		  "{\"error\":{\"class\":\"CommandNotFound\",\"desc\":\"no\"}}\n");
}

// Lines "a\nb\nc\n" read at once, the fd with the last byte of "b\n"
// (offset 3): it is b's, not a's; then one with c (now at offset 1
// once a and b are gone) and two reads' worth for a line still coming.
TEST(Control, FdsGoToTheLineTheyCameWith)
{
	ctl::FdQueue q;
	q.add(10, 3);
	q.add(11, 5);
	q.add(12, 7);
	q.add(13, 8);
	EXPECT_TRUE(q.take(1).empty());			// "a\n"
	EXPECT_EQ(q.take(1), std::vector<int>{10});	// "b\n", now at 0..1
	EXPECT_EQ(q.take(1), std::vector<int>{11});	// "c\n"
	EXPECT_EQ(q.size(), 2U);
	EXPECT_EQ(q.take(5), (std::vector<int>{12, 13}));	// offsets 1 and 2
	EXPECT_EQ(q.size(), 0U);
	q.add(14, 0);
	EXPECT_EQ(q.take_all(), std::vector<int>{14});
	EXPECT_EQ(q.size(), 0U);
}

} // namespace
