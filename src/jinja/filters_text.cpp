// String filters: upper, lower, title, capitalize, trim, replace, indent,
// center, truncate, wordcount, striptags, format, urlencode, xmlattr,
// filesizeformat.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja/call_args.h"
#include "jinja/error.h"
#include "jinja/filters_impl.h"
#include "jinja/limits.h"
#include "jinja/methods.h"
#include "jinja/operators.h"
#include "jinja/py_format.h"
#include "jinja/unicode.h"

namespace pagoda::jinja {
namespace {

Value f_upper(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("upper", args);
  Value s = soft_str(value);
  return Value::string(py_upper(s.str()), s.is_safe());
}

Value f_lower(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("lower", args);
  Value s = soft_str(value);
  return Value::string(py_lower(s.str()), s.is_safe());
}

Value f_capitalize(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("capitalize", args);
  Value s = soft_str(value);
  return Value::string(py_capitalize(s.str()), s.is_safe());
}

// jinja2's title: words begin after runs of '-', whitespace, '(', '{', '[', '<'.
Value f_title(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("title", args);
  std::u32string u = unicode::to_u32(soft_str(value).str());
  auto is_sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || unicode::is_space(c);
  };
  std::string out;
  size_t i = 0;
  while (i < u.size()) {
    size_t j = i;
    bool sep = is_sep(u[i]);
    while (j < u.size() && is_sep(u[j]) == sep) ++j;
    if (sep) {
      out += unicode::to_utf8(u.substr(i, j - i));
    } else {
      unicode::append_upper(out, u[i]);
      out += py_lower(unicode::to_utf8(u.substr(i + 1, j - i - 1)));
    }
    i = j;
  }
  return Value::string(std::move(out));
}

Value f_trim(Interpreter&, const Value& value, CallArgs& args) {
  BoundArgs a("trim", args, {"chars"});
  Value s = soft_str(value);
  if (a.has(0) && !a.get(0).is_none()) {
    std::string chars = a.string(0, "");
    return Value::string(py_strip(s.str(), &chars, true, true), s.is_safe());
  }
  return Value::string(py_strip(s.str(), nullptr, true, true), s.is_safe());
}

Value f_replace(Interpreter& interp, const Value& value, CallArgs& args) {
  BoundArgs a("replace", args, {"old", "new", "count"});
  if (!a.has(0) || !a.has(1)) fail(ErrorKind::kType, "replace() missing required arguments");
  int64_t count = a.has(2) && !a.get(2).is_none() ? a.integer(2, -1) : -1;
  std::string out = py_replace(to_str(value), to_str(a.get(0)), to_str(a.get(1)), count);
  interp.count_bytes(out.size());
  return Value::string(std::move(out));
}

Value f_indent(Interpreter&, const Value& value, CallArgs& args) {
  BoundArgs a("indent", args, {"width", "first", "blank"});
  std::string indention = "    ";
  if (a.has(0)) {
    const Value& w = a.get(0);
    if (w.is_string()) {
      indention = w.str();
    } else if (w.is_int()) {
      indention.assign(static_cast<size_t>(std::clamp<int64_t>(w.as_int(), 0, 10000)), ' ');
    } else {
      fail(ErrorKind::kType, "can't multiply sequence by non-int of type '" + type_name(w) + "'");
    }
  }
  if (value.is_undefined()) fail_undefined(value);
  if (!value.is_string()) {
    fail(ErrorKind::kType,
         "unsupported operand type(s) for +=: '" + type_name(value) + "' and 'str'");
  }
  std::string s = value.str() + "\n";  // jinja2 appends a newline before splitlines()
  ValueList lines = py_splitlines(s, false);
  std::string rv;
  if (a.flag(2, false)) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + indention;
      rv += lines[i].str();
    }
  } else {
    rv = lines.empty() ? "" : lines[0].str();
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].str().empty()) rv += indention;
      rv += lines[i].str();
    }
  }
  if (a.flag(1, false)) rv = indention + rv;
  if (rv.size() > kMaxStringBytes) fail(ErrorKind::kLimit, "indent(): result too large");
  return Value::string(std::move(rv), value.is_safe());
}

Value f_center(Interpreter& interp, const Value& value, CallArgs& args) {
  BoundArgs a("center", args, {"width"});
  CallArgs inner;
  inner.positional.push_back(Value::integer(a.integer(0, 80)));
  Value method;
  find_str_method(soft_str(value), "center", method);
  return interp.call(method, inner);
}

Value f_truncate(Interpreter&, const Value& value, CallArgs& args) {
  BoundArgs a("truncate", args, {"length", "killwords", "end", "leeway"});
  int64_t length = a.integer(0, 255);
  bool killwords = a.flag(1, false);
  std::string end = a.string(2, "...");
  int64_t leeway = a.has(3) && !a.get(3).is_none() ? a.integer(3, 5) : 5;
  std::u32string end_u = unicode::to_u32(end);
  if (length < static_cast<int64_t>(end_u.size())) {
    fail(ErrorKind::kType,
         "expected length >= " + std::to_string(end_u.size()) + ", got " + std::to_string(length));
  }
  if (leeway < 0) fail(ErrorKind::kType, "expected leeway >= 0, got " + std::to_string(leeway));
  if (py_len(value) <= length + leeway) return value;
  if (!value.is_string())
    fail(ErrorKind::kType, "truncate: expected a string, got " + type_name(value));
  std::u32string s = unicode::to_u32(value.str());
  std::u32string head = s.substr(0, static_cast<size_t>(length) - end_u.size());
  if (!killwords) {
    size_t sp = head.rfind(U' ');
    if (sp != std::u32string::npos) head = head.substr(0, sp);
  }
  return Value::string(unicode::to_utf8(head) + end);
}

Value f_wordcount(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("wordcount", args);
  std::u32string u = unicode::to_u32(soft_str(value).str());
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : u) {
    bool w = unicode::is_word(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

// markupsafe's unescape for the entities striptags may leave.
std::string html_unescape(const std::string& s) {
  static const std::pair<const char*, const char*> kNamed[] = {
      {"&amp;", "&"}, {"&lt;", "<"},   {"&gt;", ">"},         {"&quot;", "\""},
      {"&#39;", "'"}, {"&apos;", "'"}, {"&nbsp;", "\xC2\xA0"}};
  std::string out;
  for (size_t i = 0; i < s.size();) {
    if (s[i] != '&') {
      out.push_back(s[i++]);
      continue;
    }
    bool done = false;
    for (const auto& [entity, text] : kNamed) {
      size_t n = std::char_traits<char>::length(entity);
      if (s.compare(i, n, entity) == 0) {
        out += text;
        i += n;
        done = true;
        break;
      }
    }
    if (done) continue;
    if (i + 2 < s.size() && s[i + 1] == '#') {
      size_t j = i + 2;
      bool hex = j < s.size() && (s[j] == 'x' || s[j] == 'X');
      if (hex) ++j;
      size_t start = j;
      while (j < s.size() && std::isxdigit(static_cast<unsigned char>(s[j])) &&
             (hex || std::isdigit(static_cast<unsigned char>(s[j]))))
        ++j;
      if (j > start && j - start < 8) {
        unsigned long cp = std::strtoul(s.substr(start, j - start).c_str(), nullptr, hex ? 16 : 10);
        if (cp > 0 && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF)) {
          unicode::append_utf8(out, static_cast<char32_t>(cp));
          i = j < s.size() && s[j] == ';' ? j + 1 : j;
          continue;
        }
      }
    }
    out.push_back(s[i++]);
  }
  return out;
}

Value f_striptags(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("striptags", args);
  std::string v = to_str(value);
  for (size_t start; (start = v.find("<!--")) != std::string::npos;) {
    size_t end = v.find("-->", start);
    if (end == std::string::npos) break;
    v = v.substr(0, start) + v.substr(end + 3);
  }
  for (size_t start; (start = v.find('<')) != std::string::npos;) {
    size_t end = v.find('>', start);
    if (end == std::string::npos) break;
    v = v.substr(0, start) + v.substr(end + 1);
  }
  std::string collapsed;
  for (const Value& w : py_split(v, nullptr, -1, false)) {
    if (!collapsed.empty()) collapsed += ' ';
    collapsed += w.str();
  }
  return Value::string(html_unescape(collapsed));
}

Value f_format(Interpreter&, const Value& value, CallArgs& args) {
  if (!args.positional.empty() && !args.keyword.empty()) {
    fail(ErrorKind::kType, "can't handle positional and keyword arguments at the same time");
  }
  Value fmt = soft_str(value);
  Value params;
  if (!args.keyword.empty()) {
    Dict d;
    for (auto& [k, v] : args.keyword) d.set(Value::string(k), v);
    params = Value::dict(std::move(d));
  } else {
    params = Value::tuple(args.positional);
  }
  return Value::string(percent_format(fmt.str(), params, fmt.is_safe()), fmt.is_safe());
}

// jinja2.utils.url_quote: UTF-8 percent-encoding, '/' kept unless for a query string.
std::string url_quote(const Value& v, bool for_qs) {
  std::string s = to_str(v);
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-' || c == '~' || (c == '/' && !for_qs)) {
      out.push_back(static_cast<char>(c));
    } else if (c == ' ' && for_qs) {
      out.push_back('+');
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

Value f_urlencode(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("urlencode", args);
  bool iterable =
      value.is_sequence_like() || value.is_dict() || value.type() == ValueType::kIterator;
  if (value.is_string() || !iterable) return Value::string(url_quote(value, false));
  ValueList pairs;
  if (value.is_dict()) {
    for (const auto& [k, v] : value.dict().entries) pairs.push_back(Value::tuple({k, v}));
  } else {
    pairs = iterate(value);
  }
  std::string out;
  for (const Value& p : pairs) {
    ValueList kv = iterate(p);
    if (kv.size() != 2) fail(ErrorKind::kType, "urlencode: expected (key, value) pairs");
    if (!out.empty()) out += "&";
    out += url_quote(kv[0], true) + "=" + url_quote(kv[1], true);
  }
  return Value::string(std::move(out));
}

Value f_xmlattr(Interpreter&, const Value& value, CallArgs& args) {
  BoundArgs a("xmlattr", args, {"autospace"});
  if (!value.is_dict()) fail(ErrorKind::kType, "xmlattr: expected a mapping");
  std::string rv;
  for (const auto& [k, v] : value.dict().entries) {
    if (v.is_none() || v.is_undefined()) continue;
    std::string key = to_str(k);
    if (key.find_first_of(" \t\n\r\f\v/>=") != std::string::npos) {
      fail(ErrorKind::kType, "Invalid character in attribute name: " + repr(k));
    }
    if (!rv.empty()) rv += " ";
    rv += escape_value(k).str() + "=\"" + escape_value(v).str() + "\"";
  }
  if (a.flag(0, true) && !rv.empty()) rv = " " + rv;
  return Value::string(std::move(rv));
}

Value f_filesizeformat(Interpreter&, const Value& value, CallArgs& args) {
  BoundArgs a("filesizeformat", args, {"binary"});
  bool binary = a.flag(0, false);
  double bytes;
  if (value.is_number()) {
    bytes = value.as_float();
  } else if (value.is_string()) {
    bytes = std::strtod(value.str().c_str(), nullptr);
  } else {
    fail(ErrorKind::kType, "float() argument must be a string or a real number");
  }
  double base = binary ? 1024 : 1000;
  static const char* kDecimal[] = {"kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB"};
  static const char* kBinary[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"};
  char buf[64];
  if (bytes == 1) return Value::string("1 Byte");
  if (bytes < base) {
    std::snprintf(buf, sizeof(buf), "%d Bytes", static_cast<int>(bytes));
    return Value::string(buf);
  }
  for (int i = 0; i < 8; ++i) {
    double unit = std::pow(base, i + 2);
    if (bytes < unit || i == 7) {
      std::snprintf(buf, sizeof(buf), "%.1f %s", base * bytes / unit,
                    binary ? kBinary[i] : kDecimal[i]);
      break;
    }
  }
  return Value::string(buf);
}

}  // namespace

void add_text_filters(FilterTable& t) {
  t.insert({{"upper", f_upper},
            {"lower", f_lower},
            {"capitalize", f_capitalize},
            {"title", f_title},
            {"trim", f_trim},
            {"replace", f_replace},
            {"indent", f_indent},
            {"center", f_center},
            {"truncate", f_truncate},
            {"wordcount", f_wordcount},
            {"striptags", f_striptags},
            {"format", f_format},
            {"urlencode", f_urlencode},
            {"xmlattr", f_xmlattr},
            {"filesizeformat", f_filesizeformat}});
}

}  // namespace pagoda::jinja
