// Python str methods, on UTF-8 strings indexed by code point.
#include <algorithm>
#include <unordered_map>

#include "jinja/call_args.h"
#include "jinja/error.h"
#include "jinja/limits.h"
#include "jinja/methods.h"
#include "jinja/objects.h"
#include "jinja/operators.h"
#include "jinja/py_format.h"
#include "jinja/slicing.h"
#include "jinja/unicode.h"

namespace pagoda::jinja {
namespace {

using Method = Value (*)(const Value& self, CallArgs& args);

std::string arg_str(const CallArgs& args, size_t i, const char* func) {
  const Value& v = args.positional[i];
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_string()) {
    fail(ErrorKind::kType, std::string(func) + "() argument must be str, not " + type_name(v));
  }
  return v.str();
}

void arity(const CallArgs& args, const char* func, size_t lo, size_t hi) {
  expect_no_kwargs(func, args);
  size_t n = args.positional.size();
  if (n < lo || n > hi) {
    fail(ErrorKind::kType,
         std::string(func) + "() takes " +
             (lo == hi ? "exactly " + std::to_string(lo)
                       : "from " + std::to_string(lo) + " to " + std::to_string(hi)) +
             " arguments (" + std::to_string(n) + " given)");
  }
}

Value str_result(const Value& self, std::string s) {
  return Value::string(std::move(s), self.is_safe());
}

template <typename Pred>
Value all_chars(const Value& self, CallArgs& args, const char* func, bool empty_result, Pred pred) {
  arity(args, func, 0, 0);
  const std::string& s = self.str();
  if (s.empty()) return Value::boolean(empty_result);
  size_t pos = 0;
  while (pos < s.size()) {
    if (!pred(unicode::next_code_point(s, pos))) return Value::boolean(false);
  }
  return Value::boolean(true);
}

// find / rfind / index / rindex / count over code points.
struct Bounds {
  std::u32string hay;
  std::u32string needle;
  size_t lo = 0, hi = 0;
  bool empty_range = false;  // start beyond the end: nothing matches
};

Bounds bounds_of(const Value& self, const CallArgs& args, const char* func) {
  arity(args, func, 1, 3);
  Bounds b;
  b.hay = unicode::to_u32(self.str());
  b.needle = unicode::to_u32(arg_str(args, 0, func));
  const Value* start = args.positional.size() > 1 ? &args.positional[1] : nullptr;
  const Value* end = args.positional.size() > 2 ? &args.positional[2] : nullptr;
  clamp_bounds(start, end, b.hay.size(), b.lo, b.hi);
  if (start != nullptr && start->is_int() && start->as_int() > static_cast<int64_t>(b.hay.size())) {
    b.empty_range = true;
  }
  return b;
}

int64_t find_impl(const Value& self, CallArgs& args, const char* func, bool reverse) {
  Bounds b = bounds_of(self, args, func);
  if (b.empty_range || b.hi < b.lo || b.hi - b.lo < b.needle.size()) return -1;
  std::u32string_view window(b.hay.data() + b.lo, b.hi - b.lo);
  size_t at = reverse ? window.rfind(b.needle) : window.find(b.needle);
  return at == std::u32string_view::npos ? -1 : static_cast<int64_t>(b.lo + at);
}

Value m_find(const Value& self, CallArgs& args) {
  return Value::integer(find_impl(self, args, "find", false));
}
Value m_rfind(const Value& self, CallArgs& args) {
  return Value::integer(find_impl(self, args, "rfind", true));
}
Value m_index(const Value& self, CallArgs& args) {
  int64_t i = find_impl(self, args, "index", false);
  if (i < 0) fail(ErrorKind::kType, "substring not found");
  return Value::integer(i);
}
Value m_rindex(const Value& self, CallArgs& args) {
  int64_t i = find_impl(self, args, "rindex", true);
  if (i < 0) fail(ErrorKind::kType, "substring not found");
  return Value::integer(i);
}

Value m_count(const Value& self, CallArgs& args) {
  Bounds b = bounds_of(self, args, "count");
  if (b.empty_range || b.hi < b.lo) return Value::integer(0);
  std::u32string_view window(b.hay.data() + b.lo, b.hi - b.lo);
  if (b.needle.empty()) return Value::integer(static_cast<int64_t>(window.size() + 1));
  int64_t n = 0;
  for (size_t at = window.find(b.needle); at != std::u32string_view::npos;
       at = window.find(b.needle, at + b.needle.size())) {
    ++n;
  }
  return Value::integer(n);
}

Value affix_impl(const Value& self, CallArgs& args, const char* func, bool prefix) {
  Bounds b;
  arity(args, func, 1, 3);
  b.hay = unicode::to_u32(self.str());
  const Value* start = args.positional.size() > 1 ? &args.positional[1] : nullptr;
  const Value* end = args.positional.size() > 2 ? &args.positional[2] : nullptr;
  clamp_bounds(start, end, b.hay.size(), b.lo, b.hi);
  if (start != nullptr && start->is_int() && start->as_int() > static_cast<int64_t>(b.hay.size())) {
    return Value::boolean(false);
  }
  ValueList candidates;
  const Value& arg = args.positional[0];
  if (arg.type() == ValueType::kTuple) {
    candidates = arg.items();
  } else if (arg.is_string()) {
    candidates.push_back(arg);
  } else {
    fail(ErrorKind::kType,
         std::string(func) + " first arg must be str or a tuple of str, not " + type_name(arg));
  }
  std::u32string_view window =
      b.hi >= b.lo ? std::u32string_view(b.hay.data() + b.lo, b.hi - b.lo) : std::u32string_view();
  for (const Value& c : candidates) {
    if (!c.is_string()) {
      fail(ErrorKind::kType,
           std::string("tuple for ") + func + " must only contain str, not " + type_name(c));
    }
    std::u32string n = unicode::to_u32(c.str());
    if (b.hi < b.lo) continue;
    if (n.size() <= window.size() &&
        (prefix ? window.substr(0, n.size()) == n : window.substr(window.size() - n.size()) == n)) {
      return Value::boolean(true);
    }
  }
  return Value::boolean(false);
}

Value m_startswith(const Value& self, CallArgs& args) {
  return affix_impl(self, args, "startswith", true);
}
Value m_endswith(const Value& self, CallArgs& args) {
  return affix_impl(self, args, "endswith", false);
}

Value strip_impl(const Value& self, CallArgs& args, const char* func, bool left, bool right) {
  arity(args, func, 0, 1);
  if (args.positional.empty() || args.positional[0].is_none()) {
    return str_result(self, py_strip(self.str(), nullptr, left, right));
  }
  std::string chars = arg_str(args, 0, func);
  return str_result(self, py_strip(self.str(), &chars, left, right));
}

Value m_strip(const Value& self, CallArgs& args) {
  return strip_impl(self, args, "strip", true, true);
}
Value m_lstrip(const Value& self, CallArgs& args) {
  return strip_impl(self, args, "lstrip", true, false);
}
Value m_rstrip(const Value& self, CallArgs& args) {
  return strip_impl(self, args, "rstrip", false, true);
}

Value split_impl(const Value& self, CallArgs& args, const char* func, bool right) {
  BoundArgs a(func, args, {"sep", "maxsplit"});
  const Value* sep = a.has(0) && !a.get(0).is_none() ? &a.get(0) : nullptr;
  if (sep != nullptr && !sep->is_string()) {
    fail(ErrorKind::kType, "must be str or None, not " + type_name(*sep));
  }
  ValueList parts = py_split(self.str(), sep, a.integer(1, -1), right);
  if (self.is_safe()) {
    for (Value& p : parts) p = Value::string(p.str(), true);
  }
  return Value::list(std::move(parts));
}

Value m_split(const Value& self, CallArgs& args) {
  return split_impl(self, args, "split", false);
}
Value m_rsplit(const Value& self, CallArgs& args) {
  return split_impl(self, args, "rsplit", true);
}

Value m_splitlines(const Value& self, CallArgs& args) {
  BoundArgs a("splitlines", args, {"keepends"});
  return Value::list(py_splitlines(self.str(), a.flag(0, false)));
}

Value m_replace(const Value& self, CallArgs& args) {
  arity(args, "replace", 2, 3);
  int64_t count = -1;
  if (args.positional.size() == 3) {
    if (!args.positional[2].is_int()) {
      fail(ErrorKind::kType,
           "'" + type_name(args.positional[2]) + "' object cannot be interpreted as an integer");
    }
    count = args.positional[2].as_int();
  }
  std::string old = arg_str(args, 0, "replace");
  std::string repl = arg_str(args, 1, "replace");
  if (self.is_safe()) {
    if (!args.positional[0].is_safe()) old = html_escape(old);
    if (!args.positional[1].is_safe()) repl = html_escape(repl);
  }
  return str_result(self, py_replace(self.str(), old, repl, count));
}

Value m_upper(const Value& self, CallArgs& args) {
  arity(args, "upper", 0, 0);
  return str_result(self, py_upper(self.str()));
}
Value m_lower(const Value& self, CallArgs& args) {
  arity(args, "lower", 0, 0);
  return str_result(self, py_lower(self.str()));
}
Value m_casefold(const Value& self, CallArgs& args) {
  arity(args, "casefold", 0, 0);
  return str_result(self, py_replace(py_lower(self.str()), "ß", "ss", -1));
}
Value m_title(const Value& self, CallArgs& args) {
  arity(args, "title", 0, 0);
  return str_result(self, py_title(self.str()));
}
Value m_capitalize(const Value& self, CallArgs& args) {
  arity(args, "capitalize", 0, 0);
  return str_result(self, py_capitalize(self.str()));
}

Value m_swapcase(const Value& self, CallArgs& args) {
  arity(args, "swapcase", 0, 0);
  std::string out;
  const std::string& s = self.str();
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t cp = unicode::next_code_point(s, pos);
    if (unicode::is_upper(cp)) {
      unicode::append_lower(out, cp);
    } else if (unicode::is_lower(cp)) {
      unicode::append_upper(out, cp);
    } else {
      unicode::append_utf8(out, cp);
    }
  }
  return str_result(self, std::move(out));
}

Value m_islower(const Value& self, CallArgs& args) {
  arity(args, "islower", 0, 0);
  bool cased = false;
  const std::string& s = self.str();
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t cp = unicode::next_code_point(s, pos);
    if (unicode::is_upper(cp)) return Value::boolean(false);
    cased |= unicode::is_lower(cp);
  }
  return Value::boolean(cased);
}

Value m_isupper(const Value& self, CallArgs& args) {
  arity(args, "isupper", 0, 0);
  bool cased = false;
  const std::string& s = self.str();
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t cp = unicode::next_code_point(s, pos);
    if (unicode::is_lower(cp)) return Value::boolean(false);
    cased |= unicode::is_upper(cp);
  }
  return Value::boolean(cased);
}

Value m_istitle(const Value& self, CallArgs& args) {
  arity(args, "istitle", 0, 0);
  bool cased = false, previous_cased = false;
  const std::string& s = self.str();
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t cp = unicode::next_code_point(s, pos);
    if (unicode::is_upper(cp)) {
      if (previous_cased) return Value::boolean(false);
      previous_cased = cased = true;
    } else if (unicode::is_lower(cp)) {
      if (!previous_cased) return Value::boolean(false);
      previous_cased = cased = true;
    } else {
      previous_cased = false;
    }
  }
  return Value::boolean(cased);
}

Value m_isdigit(const Value& s, CallArgs& a) {
  return all_chars(s, a, "isdigit", false, unicode::is_digit);
}
Value m_isdecimal(const Value& s, CallArgs& a) {
  return all_chars(s, a, "isdecimal", false, unicode::is_decimal);
}
Value m_isnumeric(const Value& s, CallArgs& a) {
  return all_chars(s, a, "isnumeric", false, unicode::is_numeric);
}
Value m_isalpha(const Value& s, CallArgs& a) {
  return all_chars(s, a, "isalpha", false, unicode::is_alpha);
}
Value m_isalnum(const Value& s, CallArgs& a) {
  return all_chars(s, a, "isalnum", false, unicode::is_alnum);
}
Value m_isspace(const Value& s, CallArgs& a) {
  return all_chars(s, a, "isspace", false, unicode::is_space);
}
Value m_isprintable(const Value& s, CallArgs& a) {
  return all_chars(s, a, "isprintable", true, unicode::is_printable);
}
Value m_isascii(const Value& s, CallArgs& a) {
  return all_chars(s, a, "isascii", true, [](char32_t c) { return c < 0x80; });
}
Value m_isidentifier(const Value& self, CallArgs& args) {
  arity(args, "isidentifier", 0, 0);
  std::u32string u = unicode::to_u32(self.str());
  if (u.empty() || !(u[0] == '_' || unicode::is_alpha(u[0]))) return Value::boolean(false);
  for (char32_t c : u) {
    if (!unicode::is_word(c)) return Value::boolean(false);
  }
  return Value::boolean(true);
}

std::string fill_char(const CallArgs& args, const char* func) {
  if (args.positional.size() < 2) return " ";
  std::string f = arg_str(args, 1, func);
  if (unicode::num_code_points(f) != 1) {
    fail(ErrorKind::kType, "The fill character must be exactly one character long");
  }
  return f;
}

int64_t width_arg(const CallArgs& args, const char* func) {
  const Value& w = args.positional[0];
  if (!w.is_int()) {
    fail(ErrorKind::kType, "'" + type_name(w) + "' object cannot be interpreted as an integer");
  }
  if (w.as_int() > static_cast<int64_t>(kMaxStringBytes)) {
    fail(ErrorKind::kLimit, std::string(func) + "(): width too large");
  }
  return w.as_int();
}

std::string repeat(const std::string& s, int64_t n) {
  std::string out;
  for (int64_t i = 0; i < n; ++i) out += s;
  return out;
}

Value justify(const Value& self, CallArgs& args, const char* func, char how) {
  arity(args, func, 1, 2);
  int64_t width = width_arg(args, func);
  std::string fill = fill_char(args, func);
  int64_t len = static_cast<int64_t>(unicode::num_code_points(self.str()));
  if (width <= len) return self;
  int64_t marg = width - len;
  int64_t left = how == '<' ? 0 : how == '>' ? marg : marg / 2 + (marg & width & 1);
  return str_result(self, repeat(fill, left) + self.str() + repeat(fill, marg - left));
}

Value m_center(const Value& self, CallArgs& args) {
  return justify(self, args, "center", '^');
}
Value m_ljust(const Value& self, CallArgs& args) {
  return justify(self, args, "ljust", '<');
}
Value m_rjust(const Value& self, CallArgs& args) {
  return justify(self, args, "rjust", '>');
}

Value m_zfill(const Value& self, CallArgs& args) {
  arity(args, "zfill", 1, 1);
  int64_t width = width_arg(args, "zfill");
  const std::string& s = self.str();
  int64_t len = static_cast<int64_t>(unicode::num_code_points(s));
  if (width <= len) return self;
  size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
  return str_result(self, s.substr(0, sign) + std::string(static_cast<size_t>(width - len), '0') +
                              s.substr(sign));
}

Value partition_impl(const Value& self, CallArgs& args, const char* func, bool right) {
  arity(args, func, 1, 1);
  std::string sep = arg_str(args, 0, func);
  if (sep.empty()) fail(ErrorKind::kType, "empty separator");
  const std::string& s = self.str();
  size_t at = right ? s.rfind(sep) : s.find(sep);
  if (at == std::string::npos) {
    Value empty = str_result(self, "");
    return right ? Value::tuple({empty, empty, self}) : Value::tuple({self, empty, empty});
  }
  return Value::tuple({str_result(self, s.substr(0, at)), str_result(self, sep),
                       str_result(self, s.substr(at + sep.size()))});
}

Value m_partition(const Value& self, CallArgs& args) {
  return partition_impl(self, args, "partition", false);
}
Value m_rpartition(const Value& self, CallArgs& args) {
  return partition_impl(self, args, "rpartition", true);
}

Value m_removeprefix(const Value& self, CallArgs& args) {
  arity(args, "removeprefix", 1, 1);
  std::string p = arg_str(args, 0, "removeprefix");
  const std::string& s = self.str();
  return s.compare(0, p.size(), p) == 0 ? str_result(self, s.substr(p.size())) : self;
}

Value m_removesuffix(const Value& self, CallArgs& args) {
  arity(args, "removesuffix", 1, 1);
  std::string p = arg_str(args, 0, "removesuffix");
  const std::string& s = self.str();
  if (!p.empty() && s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0) {
    return str_result(self, s.substr(0, s.size() - p.size()));
  }
  return self;
}

Value m_expandtabs(const Value& self, CallArgs& args) {
  BoundArgs a("expandtabs", args, {"tabsize"});
  int64_t tab = a.integer(0, 8);
  std::string out;
  int64_t column = 0;
  const std::string& s = self.str();
  size_t pos = 0;
  while (pos < s.size()) {
    size_t start = pos;
    char32_t cp = unicode::next_code_point(s, pos);
    if (cp == '\t') {
      if (tab > 0) {
        int64_t n = tab - column % tab;
        out.append(static_cast<size_t>(n), ' ');
        column += n;
      }
    } else {
      out.append(s, start, pos - start);
      column = (cp == '\n' || cp == '\r') ? 0 : column + 1;
    }
    if (out.size() > kMaxStringBytes) fail(ErrorKind::kLimit, "expandtabs(): result too large");
  }
  return str_result(self, std::move(out));
}

Value m_join(const Value& self, CallArgs& args) {
  arity(args, "join", 1, 1);
  ValueList items = iterate(args.positional[0]);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    const Value& item = items[i];
    if (!item.is_string()) {
      fail(ErrorKind::kType, "sequence item " + std::to_string(i) + ": expected str instance, " +
                                 type_name(item) + " found");
    }
    if (i) out += self.str();
    out += self.is_safe() && !item.is_safe() ? html_escape(item.str()) : item.str();
    if (out.size() > kMaxStringBytes) fail(ErrorKind::kLimit, "join(): result too large");
  }
  return str_result(self, std::move(out));
}

Value m_format(const Value& self, CallArgs& args) {
  return str_result(self, str_format(self.str(), args));
}

Value m_format_map(const Value& self, CallArgs& args) {
  arity(args, "format_map", 1, 1);
  const Value& m = args.positional[0];
  if (!m.is_dict()) fail(ErrorKind::kType, "format_map() argument must be a mapping");
  CallArgs kw;
  for (const auto& [k, v] : m.dict().entries) {
    if (k.is_string()) kw.keyword.emplace_back(k.str(), v);
  }
  return str_result(self, str_format(self.str(), kw));
}

const std::unordered_map<std::string_view, Method>& str_methods() {
  static const std::unordered_map<std::string_view, Method> kMethods = {
      {"find", m_find},
      {"rfind", m_rfind},
      {"index", m_index},
      {"rindex", m_rindex},
      {"count", m_count},
      {"startswith", m_startswith},
      {"endswith", m_endswith},
      {"strip", m_strip},
      {"lstrip", m_lstrip},
      {"rstrip", m_rstrip},
      {"split", m_split},
      {"rsplit", m_rsplit},
      {"splitlines", m_splitlines},
      {"replace", m_replace},
      {"upper", m_upper},
      {"lower", m_lower},
      {"casefold", m_casefold},
      {"title", m_title},
      {"capitalize", m_capitalize},
      {"swapcase", m_swapcase},
      {"islower", m_islower},
      {"isupper", m_isupper},
      {"istitle", m_istitle},
      {"isdigit", m_isdigit},
      {"isdecimal", m_isdecimal},
      {"isnumeric", m_isnumeric},
      {"isalpha", m_isalpha},
      {"isalnum", m_isalnum},
      {"isspace", m_isspace},
      {"isprintable", m_isprintable},
      {"isascii", m_isascii},
      {"isidentifier", m_isidentifier},
      {"center", m_center},
      {"ljust", m_ljust},
      {"rjust", m_rjust},
      {"zfill", m_zfill},
      {"partition", m_partition},
      {"rpartition", m_rpartition},
      {"removeprefix", m_removeprefix},
      {"removesuffix", m_removesuffix},
      {"expandtabs", m_expandtabs},
      {"join", m_join},
      {"format", m_format},
      {"format_map", m_format_map},
  };
  return kMethods;
}

bool is_linebreak(char32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
         cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

}  // namespace

bool find_str_method(const Value& self, std::string_view name, Value& out) {
  const auto& methods = str_methods();
  auto it = methods.find(name);
  if (it == methods.end()) return false;
  Method m = it->second;
  out = make_native(std::string(name),
                    [self, m](Interpreter&, CallArgs& args) { return m(self, args); });
  return true;
}

std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right) {
  std::u32string set = chars != nullptr ? unicode::to_u32(*chars) : std::u32string();
  auto strip_it = [&](char32_t cp) {
    return chars == nullptr ? unicode::is_space(cp) : set.find(cp) != std::u32string::npos;
  };
  size_t begin = 0, end = s.size();
  if (left) {
    while (begin < end) {
      size_t next = begin;
      if (!strip_it(unicode::next_code_point(s, next))) break;
      begin = next;
    }
  }
  if (right) {
    while (end > begin) {
      size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      size_t next = start;
      if (!strip_it(unicode::next_code_point(s, next))) break;
      end = start;
    }
  }
  return s.substr(begin, end - begin);
}

namespace {

// str.split(sep) / str.rsplit(sep) with an explicit separator.
std::vector<std::string> split_on(const std::string& s, const std::string& d, int64_t maxsplit,
                                  bool from_right) {
  if (d.empty()) fail(ErrorKind::kType, "empty separator");
  std::vector<std::string> parts;
  auto more = [&] { return maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit; };
  if (!from_right) {
    size_t start = 0;
    for (size_t at; more() && (at = s.find(d, start)) != std::string::npos; start = at + d.size()) {
      parts.push_back(s.substr(start, at - start));
    }
    parts.push_back(s.substr(start));
    return parts;
  }
  size_t end = s.size();
  for (size_t at;
       more() && end >= d.size() && (at = s.rfind(d, end - d.size())) != std::string::npos;
       end = at) {
    parts.push_back(s.substr(at + d.size(), end - at - d.size()));
  }
  parts.push_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

// str.split() / str.rsplit(): runs of whitespace separate, the ends are ignored.
std::vector<std::u32string> split_whitespace(const std::u32string& u, int64_t maxsplit,
                                             bool from_right) {
  std::vector<std::u32string> parts;
  auto more = [&] { return maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit; };
  auto space = [&](size_t i) { return unicode::is_space(u[i]); };
  if (!from_right) {
    for (size_t i = 0;;) {
      while (i < u.size() && space(i)) ++i;
      if (i >= u.size()) break;
      if (!more()) {
        parts.push_back(u.substr(i));
        break;
      }
      size_t j = i;
      while (j < u.size() && !space(j)) ++j;
      parts.push_back(u.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  for (size_t i = u.size();;) {
    while (i > 0 && space(i - 1)) --i;
    if (i == 0) break;
    if (!more()) {
      parts.push_back(u.substr(0, i));
      break;
    }
    size_t j = i;
    while (j > 0 && !space(j - 1)) --j;
    parts.push_back(u.substr(j, i - j));
    i = j;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

}  // namespace

ValueList py_split(const std::string& s, const Value* sep, int64_t maxsplit, bool from_right) {
  ValueList out;
  if (sep != nullptr) {
    for (std::string& p : split_on(s, sep->str(), maxsplit, from_right)) {
      out.push_back(Value::string(std::move(p)));
    }
    return out;
  }
  for (const std::u32string& p : split_whitespace(unicode::to_u32(s), maxsplit, from_right)) {
    out.push_back(Value::string(unicode::to_utf8(p)));
  }
  return out;
}

ValueList py_splitlines(const std::string& s, bool keepends) {
  ValueList out;
  size_t pos = 0, line_start = 0;
  while (pos < s.size()) {
    size_t cp_start = pos;
    char32_t cp = unicode::next_code_point(s, pos);
    if (!is_linebreak(cp)) continue;
    size_t eol = pos;
    if (cp == '\r' && pos < s.size() && s[pos] == '\n') eol = ++pos;
    out.push_back(Value::string(s.substr(line_start, (keepends ? eol : cp_start) - line_start)));
    line_start = pos;
  }
  if (line_start < s.size()) out.push_back(Value::string(s.substr(line_start)));
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& repl,
                       int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old.empty()) {
    size_t pos = 0;
    while (pos <= s.size()) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (pos == s.size()) break;
      size_t start = pos;
      unicode::next_code_point(s, pos);
      out.append(s, start, pos - start);
      if (out.size() > kMaxStringBytes) fail(ErrorKind::kLimit, "replace(): result too large");
    }
    return out;
  }
  size_t start = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += repl;
    start = at + old.size();
    ++done;
    if (out.size() > kMaxStringBytes) fail(ErrorKind::kLimit, "replace(): result too large");
  }
  out.append(s, start, std::string::npos);
  return out;
}

std::string py_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) unicode::append_upper(out, unicode::next_code_point(s, pos));
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::u32string u = unicode::to_u32(s);
  for (size_t i = 0; i < u.size(); ++i) {
    if (u[i] == 0x3A3) {  // final sigma: after a cased letter and not before one
      bool after = i > 0 && unicode::is_cased(u[i - 1]);
      bool before = i + 1 < u.size() && unicode::is_cased(u[i + 1]);
      unicode::append_utf8(out, after && !before ? 0x3C2 : 0x3C3);
      continue;
    }
    unicode::append_lower(out, u[i]);
  }
  return out;
}

std::string py_title(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t cp = unicode::next_code_point(s, pos);
    if (previous_cased) {
      unicode::append_lower(out, cp);
    } else {
      unicode::append_title(out, cp);
    }
    previous_cased = unicode::is_cased(cp);
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  if (s.empty()) return {};
  std::string out;
  size_t pos = 0;
  unicode::append_title(out, unicode::next_code_point(s, pos));
  return out + py_lower(s.substr(pos));
}

}  // namespace pagoda::jinja
