#include "grammar/regex_ast.h"

#include <algorithm>
#include <cassert>
#include <string>
#include <utility>

#include "core/utf8.h"

namespace pagoda::grammar {

namespace {

using Kind = RegexNode::Kind;

constexpr uint64_t kSizeCap = uint64_t{1} << 62;

uint64_t add_sizes(uint64_t a, uint64_t b) {
  return a + b > kSizeCap ? kSizeCap : a + b;
}

uint64_t mul_sizes(uint64_t a, uint64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kSizeCap / b ? kSizeCap : a * b;
}

std::shared_ptr<RegexNode> new_node(Kind kind) {
  auto n = std::make_shared<RegexNode>();
  n->kind = kind;
  return n;
}

}  // namespace

RegexNodePtr make_empty() {
  return new_node(Kind::kEmpty);
}

RegexNodePtr make_nothing() {
  return make_chars(RegexCharSet());
}

RegexNodePtr make_chars(RegexCharSet chars) {
  auto n = new_node(Kind::kChars);
  n->chars = std::move(chars);
  n->nullable = false;
  n->expanded_size = 1;
  return n;
}

RegexNodePtr make_seq(std::vector<RegexNodePtr> items) {
  if (items.size() == 1) return std::move(items[0]);  // no copy of a nested group's items
  std::vector<RegexNodePtr> flat;
  for (RegexNodePtr& item : items) {
    if (is_nothing(*item)) return item;
    if (item->kind == Kind::kEmpty) continue;
    if (item->kind == Kind::kSeq) {
      flat.insert(flat.end(), item->children.begin(), item->children.end());
    } else {
      flat.push_back(std::move(item));
    }
  }
  if (flat.empty()) return make_empty();
  if (flat.size() == 1) return flat[0];
  auto n = new_node(Kind::kSeq);
  for (const RegexNodePtr& c : flat) {
    n->nullable = n->nullable && c->nullable;
    n->expanded_size = add_sizes(n->expanded_size, c->expanded_size);
  }
  n->children = std::move(flat);
  return n;
}

RegexNodePtr make_alt(std::vector<RegexNodePtr> branches) {
  if (branches.size() == 1) return std::move(branches[0]);
  std::vector<RegexNodePtr> flat;
  for (RegexNodePtr& b : branches) {
    if (is_nothing(*b)) continue;
    if (b->kind == Kind::kAlt) {
      flat.insert(flat.end(), b->children.begin(), b->children.end());
    } else {
      flat.push_back(std::move(b));
    }
  }
  // Character branches become one class where the first of them stood.
  size_t first_chars = flat.size();
  RegexCharSet chars;
  size_t num_chars = 0;
  for (size_t k = 0; k < flat.size(); ++k) {
    if (flat[k]->kind != Kind::kChars) continue;
    first_chars = std::min(first_chars, k);
    chars.add(flat[k]->chars);
    ++num_chars;
  }
  if (num_chars > 1) {
    std::vector<RegexNodePtr> merged;
    for (size_t k = 0; k < flat.size(); ++k) {
      if (k == first_chars) merged.push_back(make_chars(std::move(chars)));
      if (flat[k]->kind != Kind::kChars) merged.push_back(std::move(flat[k]));
    }
    flat = std::move(merged);
  }
  if (flat.empty()) return make_nothing();
  if (flat.size() == 1) return flat[0];
  auto n = new_node(Kind::kAlt);
  n->nullable = false;
  for (const RegexNodePtr& c : flat) {
    n->nullable = n->nullable || c->nullable;
    n->expanded_size = add_sizes(n->expanded_size, c->expanded_size);
  }
  n->children = std::move(flat);
  return n;
}

RegexNodePtr make_repeat(RegexNodePtr body, uint32_t min, uint32_t max) {
  assert(min <= max);
  if (max == 0 || body->kind == Kind::kEmpty) return make_empty();
  if (is_nothing(*body)) return min == 0 ? make_empty() : body;
  if (min == 1 && max == 1) return body;
  auto n = new_node(Kind::kRepeat);
  n->nullable = min == 0 || body->nullable;
  n->expanded_size = mul_sizes(body->expanded_size, max == kUnbounded ? uint64_t{min} + 1 : max);
  n->children.push_back(std::move(body));
  n->min = min;
  n->max = max;
  return n;
}

RegexNodePtr make_anchor(Kind kind, size_t pos) {
  assert(kind == Kind::kStartAnchor || kind == Kind::kEndAnchor);
  auto n = new_node(kind);
  n->pos = pos;
  return n;
}

RegexNodePtr non_empty_part(const RegexNodePtr& node) {
  if (!node->nullable) return node;
  switch (node->kind) {
    case Kind::kAlt: {
      std::vector<RegexNodePtr> parts;
      for (const RegexNodePtr& c : node->children) {
        RegexNodePtr part = non_empty_part(c);
        if (!part) return nullptr;
        parts.push_back(std::move(part));
      }
      return make_alt(std::move(parts));
    }
    case Kind::kRepeat: {  // B{m,n} without "" == B'{1,n}: the non-empty copies
      const RegexNodePtr& body = node->children[0];
      RegexNodePtr part = body->nullable ? non_empty_part(body) : body;
      if (!part) return nullptr;
      return make_repeat(std::move(part), 1, node->max);
    }
    case Kind::kSeq: {  // every item is nullable: branch i is "item i non-empty, items i+1.."
      const std::vector<RegexNodePtr>& items = node->children;
      if (items.size() > kMaxStrippedSequence) return nullptr;
      std::vector<RegexNodePtr> branches;
      for (size_t i = 0; i < items.size(); ++i) {
        RegexNodePtr first = non_empty_part(items[i]);
        if (!first) return nullptr;
        std::vector<RegexNodePtr> seq{std::move(first)};
        seq.insert(seq.end(), items.begin() + static_cast<std::ptrdiff_t>(i) + 1, items.end());
        branches.push_back(make_seq(std::move(seq)));
      }
      return make_alt(std::move(branches));
    }
    default:  // empty and anchors
      return make_nothing();
  }
}

RegexNodePtr star_body(const RegexNodePtr& node) {
  if (!node->nullable) return node;
  switch (node->kind) {
    case Kind::kSeq:  // every item is nullable, so each alone is in L and L* == (L1|..|Ln)*
    case Kind::kAlt: {
      std::vector<RegexNodePtr> parts;
      for (const RegexNodePtr& c : node->children) parts.push_back(star_body(c));
      return make_alt(std::move(parts));
    }
    case Kind::kRepeat:  // (B{m,n})* == B* when B{m,n} is nullable and n >= 1
      return star_body(node->children[0]);
    default:  // empty and anchors: L* is only the empty string
      return make_nothing();
  }
}

GbnfRepeat gbnf_repeat(const RegexNodePtr& body, uint32_t min, uint32_t max) {
  if (body->nullable && max > 1) {
    RegexNodePtr part = max == kUnbounded ? star_body(body) : non_empty_part(body);
    if (part) {
      if (is_nothing(*part)) return {nullptr, 0, 0};
      return {std::move(part), 0, max};
    }
  }
  return {body, min, max};
}

uint64_t gbnf_repeat_elements(const GbnfRepeat& r) {
  if (!r.body) return 0;
  uint64_t s = 1;
  if (r.body->kind == RegexNode::Kind::kChars && r.body->chars.is_single()) {
    std::string utf8;
    append_utf8(utf8, r.body->chars.first());
    s = utf8.size();
  }
  const uint64_t optional = r.max == kUnbounded ? 1 : uint64_t{r.max} - r.min;
  return s * r.min + optional * (s + 3);
}

}  // namespace pagoda::grammar
