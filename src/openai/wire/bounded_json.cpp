#include "openai/wire/bounded_json.h"

#include <fmt/format.h>

#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace pagoda::openai {

namespace {

// Deepest nesting of arrays/objects in JSON text (strings skipped), for the
// error message; the builder enforces the same bound as it goes.
int max_nesting_depth(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

// Builds an ordered_json from nlohmann's (iterative) SAX events; errors are
// predicates that follow the text's name ("is not valid JSON (byte offset 7)"). Objects
// append keys to the ordered_map's vector directly; once an object has more
// than kIndexFrom keys, a hash index finds duplicates in O(1).
class BoundedBuilder {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  explicit BoundedBuilder(const JsonLimits& limits) : limits_(limits) {}

  bool null() { return place(Json(nullptr)); }
  bool boolean(bool v) { return place(Json(v)); }
  bool number_integer(number_integer_t v) { return place(Json(v)); }
  bool number_unsigned(number_unsigned_t v) { return place(Json(v)); }
  bool number_float(number_float_t v, const string_t&) { return place(Json(v)); }
  bool string(string_t& v) { return place(Json(std::move(v))); }
  bool binary(binary_t&) { return fail("is not valid JSON"); }

  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& k) {
    Frame& f = stack_.back();
    auto& entries = static_cast<Json::object_t::Container&>(*f.value->get_ptr<Json::object_t*>());
    if (const size_t* at = find_key(f, entries, k)) {
      slot_ = &entries[*at].second;  // a duplicate: the last value wins, in place
      return true;
    }
    if (static_cast<int64_t>(entries.size()) >= limits_.max_object_keys) {
      return fail(fmt::format("has an object with more than {} keys", limits_.max_object_keys));
    }
    entries.emplace_back(k, nullptr);
    if (!f.index.empty()) f.index.emplace(std::move(k), entries.size() - 1);
    slot_ = &entries.back().second;
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) {
    // 406: a number outside double's range, e.g. 1e999.
    const char* what = e.id == 406 ? "has a number out of range" : "is not valid JSON";
    return fail(fmt::format("{} (byte offset {})", what, position));
  }

  Json& root() { return root_; }
  const std::string& error() const { return error_; }

 private:
  static constexpr size_t kIndexFrom = 16;

  struct Frame {
    Json* value;
    std::unordered_map<std::string, size_t> index;  // key → position; built past kIndexFrom keys
    size_t found = 0;                                // find_key's result slot
  };

  // Position of `k` among `entries`, or nullptr.
  static const size_t* find_key(Frame& f, const Json::object_t::Container& entries,
                                const std::string& k) {
    if (entries.size() < kIndexFrom) {
      for (size_t i = 0; i < entries.size(); ++i) {
        if (entries[i].first == k) return &(f.found = i);
      }
      return nullptr;
    }
    if (f.index.empty()) {
      for (size_t i = 0; i < entries.size(); ++i) f.index.emplace(entries[i].first, i);
    }
    auto it = f.index.find(k);
    return it == f.index.end() ? nullptr : &(f.found = it->second);
  }

  // Stores `v` as the root, the next array element or the value of the last key.
  Json* put(Json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Json& parent = *stack_.back().value;
    if (parent.is_array()) {
      auto& items = *parent.get_ptr<Json::array_t*>();
      items.push_back(std::move(v));
      return &items.back();
    }
    *slot_ = std::move(v);
    return slot_;
  }
  bool place(Json&& v) {
    put(std::move(v));
    return true;
  }
  bool open(Json&& container) {
    if (static_cast<int>(stack_.size()) >= limits_.max_depth) {
      return fail(fmt::format("nests more than {} levels deep", limits_.max_depth));
    }
    Json* p = put(std::move(container));
    stack_.push_back(Frame{p, {}, 0});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }
  bool fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }

  const JsonLimits& limits_;
  Json root_;
  std::vector<Frame> stack_;
  Json* slot_ = nullptr;
  std::string error_;
};

Error invalid(std::string_view what, const std::string& message) {
  return make_error(ErrorCode::kInvalidArgument, fmt::format("{} {}", what, message));
}

}  // namespace

Result<Json> parse_bounded_json(std::string_view text, std::string_view what,
                                const JsonLimits& limits) {
  if (size_t bad = find_invalid_utf8(text); bad != std::string_view::npos) {
    return invalid(what, fmt::format("is not valid UTF-8 (byte offset {})", bad));
  }
  // nlohmann's lexer reads a NUL byte as the end of the input, so a body with
  // one would parse as its prefix; JSON allows none outside \u0000.
  if (const void* nul = std::memchr(text.data(), 0, text.size())) {
    return invalid(what, fmt::format("contains a NUL byte (byte offset {})",
                                     static_cast<const char*>(nul) - text.data()));
  }
  if (int depth = max_nesting_depth(text); depth > limits.max_depth) {
    return invalid(what, fmt::format("nests {} levels deep; at most {} are allowed", depth,
                                     limits.max_depth));
  }
  BoundedBuilder builder(limits);
  const bool ok = Json::sax_parse(text.begin(), text.end(), &builder);
  if (!ok || !builder.error().empty()) {
    return invalid(what, builder.error().empty() ? "is not valid JSON" : builder.error());
  }
  return std::move(builder.root());
}

}  // namespace pagoda::openai
