#include "jinja/json_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja/error.h"
#include "jinja/limits.h"
#include "jinja/operators.h"
#include "jinja/unicode.h"

namespace pagoda::jinja {
namespace {

void append_u_escape(std::string& out, unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "\\u%04x", v);
  out += buf;
}

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  size_t pos = 0;
  while (pos < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[pos]);
    if (c >= 0x80) {
      size_t start = pos;
      char32_t cp = unicode::next_code_point(s, pos);
      if (!ensure_ascii) {
        out.append(s.substr(start, pos - start));
      } else if (cp < 0x10000) {
        append_u_escape(out, cp);
      } else {
        char32_t v = cp - 0x10000;
        append_u_escape(out, 0xD800 + (v >> 10));
        append_u_escape(out, 0xDC00 + (v & 0x3FF));
      }
      continue;
    }
    ++pos;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || (ensure_ascii && c == 0x7F)) {
          append_u_escape(out, c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return float_repr(d);
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& options) : opt_(options) {}

  void dump(const Value& v, int level) {
    if (level > 512) fail(ErrorKind::kLimit, "tojson: value nested too deeply");
    if (out_.size() > kMaxOutputBytes) fail(ErrorKind::kLimit, "tojson: output too large");
    switch (v.type()) {
      case ValueType::kNone:
        out_ += "null";
        return;
      case ValueType::kBool:
        out_ += v.as_bool() ? "true" : "false";
        return;
      case ValueType::kInt:
        out_ += std::to_string(v.as_int());
        return;
      case ValueType::kFloat:
        out_ += json_float(v.as_float());
        return;
      case ValueType::kString:
        append_json_string(out_, v.str(), opt_.ensure_ascii);
        return;
      case ValueType::kList:
      case ValueType::kTuple:
        dump_list(v.items(), level);
        return;
      case ValueType::kDict:
        dump_dict(v.dict(), level);
        return;
      case ValueType::kUndefined:
      default:
        fail(ErrorKind::kType, "Object of type " + type_name(v) + " is not JSON serializable");
    }
  }

  std::string take() { return std::move(out_); }

 private:
  void newline(int level) {
    if (!opt_.has_indent) return;
    out_.push_back('\n');
    for (int i = 0; i < level; ++i) out_ += opt_.indent;
  }

  void dump_list(const ValueList& items, int level) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_.push_back('[');
    newline(level + 1);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) {
        out_ += opt_.item_separator;
        newline(level + 1);
      }
      dump(items[i], level + 1);
    }
    newline(level);
    out_.push_back(']');
  }

  // Python converts non-string keys: float repr, int, true/false/null.
  std::string key_text(const Value& k) {
    switch (k.type()) {
      case ValueType::kString:
        return k.str();
      case ValueType::kFloat:
        return json_float(k.as_float());
      case ValueType::kBool:
        return k.as_bool() ? "true" : "false";
      case ValueType::kInt:
        return std::to_string(k.as_int());
      case ValueType::kNone:
        return "null";
      default:
        fail(ErrorKind::kType, "keys must be str, int, float, bool or None, not " + type_name(k));
    }
  }

  void dump_dict(const Dict& d, int level) {
    if (d.entries.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& e : d.entries) entries.push_back(&e);
    if (opt_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return less_than(a->first, b->first); });
    }
    out_.push_back('{');
    newline(level + 1);
    bool first = true;
    for (const auto* e : entries) {
      if (!first) {
        out_ += opt_.item_separator;
        newline(level + 1);
      }
      first = false;
      append_json_string(out_, key_text(e->first), opt_.ensure_ascii);
      out_ += opt_.key_separator;
      dump(e->second, level + 1);
    }
    newline(level);
    out_.push_back('}');
  }

  const JsonDumpOptions& opt_;
  std::string out_;
};

Value from_json_impl(const nlohmann::ordered_json& j, int depth) {
  if (depth > 500) fail(ErrorKind::kLimit, "JSON input nested deeper than 500 levels");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::floating(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::floating(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_impl(e, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      d.entries.reserve(j.size());
      for (const auto& [k, e] : j.items()) {
        d.entries.emplace_back(Value::string(k), from_json_impl(e, depth + 1));
      }
      return Value::dict(std::move(d));
    }
    default:
      fail(ErrorKind::kType, "unsupported JSON value (binary)");
  }
}

}  // namespace

Value value_from_json(const nlohmann::ordered_json& j) {
  return from_json_impl(j, 0);
}

std::string json_dumps(const Value& v, const JsonDumpOptions& options) {
  Dumper dumper(options);
  dumper.dump(v, 0);
  return dumper.take();
}

}  // namespace pagoda::jinja
