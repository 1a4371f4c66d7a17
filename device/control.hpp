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
#include <utility>
#include <vector>

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
	std::optional<Value> id;	// echoed in the reply, as QMP's

	const Value *arg(std::string_view name) const;
};

// Parse one line (without its newline).  On error returns nullopt and
// says why in err.  Never throws but for std::bad_alloc.
std::optional<Request> parse(std::string_view line, std::string &err);

// Replies, each one line ending in '\n'.
std::string reply_ok(std::string_view json_value = "{}");
std::string reply_error(std::string_view desc, std::string_view cls = "GenericError");
// reply (one of the above) with the request's id, if it has one, added
// as QMP does: {"return":{},"id":7}.
std::string with_id(std::string_view reply, const std::optional<Value> &id);
// s as a JSON string literal, quotes included.
std::string quote(std::string_view s);

// The fds that came with SCM_RIGHTS, each tagged with the offset in the
// input buffer of the last byte read with it.  On a stream socket the
// kernel ends a read with the message that carried fds, so that byte is
// one the sender sent with them: the fds belong to the line holding it,
// whatever other lines came in the same read.  No fd is closed here.
class FdQueue {
public:
	void add(int fd, size_t at) { q_.emplace_back(at, fd); }
	size_t size() const { return q_.size(); }
	// The fds of the line that ends (its newline) at offset nl, which
	// is then erased from the buffer: the others move down by nl + 1.
	std::vector<int> take(size_t nl);
	// All of them, e.g. to close them when the client goes.
	std::vector<int> take_all();

private:
	std::vector<std::pair<size_t, int>> q_;	// (offset, fd), in order
};

} // namespace ctl
