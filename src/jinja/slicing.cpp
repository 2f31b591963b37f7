#include "jinja/slicing.h"

#include "jinja/error.h"
#include "jinja/unicode.h"

namespace pagoda::jinja {
namespace {

int64_t slice_bound(const Value& v, bool& given) {
  given = !v.is_none();
  if (!given) return 0;
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_int()) {
    fail(ErrorKind::kType, "slice indices must be integers or None or have an __index__ method");
  }
  return v.as_int();
}

// CPython PySlice_AdjustIndices: the positions a slice visits.
std::vector<size_t> slice_positions(size_t size, const Value& start_v, const Value& stop_v,
                                    const Value& step_v) {
  bool has_start, has_stop, has_step;
  int64_t start = slice_bound(start_v, has_start);
  int64_t stop = slice_bound(stop_v, has_stop);
  int64_t step = slice_bound(step_v, has_step);
  if (!has_step) step = 1;
  if (step == 0) fail(ErrorKind::kType, "slice step cannot be zero");
  const int64_t len = static_cast<int64_t>(size);
  auto adjust = [&](int64_t& i, bool given, int64_t dflt) {
    if (!given) {
      i = dflt;
      return;
    }
    if (i < 0) {
      i += len;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= len) {
      i = step < 0 ? len - 1 : len;
    }
  };
  adjust(start, has_start, step < 0 ? len - 1 : 0);
  adjust(stop, has_stop, step < 0 ? -1 : len);
  std::vector<size_t> out;
  if (step > 0) {
    for (int64_t i = start; i < stop; i += step) out.push_back(static_cast<size_t>(i));
  } else {
    for (int64_t i = start; i > stop; i += step) out.push_back(static_cast<size_t>(i));
  }
  return out;
}

}  // namespace

std::optional<size_t> normalize_index(int64_t index, size_t size) {
  int64_t len = static_cast<int64_t>(size);
  if (index < 0) index += len;
  if (index < 0 || index >= len) return std::nullopt;
  return static_cast<size_t>(index);
}

Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  switch (obj.type()) {
    case ValueType::kUndefined:
      fail_undefined(obj);
    case ValueType::kString: {
      const std::string& s = obj.str();
      if (unicode::is_ascii(s)) {
        std::string out;
        for (size_t i : slice_positions(s.size(), start, stop, step)) out.push_back(s[i]);
        return Value::string(std::move(out), obj.is_safe());
      }
      std::u32string u = unicode::to_u32(s);
      std::u32string out;
      for (size_t i : slice_positions(u.size(), start, stop, step)) out.push_back(u[i]);
      return Value::string(unicode::to_utf8(out), obj.is_safe());
    }
    case ValueType::kList:
    case ValueType::kTuple:
    case ValueType::kView: {
      if (obj.type() == ValueType::kView && obj.seq().view != ViewKind::kRange) break;
      ValueList out;
      const ValueList& items = obj.items();
      for (size_t i : slice_positions(items.size(), start, stop, step)) out.push_back(items[i]);
      return obj.type() == ValueType::kTuple ? Value::tuple(std::move(out))
                                             : Value::list(std::move(out));
    }
    case ValueType::kDict:
      fail(ErrorKind::kType, "unhashable type: 'slice'");
    default:
      break;
  }
  fail(ErrorKind::kType, "'" + type_name(obj) + "' object is not subscriptable");
}

void clamp_bounds(const Value* start, const Value* end, size_t size, size_t& lo, size_t& hi) {
  const int64_t len = static_cast<int64_t>(size);
  auto clamp = [len](const Value* v, int64_t dflt) -> int64_t {
    if (v == nullptr || v->is_none()) return dflt;
    if (!v->is_int()) {
      fail(ErrorKind::kType, "slice indices must be integers or None or have an __index__ method");
    }
    int64_t i = v->as_int();
    if (i < 0) i = std::max<int64_t>(0, i + len);
    return std::min(i, len);
  };
  lo = static_cast<size_t>(clamp(start, 0));
  hi = static_cast<size_t>(clamp(end, len));
}

}  // namespace pagoda::jinja
