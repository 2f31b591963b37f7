#include "jinja/py_format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja/error.h"
#include "jinja/operators.h"
#include "jinja/unicode.h"

namespace pagoda::jinja {
namespace {

[[noreturn]] void fail_value(const std::string& message) {
  fail(ErrorKind::kType, message);
}

// Python ascii(): repr with non-ASCII code points escaped.
std::string ascii_repr(const Value& v) {
  std::string r = repr(v);
  std::string out;
  size_t pos = 0;
  while (pos < r.size()) {
    char32_t cp = unicode::next_code_point(r, pos);
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else {
      unicode::append_py_escape(out, cp);
    }
  }
  return out;
}

// Pads `s` to `width` code points; align '<', '>', '^' or '=' (after the sign).
std::string pad(std::string s, size_t width, char32_t fill, char align) {
  size_t len = unicode::num_code_points(s);
  if (len >= width) return s;
  size_t n = width - len;
  std::string fill_s;
  unicode::append_utf8(fill_s, fill);
  auto repeat = [&](size_t k) {
    std::string r;
    for (size_t i = 0; i < k; ++i) r += fill_s;
    return r;
  };
  switch (align) {
    case '<':
      return s + repeat(n);
    case '^':
      return repeat(n / 2) + s + repeat(n - n / 2);
    case '=': {
      size_t sign = (!s.empty() && (s[0] == '-' || s[0] == '+' || s[0] == ' ')) ? 1 : 0;
      if (s.size() > sign + 1 && s[sign] == '0' &&
          (s[sign + 1] == 'x' || s[sign + 1] == 'X' || s[sign + 1] == 'o' || s[sign + 1] == 'b')) {
        sign += 2;
      }
      return s.substr(0, sign) + repeat(n) + s.substr(sign);
    }
    default:
      return repeat(n) + s;
  }
}

std::string truncate_code_points(const std::string& s, size_t n) {
  size_t pos = 0, count = 0;
  while (pos < s.size() && count < n) {
    unicode::next_code_point(s, pos);
    ++count;
  }
  return s.substr(0, pos);
}

std::string c_format_double(double d, const std::string& flags, int precision, char type) {
  std::string fmt = "%" + flags + "." + std::to_string(precision) + type;
  char buf[512];
  int n = std::snprintf(buf, sizeof(buf), fmt.c_str(), d);
  if (n < static_cast<int>(sizeof(buf))) return std::string(buf, n > 0 ? n : 0);
  std::string big(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(big.data(), big.size(), fmt.c_str(), d);
  big.resize(static_cast<size_t>(n));
  return big;
}

std::string int_digits(int64_t v, int base, bool upper) {
  if (v == 0) return "0";
  uint64_t u = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  while (u > 0) {
    out.insert(out.begin(), digits[u % static_cast<uint64_t>(base)]);
    u /= static_cast<uint64_t>(base);
  }
  return out;
}

std::string group_digits(const std::string& digits, char sep, size_t every) {
  std::string out;
  size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    out.push_back(digits[i]);
    size_t left = n - i - 1;
    if (left > 0 && left % every == 0) out.push_back(sep);
  }
  return out;
}

// ---- printf-style -------------------------------------------------------

struct PercentSpec {
  std::string flags;
  int width = -1;
  int precision = -1;
  char type = 's';
};

bool has_flag(const PercentSpec& spec, char flag) {
  return spec.flags.find(flag) != std::string::npos;
}

// %s %r %a %c: the text of the argument.
std::string percent_text(const PercentSpec& spec, const Value& arg, bool escape_args) {
  std::string body;
  if (spec.type == 'c') {
    if (arg.is_string() && unicode::num_code_points(arg.str()) == 1) return arg.str();
    if (!arg.is_int() || arg.as_int() < 0 || arg.as_int() > 0x10FFFF)
      fail_value("%c requires int or char");
    unicode::append_utf8(body, static_cast<char32_t>(arg.as_int()));
    return body;
  }
  body = spec.type == 's' ? to_str(arg) : spec.type == 'r' ? repr(arg) : ascii_repr(arg);
  if (escape_args && !(arg.is_string() && arg.is_safe())) body = html_escape(body);
  if (spec.precision >= 0) body = truncate_code_points(body, static_cast<size_t>(spec.precision));
  return body;
}

// %d %i %u %x %X %o: an integer (floats are truncated for %d).
std::string percent_integer(const PercentSpec& spec, const Value& arg) {
  bool int_only = spec.type == 'x' || spec.type == 'X' || spec.type == 'o';
  if (!arg.is_number() || (int_only && arg.is_float())) {
    fail_value(std::string("%") + spec.type + " format: " +
               (int_only ? "an integer" : "a real number") + " is required, not " + type_name(arg));
  }
  if (arg.is_float() && !std::isfinite(arg.as_float())) {
    fail_value("cannot convert float infinity or NaN to integer");
  }
  int64_t v = arg.is_float() ? static_cast<int64_t>(std::trunc(arg.as_float())) : arg.as_int();
  int base = spec.type == 'o' ? 8 : int_only ? 16 : 10;
  std::string digits = int_digits(v, base, spec.type == 'X');
  if (spec.precision > static_cast<int>(digits.size())) {
    digits.insert(0, static_cast<size_t>(spec.precision) - digits.size(), '0');
  }
  std::string prefix = v < 0 ? "-" : has_flag(spec, '+') ? "+" : has_flag(spec, ' ') ? " " : "";
  if (has_flag(spec, '#') && base == 16) prefix += spec.type == 'X' ? "0X" : "0x";
  if (has_flag(spec, '#') && base == 8) prefix += "0o";
  return prefix + digits;
}

std::string percent_one(const PercentSpec& spec, const Value& arg, bool escape_args) {
  std::string body;
  bool numeric = true;
  if (std::string_view("srac").find(spec.type) != std::string_view::npos) {
    body = percent_text(spec, arg, escape_args);
    numeric = false;
  } else if (std::string_view("diuxXo").find(spec.type) != std::string_view::npos) {
    body = percent_integer(spec, arg);
  } else {  // e E f F g G
    if (!arg.is_number()) fail_value("must be real number, not " + type_name(arg));
    std::string flags;
    for (char f : {'+', ' ', '#'}) {
      if (has_flag(spec, f)) flags += f;
    }
    body =
        c_format_double(arg.as_float(), flags, spec.precision < 0 ? 6 : spec.precision, spec.type);
  }
  if (spec.width < 0) return body;
  const size_t width = static_cast<size_t>(spec.width);
  if (has_flag(spec, '-')) return pad(body, width, ' ', '<');
  bool finite = !(arg.is_float() && !std::isfinite(arg.as_float()));
  if (has_flag(spec, '0') && numeric && finite) return pad(body, width, '0', '=');
  return pad(body, width, ' ', '>');
}

int parse_int(std::string_view s, size_t& i) {
  int v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    v = v * 10 + (s[i] - '0');
    if (v > 100000) fail_value("width or precision too big");
    ++i;
  }
  return v;
}

// ---- format-spec mini-language --------------------------------------------

struct FormatSpec {
  char32_t fill = ' ';
  char align = 0;
  char sign = 0;
  bool alt = false;
  bool zero = false;
  int width = -1;
  char grouping = 0;
  int precision = -1;
  char type = 0;
};

FormatSpec parse_spec(std::string_view spec) {
  FormatSpec f;
  std::u32string s = unicode::to_u32(spec);
  size_t i = 0;
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (s.size() >= 2 && is_align(s[1])) {
    f.fill = s[0];
    f.align = static_cast<char>(s[1]);
    i = 2;
  } else if (!s.empty() && is_align(s[0])) {
    f.align = static_cast<char>(s[0]);
    i = 1;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' '))
    f.sign = static_cast<char>(s[i++]);
  if (i < s.size() && s[i] == 'z') ++i;
  if (i < s.size() && s[i] == '#') {
    f.alt = true;
    ++i;
  }
  if (i < s.size() && s[i] == '0') {
    f.zero = true;
    ++i;
  }
  std::string ascii = unicode::to_utf8(s.substr(i));
  size_t j = 0;
  if (j < ascii.size() && ascii[j] >= '0' && ascii[j] <= '9') f.width = parse_int(ascii, j);
  if (j < ascii.size() && (ascii[j] == ',' || ascii[j] == '_')) f.grouping = ascii[j++];
  if (j < ascii.size() && ascii[j] == '.') {
    ++j;
    if (j >= ascii.size() || ascii[j] < '0' || ascii[j] > '9')
      fail_value("Format specifier missing precision");
    f.precision = parse_int(ascii, j);
  }
  if (j < ascii.size()) f.type = ascii[j++];
  if (j != ascii.size()) fail_value("Invalid format specifier");
  return f;
}

std::string apply_width(std::string body, const FormatSpec& f, char default_align) {
  if (f.width < 0) return body;
  char align = f.align ? f.align : (f.zero ? '=' : default_align);
  char32_t fill = (f.zero && !f.align) ? U'0' : f.fill;
  return pad(std::move(body), static_cast<size_t>(f.width), fill, align);
}

std::string format_int(int64_t v, const FormatSpec& f) {
  char type = f.type ? f.type : 'd';
  std::string digits;
  std::string prefix;
  switch (type) {
    case 'b':
      digits = int_digits(v, 2, false);
      if (f.alt) prefix = "0b";
      break;
    case 'o':
      digits = int_digits(v, 8, false);
      if (f.alt) prefix = "0o";
      break;
    case 'x':
    case 'X':
      digits = int_digits(v, 16, type == 'X');
      if (f.alt) prefix = type == 'X' ? "0X" : "0x";
      break;
    case 'c': {
      if (v < 0 || v > 0x10FFFF) fail_value("%c arg not in range(0x110000)");
      std::string s;
      unicode::append_utf8(s, static_cast<char32_t>(v));
      return apply_width(s, f, '<');
    }
    case 'd':
    case 'n':
      digits = int_digits(v, 10, false);
      break;
    default:
      fail_value(std::string("Unknown format code '") + type + "' for object of type 'int'");
  }
  if (f.grouping) digits = group_digits(digits, f.grouping, type == 'd' || type == 'n' ? 3 : 4);
  std::string sign = v < 0 ? "-" : f.sign == '+' ? "+" : f.sign == ' ' ? " " : "";
  return apply_width(sign + prefix + digits, f, '>');
}

std::string format_float(double d, const FormatSpec& f) {
  char type = f.type;
  std::string body;
  std::string flags;
  if (f.sign == '+') flags += '+';
  if (f.sign == ' ') flags += ' ';
  if (f.alt) flags += '#';
  if (type == 0) {
    if (f.precision < 0) {
      body = float_repr(d);
      if (f.sign == '+' && d >= 0) body = "+" + body;
      if (f.sign == ' ' && d >= 0) body = " " + body;
    } else {
      body = c_format_double(d, flags, f.precision == 0 ? 1 : f.precision, 'g');
      if (std::isfinite(d) && body.find_first_of(".e") == std::string::npos) body += ".0";
    }
  } else if (type == '%') {
    body = c_format_double(d * 100.0, flags, f.precision < 0 ? 6 : f.precision, 'f') + "%";
  } else if (type == 'e' || type == 'E' || type == 'f' || type == 'F' || type == 'g' ||
             type == 'G' || type == 'n') {
    body = c_format_double(d, flags, f.precision < 0 ? 6 : f.precision, type == 'n' ? 'g' : type);
  } else {
    fail_value(std::string("Unknown format code '") + type + "' for object of type 'float'");
  }
  if (f.grouping && std::isfinite(d)) {
    size_t start = (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
    size_t end = start;
    while (end < body.size() && body[end] >= '0' && body[end] <= '9') ++end;
    body = body.substr(0, start) + group_digits(body.substr(start, end - start), f.grouping, 3) +
           body.substr(end);
  }
  return apply_width(body, f, '>');
}

// ---- str.format fields --------------------------------------------------

Value lookup_field(std::string_view name, const CallArgs& args, size_t& auto_index, int& mode) {
  size_t i = 0;
  while (i < name.size() && name[i] != '.' && name[i] != '[') ++i;
  std::string_view head = name.substr(0, i);
  Value v;
  if (head.empty() || (head[0] >= '0' && head[0] <= '9')) {
    size_t index;
    if (head.empty()) {
      if (mode == 2)
        fail_value("cannot switch from manual field specification to automatic field numbering");
      mode = 1;
      index = auto_index++;
    } else {
      if (mode == 1)
        fail_value("cannot switch from automatic field numbering to manual field specification");
      mode = 2;
      size_t j = 0;
      index = static_cast<size_t>(parse_int(head, j));
      if (j != head.size()) fail_value("invalid field name");
    }
    if (index >= args.positional.size()) {
      fail(ErrorKind::kType, "Replacement index " + std::to_string(index) +
                                 " out of range for positional args tuple");
    }
    v = args.positional[index];
  } else {
    bool found = false;
    for (const auto& [k, val] : args.keyword) {
      if (k == head) {
        v = val;
        found = true;
      }
    }
    if (!found) fail(ErrorKind::kType, "KeyError: '" + std::string(head) + "'");
  }
  while (i < name.size()) {
    if (name[i] == '.') {
      size_t j = i + 1;
      while (j < name.size() && name[j] != '.' && name[j] != '[') ++j;
      fail(ErrorKind::kType, "'" + type_name(v) + "' object has no attribute '" +
                                 std::string(name.substr(i + 1, j - i - 1)) + "'");
    }
    size_t close = name.find(']', i);
    if (close == std::string_view::npos) fail_value("Missing ']' in format string");
    std::string_view key = name.substr(i + 1, close - i - 1);
    bool numeric = !key.empty() && key.find_first_not_of("0123456789") == std::string_view::npos;
    const Value* item = nullptr;
    if (v.is_dict()) {
      item = numeric ? v.dict().find(Value::integer(std::stoll(std::string(key))))
                     : v.dict().find(key);
    } else if (v.is_sequence_like() && numeric) {
      size_t idx = std::stoul(std::string(key));
      if (idx < v.items().size()) item = &v.items()[idx];
    }
    if (item == nullptr) fail(ErrorKind::kType, "KeyError or IndexError: " + std::string(key));
    v = *item;
    i = close + 1;
  }
  return v;
}

// Python's PyUnicode_Format: walks `fmt`, taking arguments as specs ask.
class PercentFormatter {
 public:
  PercentFormatter(std::string_view fmt, const Value& args, bool escape_args)
      : fmt_(fmt), escape_args_(escape_args) {
    mapping_ = args.is_dict() ? &args.dict() : nullptr;
    // Any subscriptable non-tuple, non-str argument counts as a mapping:
    // unused arguments are then not an error.
    mapping_like_ = mapping_ != nullptr || args.type() == ValueType::kList || args.is_undefined() ||
                    (args.type() == ValueType::kView && args.seq().view == ViewKind::kRange);
    if (args.type() == ValueType::kTuple) {
      positional_ = args.items();
    } else {
      positional_.push_back(args);
    }
  }

  std::string run() {
    std::string out;
    while (i_ < fmt_.size()) {
      char c = fmt_[i_++];
      if (c != '%') {
        out.push_back(c);
        continue;
      }
      if (i_ >= fmt_.size()) fail_value("incomplete format");
      if (fmt_[i_] == '%') {
        out.push_back('%');
        ++i_;
        continue;
      }
      const Value* keyed = fmt_[i_] == '(' ? parse_key() : nullptr;
      PercentSpec spec = parse_spec();
      out += percent_one(spec, keyed != nullptr ? *keyed : take_arg(), escape_args_);
      if (out.size() > (16u << 20)) fail(ErrorKind::kLimit, "formatted string too long");
    }
    if (next_arg_ < positional_.size() && !mapping_like_) {
      fail_value("not all arguments converted during string formatting");
    }
    return out;
  }

 private:
  const Value& take_arg() {
    if (next_arg_ >= positional_.size()) fail_value("not enough arguments for format string");
    return positional_[next_arg_++];
  }

  // %(name)s: the value of key `name`.
  const Value* parse_key() {
    if (!mapping_like_) fail_value("format requires a mapping");
    if (mapping_ == nullptr) fail_value("list indices must be integers or slices, not str");
    int level = 1;
    size_t start = ++i_;
    while (i_ < fmt_.size() && level > 0) {
      if (fmt_[i_] == '(') ++level;
      if (fmt_[i_] == ')') --level;
      ++i_;
    }
    if (level > 0) fail_value("incomplete format key");
    std::string_view key = fmt_.substr(start, i_ - 1 - start);
    const Value* v = mapping_->find(key);
    if (v == nullptr) fail(ErrorKind::kType, "KeyError: '" + std::string(key) + "'");
    return v;
  }

  // Width or precision: digits, or '*' taking an int argument.
  int parse_number(bool is_width, PercentSpec& spec) {
    if (i_ < fmt_.size() && fmt_[i_] == '*') {
      ++i_;
      const Value& v = take_arg();
      if (!v.is_int()) fail_value("* wants int");
      if (is_width && v.as_int() < 0) spec.flags += '-';
      return static_cast<int>(
          std::clamp<int64_t>(is_width ? std::abs(v.as_int()) : v.as_int(), 0, 100000));
    }
    return parse_int(fmt_, i_);
  }

  PercentSpec parse_spec() {
    PercentSpec spec;
    while (i_ < fmt_.size() && std::string_view("-+ #0").find(fmt_[i_]) != std::string_view::npos) {
      spec.flags.push_back(fmt_[i_++]);
    }
    if (i_ < fmt_.size() && (fmt_[i_] == '*' || (fmt_[i_] >= '0' && fmt_[i_] <= '9'))) {
      spec.width = parse_number(true, spec);
    }
    if (i_ < fmt_.size() && fmt_[i_] == '.') {
      ++i_;
      spec.precision = parse_number(false, spec);
    }
    while (i_ < fmt_.size() && (fmt_[i_] == 'h' || fmt_[i_] == 'l' || fmt_[i_] == 'L')) ++i_;
    if (i_ >= fmt_.size()) fail_value("incomplete format");
    spec.type = fmt_[i_++];
    if (std::string_view("diouxXeEfFgGcrsa").find(spec.type) == std::string_view::npos) {
      fail_value(std::string("unsupported format character '") + spec.type + "'");
    }
    return spec;
  }

  std::string_view fmt_;
  bool escape_args_;
  const Dict* mapping_ = nullptr;
  bool mapping_like_ = false;
  ValueList positional_;
  size_t next_arg_ = 0;
  size_t i_ = 0;
};

}  // namespace

std::string percent_format(std::string_view fmt, const Value& args, bool escape_args) {
  return PercentFormatter(fmt, args, escape_args).run();
}

std::string format_with_spec(const Value& v, std::string_view spec) {
  if (spec.empty()) return to_str(v);
  FormatSpec f = parse_spec(spec);
  if (v.is_string()) {
    if (f.sign) fail_value("Sign not allowed in string format specifier");
    if (f.type && f.type != 's') {
      fail_value(std::string("Unknown format code '") + f.type + "' for object of type 'str'");
    }
    std::string body = v.str();
    if (f.precision >= 0) body = truncate_code_points(body, static_cast<size_t>(f.precision));
    return apply_width(body, f, '<');
  }
  if (v.is_int()) {
    if (f.type && std::string_view("eEfFgG%").find(f.type) != std::string_view::npos) {
      return format_float(static_cast<double>(v.as_int()), f);
    }
    return format_int(v.as_int(), f);
  }
  if (v.is_float()) return format_float(v.as_float(), f);
  fail(ErrorKind::kType, "unsupported format string passed to " + type_name(v) + ".__format__");
}

namespace {

std::string str_format_impl(std::string_view fmt, const CallArgs& args, size_t& auto_index,
                            int& mode, int depth);

Value convert_field(const Value& v, std::string_view conv) {
  if (conv == "r") return Value::string(repr(v));
  if (conv == "s") return Value::string(to_str(v));
  if (conv == "a") return Value::string(ascii_repr(v));
  fail_value("Unknown conversion specifier " + std::string(conv));
}

// One replacement field (the text between the braces): name!conv:spec.
std::string format_field(std::string_view field, const CallArgs& args, size_t& auto_index,
                         int& mode, int depth) {
  size_t colon = std::string_view::npos, bang = std::string_view::npos;
  int bracket = 0;
  for (size_t k = 0; k < field.size(); ++k) {
    if (field[k] == '[') ++bracket;
    if (field[k] == ']') --bracket;
    if (bracket == 0 && field[k] == '!' && bang == std::string_view::npos) bang = k;
    if (bracket == 0 && field[k] == ':') {
      colon = k;
      break;
    }
  }
  std::string spec = colon == std::string_view::npos ? "" : std::string(field.substr(colon + 1));
  if (spec.find('{') != std::string::npos) {
    if (depth >= 2) fail_value("Max string recursion exceeded");
    spec = str_format_impl(spec, args, auto_index, mode, depth + 1);
  }
  Value v = lookup_field(field.substr(0, std::min(bang, colon)), args, auto_index, mode);
  if (bang != std::string_view::npos) {
    v = convert_field(v, field.substr(bang + 1, std::min(colon, field.size()) - bang - 1));
  }
  return format_with_spec(v, spec);
}

std::string str_format_impl(std::string_view fmt, const CallArgs& args, size_t& auto_index,
                            int& mode, int depth) {
  std::string out;
  size_t i = 0;
  while (i < fmt.size()) {
    char c = fmt[i];
    bool doubled = i + 1 < fmt.size() && fmt[i + 1] == c;
    if ((c == '{' || c == '}') && doubled) {
      out.push_back(c);
      i += 2;
      continue;
    }
    if (c == '}') fail_value("Single '}' encountered in format string");
    if (c != '{') {
      out.push_back(c);
      ++i;
      continue;
    }
    size_t j = i + 1;  // the matching '}' (fields may nest inside the spec)
    int level = 1;
    while (j < fmt.size() && level > 0) {
      if (fmt[j] == '{') ++level;
      if (fmt[j] == '}') --level;
      if (level > 0) ++j;
    }
    if (level > 0) fail_value("expected '}' before end of string");
    out += format_field(fmt.substr(i + 1, j - i - 1), args, auto_index, mode, depth);
    if (out.size() > (16u << 20)) fail(ErrorKind::kLimit, "formatted string too long");
    i = j + 1;
  }
  return out;
}

}  // namespace

std::string str_format(std::string_view fmt, const CallArgs& args) {
  size_t auto_index = 0;
  int mode = 0;  // 1: automatic field numbering, 2: manual
  return str_format_impl(fmt, args, auto_index, mode, 0);
}

}  // namespace pagoda::jinja
