// SPDX-License-Identifier: GPL-2.0-or-later
// The control channel of vrnic-device (--control PATH): one JSON object
// per line, shaped as QMP's, e.g.
//   {"execute":"set_link","arguments":{"name":"wire","up":false}}
//   -> {"return":{}}
// This is the line parser and the reply formatting, kept apart from the
// socket so that it can be tested alone (tests/unit/test_control.cpp).
// A line is hostile input: it is at most kMaxLine bytes, nesting is
// bounded, and anything but an object with a string "execute" and an
// optional object "arguments" of scalars is refused with a reason.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace ctl {

constexpr size_t kMaxLine = 4096;	// bytes, the newline not counted

struct Value {
	enum class Kind { Null, Bool, Int, String };
	Kind kind = Kind::Null;
	bool b = false;
	int64_t i = 0;		// integers only: no fractions, no exponents
	std::string s;
};

struct Request {
	std::string execute;
	std::map<std::string, Value, std::less<>> args;

	const Value *arg(std::string_view name) const;
};

// Parse one line (without its newline).  On error returns nullopt and
// says why in err.  Never throws but for std::bad_alloc.
std::optional<Request> parse(std::string_view line, std::string &err);

// Replies, each one line ending in '\n'.
std::string reply_ok(std::string_view json_value = "{}");
std::string reply_error(std::string_view desc, std::string_view cls = "GenericError");
// s as a JSON string literal, quotes included.
std::string quote(std::string_view s);

} // namespace ctl
