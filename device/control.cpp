// SPDX-License-Identifier: GPL-2.0-or-later
// The control channel's line parser and replies: see control.hpp.
#include "control.hpp"

#include <cstdio>

namespace ctl {

namespace {

// A recursive-descent parser for the JSON subset a request uses: an
// object whose members are strings, integers, true, false, null, or (one
// level down, "arguments") an object of those.  No arrays, no fractions.
class Parser {
public:
	explicit Parser(std::string_view s) : s_(s) {}

	bool request(Request &r, std::string &err)
	{
		ws();
		if (!eat('{'))
			return fail(err, "expected a JSON object");
		bool have_execute = false, have_arguments = false;
		const bool ok = members(err, "a member name", [&](const std::string &key) {
			if (key == "execute") {
				if (have_execute || !string(r.execute))
					return fail(err, "'execute' must be one string");
				have_execute = true;
				return true;
			}
			if (key == "arguments") {
				if (have_arguments)
					return fail(err, "'arguments' must be one object");
				have_arguments = true;
				return arguments(r, err);
			}
			if (key == "id") {
				Value v;	// QMP's: echoed in the reply
				if (r.id || !scalar(v))
					return fail(err, "'id' must be one scalar");
				r.id = std::move(v);
				return true;
			}
			return fail(err, "member '" + key + "' is unexpected");
		});
		if (!ok)
			return false;
		ws();
		if (pos_ != s_.size())
			return fail(err, "trailing characters after the object");
		if (!have_execute)
			return fail(err, "no 'execute'");
		return true;
	}

private:
	bool fail(std::string &err, const std::string &why) const
	{
		err = why + " at offset " + std::to_string(pos_);
		return false;
	}

	void ws()
	{
		while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' ||
					    s_[pos_] == '\r' || s_[pos_] == '\n'))
			pos_++;
	}

	bool eat(char c)
	{
		if (pos_ < s_.size() && s_[pos_] == c) {
			pos_++;
			return true;
		}
		return false;
	}

	bool word(std::string_view w)
	{
		if (s_.substr(pos_, w.size()) != w)
			return false;
		pos_ += w.size();
		return true;
	}

	// The members of an object whose '{' was just read, up to its '}':
	// each "name": value pair's value is read by member(name), which
	// returns false (err set) to refuse it.
	template <typename F>
	bool members(std::string &err, const char *what, F member)
	{
		for (bool first = true;; first = false) {
			ws();
			if (first && eat('}'))
				return true;
			std::string key;
			if (!string(key))
				return fail(err, std::string("expected ") + what);
			ws();
			if (!eat(':'))
				return fail(err, "expected ':'");
			ws();
			if (!member(key))
				return false;
			ws();
			if (eat('}'))
				return true;
			if (!eat(','))
				return fail(err, "expected ',' or '}'");
		}
	}

	bool arguments(Request &r, std::string &err)
	{
		if (!eat('{'))
			return fail(err, "'arguments' must be an object");
		r.args.clear();
		return members(err, "an argument name", [&](const std::string &key) {
			Value v;
			if (!scalar(v))
				return fail(err, "argument '" + key +
					    "' must be a string, an integer, a boolean or null");
			if (!r.args.emplace(key, std::move(v)).second)
				return fail(err, "argument '" + key + "' is given twice");
			return true;
		});
	}

	bool scalar(Value &v)
	{
		if (pos_ >= s_.size())
			return false;
		const char c = s_[pos_];
		if (c == '"') {
			v.kind = Value::Kind::String;
			return string(v.s);
		}
		if (word("true") || word("false")) {
			v.kind = Value::Kind::Bool;
			v.b = c == 't';
			return true;
		}
		if (word("null")) {
			v.kind = Value::Kind::Null;
			return true;
		}
		v.kind = Value::Kind::Int;
		return integer(v.i);
	}

	// -?(0|[1-9][0-9]*), in int64_t.
	bool integer(int64_t &out)
	{
		const bool neg = eat('-');
		if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9')
			return false;
		if (s_[pos_] == '0' && pos_ + 1 < s_.size() && s_[pos_ + 1] >= '0' &&
		    s_[pos_ + 1] <= '9')
			return false;
		uint64_t v = 0;
		const uint64_t lim = neg ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
		while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
			const auto d = uint64_t(s_[pos_] - '0');
			if (v > (lim - d) / 10)
				return false;
			v = v * 10 + d;
			pos_++;
		}
		if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E'))
			return false;
		out = neg ? int64_t(0 - v) : int64_t(v);
		return true;
	}

	bool hex4(uint32_t &out)
	{
		if (s_.size() - pos_ < 4)
			return false;
		out = 0;
		for (int i = 0; i < 4; i++) {
			const char c = s_[pos_++];
			uint32_t d = 0;
			if (c >= '0' && c <= '9')
				d = uint32_t(c - '0');
			else if (c >= 'a' && c <= 'f')
				d = uint32_t(c - 'a' + 10);
			else if (c >= 'A' && c <= 'F')
				d = uint32_t(c - 'A' + 10);
			else
				return false;
			out = out << 4 | d;
		}
		return true;
	}

	static void utf8(std::string &out, uint32_t cp)
	{
		if (cp < 0x80) {
			out += char(cp);
		} else if (cp < 0x800) {
			out += char(0xc0 | cp >> 6);
			out += char(0x80 | (cp & 0x3f));
		} else if (cp < 0x10000) {
			out += char(0xe0 | cp >> 12);
			out += char(0x80 | (cp >> 6 & 0x3f));
			out += char(0x80 | (cp & 0x3f));
		} else {
			out += char(0xf0 | cp >> 18);
			out += char(0x80 | (cp >> 12 & 0x3f));
			out += char(0x80 | (cp >> 6 & 0x3f));
			out += char(0x80 | (cp & 0x3f));
		}
	}

	bool string(std::string &out)
	{
		if (!eat('"'))
			return false;
		out.clear();
		while (pos_ < s_.size()) {
			const char c = s_[pos_++];
			if (c == '"')
				return true;
			if (static_cast<unsigned char>(c) < 0x20)
				return false;	// raw control characters are not JSON
			if (c != '\\') {
				out += c;
				continue;
			}
			if (pos_ >= s_.size())
				return false;
			switch (s_[pos_++]) {
			case '"': out += '"'; break;
			case '\\': out += '\\'; break;
			case '/': out += '/'; break;
			case 'b': out += '\b'; break;
			case 'f': out += '\f'; break;
			case 'n': out += '\n'; break;
			case 'r': out += '\r'; break;
			case 't': out += '\t'; break;
			case 'u': {
				uint32_t cp = 0;
				if (!hex4(cp))
					return false;
				if (cp >= 0xd800 && cp < 0xdc00) {
					uint32_t lo = 0;
					if (!word("\\u") || !hex4(lo) || lo < 0xdc00 || lo >= 0xe000)
						return false;
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				} else if (cp >= 0xdc00 && cp < 0xe000) {
					return false;
				}
				utf8(out, cp);
				break;
			}
			default:
				return false;
			}
		}
		return false;
	}

	std::string_view s_;
	size_t pos_ = 0;
};

} // namespace

const Value *Request::arg(std::string_view name) const
{
	const auto it = args.find(name);
	return it == args.end() ? nullptr : &it->second;
}

std::optional<Request> parse(std::string_view line, std::string &err)
{
	if (line.size() > kMaxLine) {
		err = "line longer than " + std::to_string(kMaxLine) + " bytes";
		return std::nullopt;
	}
	Request r;
	if (!Parser(line).request(r, err))
		return std::nullopt;
	return r;
}

std::string quote(std::string_view s)
{
	std::string out = "\"";
	for (const char c : s) {
		if (c == '"' || c == '\\') {
			out += '\\';
			out += c;
		} else if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
			// Control characters, and bytes that may not be UTF-8: the
			// reply stays ASCII whatever the request held.
			char buf[8];
			(void)std::snprintf(buf, sizeof(buf), "\\u%04x", unsigned(static_cast<unsigned char>(c)));
			out += buf;
		} else {
			out += c;
		}
	}
	return out + "\"";
}

std::string reply_ok(std::string_view json_value)
{
	return std::string("{\"return\":").append(json_value).append("}\n");
}

std::string reply_error(std::string_view desc, std::string_view cls)
{
	return R"({"error":{"class":)" + quote(cls) + R"(,"desc":)" + quote(desc) + "}}\n";
}

std::string with_id(std::string_view reply, const std::optional<Value> &id)
{
	if (!id || reply.size() < 2 || reply.substr(reply.size() - 2) != "}\n")
		return std::string(reply);
	std::string v;
	switch (id->kind) {
	case Value::Kind::Null:
		v = "null";
		break;
	case Value::Kind::Bool:
		v = id->b ? "true" : "false";
		break;
	case Value::Kind::Int:
		v = std::to_string(id->i);
		break;
	case Value::Kind::String:
		v = quote(id->s);
		break;
	}
	return std::string(reply.substr(0, reply.size() - 2)) + ",\"id\":" + v + "}\n";
}

std::vector<int> FdQueue::take(size_t nl)
{
	std::vector<int> mine;
	std::vector<std::pair<size_t, int>> rest;
	for (const auto &[at, fd] : q_) {
		if (at <= nl)
			mine.push_back(fd);
		else
			rest.emplace_back(at - (nl + 1), fd);
	}
	q_.swap(rest);
	return mine;
}

std::vector<int> FdQueue::take_all()
{
	std::vector<int> all;
	for (const auto &e : q_)
		all.push_back(e.second);
	q_.clear();
	return all;
}

} // namespace ctl
