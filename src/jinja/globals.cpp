#include "jinja/globals.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "jinja/call_args.h"
#include "jinja/error.h"
#include "jinja/interpreter.h"
#include "jinja/limits.h"
#include "jinja/objects.h"

namespace pagoda::jinja {
namespace {

Value g_range(Interpreter&, CallArgs& args) {
  expect_no_kwargs("range", args);
  size_t n = args.positional.size();
  if (n < 1 || n > 3)
    fail(ErrorKind::kType, "range expected 1 to 3 arguments, got " + std::to_string(n));
  for (const Value& v : args.positional) {
    if (v.is_undefined()) fail_undefined(v);
    if (!v.is_int()) {
      fail(ErrorKind::kType, "'" + type_name(v) + "' object cannot be interpreted as an integer");
    }
  }
  int64_t start = n == 1 ? 0 : args.positional[0].as_int();
  int64_t stop = n == 1 ? args.positional[0].as_int() : args.positional[1].as_int();
  int64_t step = n == 3 ? args.positional[2].as_int() : 1;
  if (step == 0) fail(ErrorKind::kType, "range() arg 3 must not be zero");
  long double count = step > 0 ? (static_cast<long double>(stop) - start + step - 1) / step
                               : (static_cast<long double>(start) - stop - step - 1) / -step;
  if (count > kMaxRange) {
    fail(ErrorKind::kType, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (" +
                               std::to_string(kMaxRange) + ").");
  }
  Sequence seq;
  seq.view = ViewKind::kRange;
  seq.range_start = start;
  seq.range_stop = stop;
  seq.range_step = step;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
    seq.items.push_back(Value::integer(i));
  return Value::view(std::move(seq));
}

// Python dict(*args, **kwargs): a mapping or an iterable of pairs, then keywords.
Dict dict_from_args(const CallArgs& args, const char* func) {
  if (args.positional.size() > 1) {
    fail(ErrorKind::kType, std::string(func) + " expected at most 1 argument, got " +
                               std::to_string(args.positional.size()));
  }
  Dict d;
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      d = src.dict();
    } else {
      for (const Value& pair : iterate(src)) {
        ValueList kv = iterate(pair);
        if (kv.size() != 2) {
          fail(ErrorKind::kType, "dictionary update sequence element has length " +
                                     std::to_string(kv.size()) + "; 2 is required");
        }
        check_hashable(kv[0]);
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) d.set(Value::string(k), v);
  return d;
}

Value g_dict(Interpreter&, CallArgs& args) {
  return Value::dict(dict_from_args(args, "dict"));
}

Value g_namespace(Interpreter& interp, CallArgs& args) {
  Dict attrs = dict_from_args(args, "namespace");
  auto ns = std::make_shared<Namespace>();
  interp.track_namespace(ns);
  for (const auto& [k, v] : attrs.entries) {
    if (!k.is_string()) fail(ErrorKind::kType, "namespace attribute names must be strings");
    ns->set_attr(k.str(), v);
  }
  return Value::object(ns);
}

class Cycler : public Object, public std::enable_shared_from_this<Cycler> {
 public:
  explicit Cycler(ValueList items) : items_(std::move(items)) {}
  std::string type_name() const override { return "Cycler"; }
  bool get_attr(std::string_view name, Value& out) const override {
    auto self = std::const_pointer_cast<Cycler>(shared_from_this());
    if (name == "current") {
      out = items_[pos_];
    } else if (name == "next" || name == "__next__") {
      out = make_native(
          "next",
          [self](Interpreter&, CallArgs& args) {
            expect_no_kwargs("next", args);
            Value rv = self->items_[self->pos_];
            self->pos_ = (self->pos_ + 1) % self->items_.size();
            return rv;
          },
          "method");
    } else if (name == "reset") {
      out = make_native(
          "reset",
          [self](Interpreter&, CallArgs&) {
            self->pos_ = 0;
            return Value::none();
          },
          "method");
    } else {
      return false;
    }
    return true;
  }

 private:
  ValueList items_;
  size_t pos_ = 0;
};

Value g_cycler(Interpreter&, CallArgs& args) {
  expect_no_kwargs("cycler", args);
  if (args.positional.empty()) fail(ErrorKind::kType, "at least one item has to be provided");
  auto c = std::make_shared<Cycler>(args.positional);
  return Value::object(c);
}

Value g_joiner(Interpreter&, CallArgs& args) {
  BoundArgs a("joiner", args, {"sep"});
  Value sep = a.get_or(0, Value::string(", "));
  auto used = std::make_shared<bool>(false);
  return make_native(
      "joiner",
      [sep, used](Interpreter&, CallArgs& call) {
        expect_no_kwargs("joiner", call);
        if (!*used) {
          *used = true;
          return Value::string("");
        }
        return sep;
      },
      "Joiner");
}

Value g_lipsum(Interpreter&, CallArgs&) {
  fail(ErrorKind::kUnsupported, "lipsum() is not supported (its output is random)");
}

Value g_raise_exception(Interpreter&, CallArgs& args) {
  std::string message = args.positional.empty() ? "" : to_str(args.positional[0]);
  fail(ErrorKind::kRaised, message);
}

// datetime.now().strftime(format): local time; %f is the microseconds.
Value g_strftime_now(Interpreter&, CallArgs& args) {
  BoundArgs a("strftime_now", args, {"format"});
  if (!a.has(0))
    fail(ErrorKind::kType, "strftime_now() missing 1 required positional argument: 'format'");
  std::string format = a.string(0, "");
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1000000;
  std::string fmt;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && i + 1 < format.size() && format[i + 1] == 'f') {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "%06lld", static_cast<long long>(micros));
      fmt += buf;
      ++i;
    } else if (format[i] == '%' && i + 1 < format.size()) {
      fmt += format.substr(i, 2);
      ++i;
    } else {
      fmt.push_back(format[i]);
    }
  }
  std::tm tm{};
  localtime_r(&t, &tm);
  if (fmt.empty()) return Value::string("");
  std::string out(256, '\0');
  for (int attempt = 0; attempt < 8; ++attempt) {
    size_t n = std::strftime(out.data(), out.size(), fmt.c_str(), &tm);
    if (n > 0) {
      out.resize(n);
      return Value::string(out);
    }
    if (out.size() > (1u << 20)) break;
    out.resize(out.size() * 4);
  }
  return Value::string("");
}

}  // namespace

void add_globals(std::unordered_map<std::string, Value>& context) {
  context["range"] = make_native("range", g_range, "type");
  context["dict"] = make_native("dict", g_dict, "TemplateDict");
  context["namespace"] = make_native("namespace", g_namespace, "type");
  context["cycler"] = make_native("cycler", g_cycler, "type");
  context["joiner"] = make_native("joiner", g_joiner, "type");
  context["lipsum"] = make_native("lipsum", g_lipsum, "function");
  context["raise_exception"] = make_native("raise_exception", g_raise_exception, "function");
  context["strftime_now"] = make_native("strftime_now", g_strftime_now, "function");
}

}  // namespace pagoda::jinja
