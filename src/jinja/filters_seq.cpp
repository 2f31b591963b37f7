// Sequence filters: first, last, join, list, unique, reverse, sort,
// dictsort, items, min, max, sum, map, select, reject, selectattr,
// rejectattr, batch, slice, groupby. Filters that jinja2 implements as
// generators return one-shot iterators, so `|length` on them fails and they
// are always true, as in jinja2.
#include <algorithm>

#include "jinja/call_args.h"
#include "jinja/error.h"
#include "jinja/filters_impl.h"
#include "jinja/limits.h"
#include "jinja/operators.h"
#include "jinja/unicode.h"

namespace pagoda::jinja {
namespace {

Value generator(ValueList items) {
  return Value::iterator(std::move(items), "generator");
}

Value f_first(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("first", args);
  if (value.type() == ValueType::kIterator) {
    IteratorState& st = value.iter_state();
    if (st.pos < st.items.size()) return st.items[st.pos++];
    return Value::undefined("No first item, sequence was empty.");
  }
  ValueList items = iterate(value);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("last", args);
  if (value.type() == ValueType::kIterator || value.is_object()) {
    fail(ErrorKind::kType, "'" + type_name(value) + "' object is not reversible");
  }
  ValueList items = iterate(value);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_join(Interpreter& interp, const Value& value, CallArgs& args) {
  BoundArgs a("join", args, {"d", "attribute"});
  std::string sep = a.has(0) ? to_str(a.get(0)) : "";
  AttrGetter getter(interp, a.get_or(1, Value::none()));
  ValueList items = iterate(value);
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    append_str(out, getter(items[i]));
    if (out.size() > kMaxStringBytes) fail(ErrorKind::kLimit, "join(): result too large");
  }
  interp.count_bytes(out.size());
  return Value::string(std::move(out));
}

Value f_list(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("list", args);
  return Value::list(iterate(value));
}

Value f_unique(Interpreter& interp, const Value& value, CallArgs& args) {
  BoundArgs a("unique", args, {"case_sensitive", "attribute"});
  AttrGetter getter(interp, a.get_or(1, Value::none()), !a.flag(0, false));
  ValueList seen, out;
  for (const Value& item : iterate(value)) {
    Value key = getter(item);
    check_hashable(key);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, key); })) {
      seen.push_back(std::move(key));
      out.push_back(item);
    }
  }
  return generator(std::move(out));
}

Value f_reverse(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("reverse", args);
  if (value.is_string()) {
    std::u32string u = unicode::to_u32(value.str());
    std::reverse(u.begin(), u.end());
    return Value::string(unicode::to_utf8(u), value.is_safe());
  }
  std::string type;
  switch (value.type()) {
    case ValueType::kList:
      type = "list_reverseiterator";
      break;
    case ValueType::kDict:
      type = "dict_reversekeyiterator";
      break;
    case ValueType::kView: {
      ViewKind k = value.seq().view;
      type = k == ViewKind::kRange       ? "range_iterator"
             : k == ViewKind::kDictKeys  ? "dict_reversekeyiterator"
             : k == ViewKind::kDictItems ? "dict_reverseitemiterator"
                                         : "dict_reversevalueiterator";
      break;
    }
    case ValueType::kIterator: {  // reversed() fails; jinja2 falls back to a reversed list
      ValueList items = iterate(value);
      std::reverse(items.begin(), items.end());
      return Value::list(std::move(items));
    }
    case ValueType::kTuple:
    case ValueType::kUndefined:
      type = "reversed";
      break;
    default:
      fail(ErrorKind::kType, "argument must be iterable");
  }
  ValueList items = iterate(value);
  std::reverse(items.begin(), items.end());
  return Value::iterator(std::move(items), type);
}

// Sorts `items` by `keys` (Python's `<`, stable; reverse keeps equal items in order).
void sort_by_keys(ValueList& items, ValueList keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return reverse ? less_than(keys[y], keys[x]) : less_than(keys[x], keys[y]);
  });
  ValueList sorted;
  sorted.reserve(items.size());
  for (size_t i : order) sorted.push_back(std::move(items[i]));
  items = std::move(sorted);
}

Value f_sort(Interpreter& interp, const Value& value, CallArgs& args) {
  BoundArgs a("sort", args, {"reverse", "case_sensitive", "attribute"});
  bool case_insensitive = !a.flag(1, false);
  std::vector<AttrGetter> getters;
  Value attribute = a.get_or(2, Value::none());
  if (attribute.is_string()) {
    size_t start = 0;
    const std::string& s = attribute.str();
    while (true) {
      size_t comma = s.find(',', start);
      getters.emplace_back(
          interp,
          Value::string(
              s.substr(start, comma == std::string::npos ? std::string::npos : comma - start)),
          case_insensitive);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else {
    getters.emplace_back(interp, attribute, case_insensitive);
  }
  ValueList items = iterate(value);
  ValueList keys;
  keys.reserve(items.size());
  for (const Value& item : items) {
    ValueList key;
    for (const AttrGetter& g : getters) key.push_back(g(item));
    keys.push_back(Value::list(std::move(key)));
  }
  sort_by_keys(items, std::move(keys), a.flag(0, false));
  return Value::list(std::move(items));
}

Value f_dictsort(Interpreter&, const Value& value, CallArgs& args) {
  BoundArgs a("dictsort", args, {"case_sensitive", "by", "reverse"});
  std::string by = a.string(1, "key");
  if (by != "key" && by != "value") {
    fail(ErrorKind::kType, "You can only sort by either \"key\" or \"value\"");
  }
  if (value.is_undefined()) fail_undefined(value);
  if (!value.is_dict()) {
    fail(ErrorKind::kType, "'" + type_name(value) + "' object has no attribute 'items'");
  }
  ValueList items, keys;
  for (const auto& [k, v] : value.dict().entries) {
    items.push_back(Value::tuple({k, v}));
    const Value& key = by == "key" ? k : v;
    keys.push_back(a.flag(0, false) ? key : ignore_case(key));
  }
  sort_by_keys(items, std::move(keys), a.flag(2, false));
  return Value::list(std::move(items));
}

Value f_items(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("items", args);
  if (value.is_undefined()) return generator({});
  if (!value.is_dict()) fail(ErrorKind::kType, "Can only get item pairs from a mapping.");
  ValueList items;
  for (const auto& [k, v] : value.dict().entries) items.push_back(Value::tuple({k, v}));
  return generator(std::move(items));
}

Value min_or_max(Interpreter& interp, const Value& value, CallArgs& args, const char* name,
                 CompareOp better) {
  BoundArgs a(name, args, {"case_sensitive", "attribute"});
  ValueList items = iterate(value);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  AttrGetter getter(interp, a.get_or(1, Value::none()), !a.flag(0, false));
  size_t best = 0;
  Value best_key = getter(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = getter(items[i]);
    if (compare(better, key, best_key)) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Value f_min(Interpreter& interp, const Value& value, CallArgs& args) {
  return min_or_max(interp, value, args, "min", CompareOp::kLt);
}

Value f_max(Interpreter& interp, const Value& value, CallArgs& args) {
  return min_or_max(interp, value, args, "max", CompareOp::kGt);
}

Value f_sum(Interpreter& interp, const Value& value, CallArgs& args) {
  BoundArgs a("sum", args, {"attribute", "start"});
  Value total = a.get_or(1, Value::integer(0));
  if (total.is_string())
    fail(ErrorKind::kType, "sum() can't sum strings [use ''.join(seq) instead]");
  AttrGetter getter(interp, a.get_or(0, Value::none()));
  for (const Value& item : iterate(value)) total = binary_op(BinaryOp::kAdd, total, getter(item));
  return total;
}

Value f_map(Interpreter& interp, const Value& value, CallArgs& args) {
  if (!truthy(value)) return generator({});
  ValueList items = iterate(value);
  ValueList out;
  out.reserve(items.size());
  bool by_attribute = args.positional.empty() &&
                      std::any_of(args.keyword.begin(), args.keyword.end(),
                                  [](const auto& kw) { return kw.first == "attribute"; });
  if (by_attribute) {
    Value attribute, fallback = Value::none();
    for (const auto& [k, v] : args.keyword) {
      if (k == "attribute")
        attribute = v;
      else if (k == "default")
        fallback = v;
      else
        fail(ErrorKind::kType, "Unexpected keyword argument '" + k + "'");
    }
    AttrGetter getter(interp, attribute, false, fallback);
    for (const Value& item : items) out.push_back(getter(item));
    return generator(std::move(out));
  }
  if (args.positional.empty()) fail(ErrorKind::kType, "map requires a filter argument");
  std::string name = to_str(args.positional[0]);
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) {
    CallArgs call = rest;
    out.push_back(interp.apply_filter(name, item, call));
  }
  return generator(std::move(out));
}

Value select_or_reject(Interpreter& interp, const Value& value, CallArgs& args, bool select,
                       bool lookup_attr) {
  if (!truthy(value)) return generator({});
  size_t off = 0;
  Value attribute = Value::none();
  if (lookup_attr) {
    if (args.positional.empty()) fail(ErrorKind::kType, "Missing parameter for attribute name");
    attribute = args.positional[0];
    off = 1;
  }
  AttrGetter getter(interp, attribute);
  bool has_test = args.positional.size() > off;
  std::string test = has_test ? to_str(args.positional[off]) : "";
  CallArgs rest;
  if (has_test)
    rest.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(off) + 1,
                           args.positional.end());
  rest.keyword = args.keyword;
  ValueList out;
  for (const Value& item : iterate(value)) {
    Value probe = getter(item);
    bool ok;
    if (has_test) {
      CallArgs call = rest;
      ok = interp.apply_test(test, probe, call);
    } else {
      ok = truthy(probe);
    }
    if (ok == select) out.push_back(item);
  }
  return generator(std::move(out));
}

Value f_select(Interpreter& i, const Value& v, CallArgs& a) {
  return select_or_reject(i, v, a, true, false);
}
Value f_reject(Interpreter& i, const Value& v, CallArgs& a) {
  return select_or_reject(i, v, a, false, false);
}
Value f_selectattr(Interpreter& i, const Value& v, CallArgs& a) {
  return select_or_reject(i, v, a, true, true);
}
Value f_rejectattr(Interpreter& i, const Value& v, CallArgs& a) {
  return select_or_reject(i, v, a, false, true);
}

Value f_batch(Interpreter&, const Value& value, CallArgs& args) {
  BoundArgs a("batch", args, {"linecount", "fill_with"});
  if (!a.has(0)) fail(ErrorKind::kType, "batch() missing required argument 'linecount'");
  int64_t linecount = a.integer(0, 0);
  Value fill = a.get_or(1, Value::none());
  ValueList out, tmp;
  for (const Value& item : iterate(value)) {
    if (static_cast<int64_t>(tmp.size()) == linecount) {
      out.push_back(Value::list(std::move(tmp)));
      tmp.clear();
    }
    tmp.push_back(item);
  }
  if (!tmp.empty()) {
    if (!fill.is_none()) {
      while (static_cast<int64_t>(tmp.size()) < linecount) tmp.push_back(fill);
    }
    out.push_back(Value::list(std::move(tmp)));
  }
  return generator(std::move(out));
}

Value f_slice(Interpreter&, const Value& value, CallArgs& args) {
  BoundArgs a("slice", args, {"slices", "fill_with"});
  if (!a.has(0)) fail(ErrorKind::kType, "slice() missing required argument 'slices'");
  int64_t slices = a.integer(0, 0);
  if (slices == 0) fail(ErrorKind::kType, "integer division or modulo by zero");
  if (slices > static_cast<int64_t>(kMaxListItems))
    fail(ErrorKind::kLimit, "slice(): too many slices");
  Value fill = a.get_or(1, Value::none());
  ValueList seq = iterate(value);
  const int64_t length = static_cast<int64_t>(seq.size());
  auto floordiv = [](int64_t x, int64_t y) {
    return x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
  };
  int64_t per = floordiv(length, slices);
  int64_t extra = length - per * slices;
  int64_t offset = 0;
  ValueList out;
  for (int64_t n = 0; n < slices; ++n) {
    int64_t start = offset + n * per;
    if (n < extra) ++offset;
    int64_t end = offset + (n + 1) * per;
    ValueList part;
    for (int64_t i = std::max<int64_t>(start, 0); i < std::min(end, length); ++i) {
      part.push_back(seq[static_cast<size_t>(i)]);
    }
    if (!fill.is_none() && n >= extra) part.push_back(fill);
    out.push_back(Value::list(std::move(part)));
  }
  return generator(std::move(out));
}

Value f_groupby(Interpreter& interp, const Value& value, CallArgs& args) {
  BoundArgs a("groupby", args, {"attribute", "default", "case_sensitive"});
  if (!a.has(0)) fail(ErrorKind::kType, "groupby() missing required argument 'attribute'");
  bool case_sensitive = a.flag(2, false);
  Value fallback = a.get_or(1, Value::none());
  AttrGetter key_of(interp, a.get(0), !case_sensitive, fallback);
  AttrGetter output_key(interp, a.get(0), false, fallback);
  ValueList items = iterate(value);
  ValueList keys;
  for (const Value& item : items) keys.push_back(key_of(item));
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return less_than(keys[x], keys[y]); });
  ValueList out;
  size_t i = 0;
  while (i < order.size()) {
    const Value& key = keys[order[i]];
    ValueList group;
    size_t j = i;
    while (j < order.size() && py_equal(keys[order[j]], key)) group.push_back(items[order[j++]]);
    Value grouper = case_sensitive ? key : output_key(group[0]);
    out.push_back(Value::group(std::move(grouper), Value::list(std::move(group))));
    i = j;
  }
  return Value::list(std::move(out));
}

}  // namespace

void add_sequence_filters(FilterTable& t) {
  t.insert({{"first", f_first},
            {"last", f_last},
            {"join", f_join},
            {"list", f_list},
            {"unique", f_unique},
            {"reverse", f_reverse},
            {"sort", f_sort},
            {"dictsort", f_dictsort},
            {"items", f_items},
            {"min", f_min},
            {"max", f_max},
            {"sum", f_sum},
            {"map", f_map},
            {"select", f_select},
            {"reject", f_reject},
            {"selectattr", f_selectattr},
            {"rejectattr", f_rejectattr},
            {"batch", f_batch},
            {"slice", f_slice},
            {"groupby", f_groupby}});
}

}  // namespace pagoda::jinja
