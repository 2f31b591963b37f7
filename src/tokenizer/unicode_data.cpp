#include "tokenizer/unicode_data.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <span>
#include <vector>

#include "core/utf8.h"

namespace pagoda::tok {

namespace {

struct UnicodeRange {
  uint32_t lo, hi;
};
struct UnicodeRangeValue {
  uint32_t lo, hi;
  uint8_t value;
};
struct CodepointPair {
  uint32_t cp, mapped;
};
struct DecompEntry {
  uint32_t cp;
  uint32_t offset;
  uint32_t length;
};
struct Composition {
  uint32_t first, second, composite;
};

#include "unicode_additions.inc"  // generated tables, next to this file
#include "unicode_data.inc"

bool in_ranges(std::span<const UnicodeRange> ranges, uint32_t cp) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](uint32_t c, const UnicodeRange& r) { return c < r.lo; });
  return it != ranges.begin() && cp <= std::prev(it)->hi;
}

uint8_t range_value(std::span<const UnicodeRangeValue> ranges, uint32_t cp) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](uint32_t c, const UnicodeRangeValue& r) { return c < r.lo; });
  if (it == ranges.begin() || cp > std::prev(it)->hi) return 0;
  return std::prev(it)->value;
}

// Hangul syllable constants (Unicode 3.12).
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr uint32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

void decompose_into(uint32_t cp, bool compat, std::u32string& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
    return;
  }
  std::span<const DecompEntry> table =
      compat ? std::span<const DecompEntry>(kNfkdDecomp) : std::span<const DecompEntry>(kNfdDecomp);
  auto it = std::lower_bound(table.begin(), table.end(), cp,
                             [](const DecompEntry& e, uint32_t c) { return e.cp < c; });
  if (it != table.end() && it->cp == cp) {
    out.append(reinterpret_cast<const char32_t*>(kDecompData + it->offset), it->length);
  } else {
    out.push_back(cp);
  }
}

// Canonical ordering: stable sort of each run of non-starters by combining class.
void reorder(std::u32string& cps) {
  size_t n = cps.size();
  size_t i = 0;
  while (i < n) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < n && combining_class(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + i, cps.begin() + j, [](char32_t a, char32_t b) {
      return combining_class(a) < combining_class(b);
    });
    i = j;
  }
}

const std::vector<Composition>& sorted_compositions() {
  static const std::vector<Composition> table = [] {
    std::vector<Composition> v(std::begin(kCompositions), std::end(kCompositions));
    std::sort(v.begin(), v.end(), [](const Composition& a, const Composition& b) {
      return a.first != b.first ? a.first < b.first : a.second < b.second;
    });
    return v;
  }();
  return table;
}

// Primary composite of (a, b), or 0.
uint32_t compose_pair(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const auto& table = sorted_compositions();
  auto it = std::lower_bound(table.begin(), table.end(), std::pair{a, b},
                             [](const Composition& c, const std::pair<uint32_t, uint32_t>& k) {
                               return c.first != k.first ? c.first < k.first : c.second < k.second;
                             });
  if (it != table.end() && it->first == a && it->second == b) return it->composite;
  return 0;
}

void compose(std::u32string& cps) {
  std::u32string out;
  out.reserve(cps.size());
  int64_t starter = -1;
  uint8_t last_ccc = 0;
  for (char32_t cp : cps) {
    uint8_t ccc = combining_class(cp);
    if (starter >= 0) {
      bool adjacent = static_cast<int64_t>(out.size()) - 1 == starter;
      if (adjacent || (last_ccc != 0 && last_ccc < ccc)) {
        uint32_t c = compose_pair(out[starter], cp);
        if (c != 0) {
          out[starter] = c;
          continue;
        }
      }
    }
    if (ccc == 0) starter = static_cast<int64_t>(out.size());
    last_ccc = ccc;
    out.push_back(cp);
  }
  cps.swap(out);
}

std::span<const UnicodeRange> unstable_ranges(NormalForm form) {
  switch (form) {
    case NormalForm::kNfc:
      return kNfcUnstable;
    case NormalForm::kNfd:
      return kNfdUnstable;
    case NormalForm::kNfkc:
      return kNfkcUnstable;
    case NormalForm::kNfkd:
      return kNfkdUnstable;
  }
  return kNfcUnstable;
}

}  // namespace

GeneralCategory general_category(uint32_t cp) {
  auto gc = static_cast<GeneralCategory>(range_value(kGeneralCategory, cp));
  if (gc == GeneralCategory::kCn)
    gc = static_cast<GeneralCategory>(range_value(kAssignedAfter14, cp));
  return gc;
}

std::string class_additions_after_unicode14(std::string_view property) {
  static constexpr std::string_view kNames[] = {
      "Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Me", "Mc", "Nd", "Nl", "No", "Zs", "Zl", "Zp",
      "Cc", "Cf", "Co", "Cs", "Pd", "Ps", "Pe", "Pc", "Po", "Sm", "Sc", "Sk", "So", "Pi", "Pf"};
  if (property.empty() || property.size() > 2) return {};
  std::string out;
  char buf[40];
  for (const UnicodeRangeValue& r : kAssignedAfter14) {
    std::string_view name = kNames[r.value];
    if (name.compare(0, property.size(), property) != 0) continue;
    std::snprintf(buf, sizeof(buf), "\\x{%X}-\\x{%X}", r.lo, r.hi);
    out += buf;
  }
  return out;
}

bool is_white_space(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  return in_ranges(kWhiteSpace, cp);
}

bool is_alphabetic(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  if (in_ranges(kAlphabetic, cp)) return true;
  auto gc = static_cast<GeneralCategory>(range_value(kAssignedAfter14, cp));
  return (gc >= GeneralCategory::kLu && gc <= GeneralCategory::kLo) || gc == GeneralCategory::kNl;
}

bool is_numeric(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  auto gc = general_category(cp);
  return gc == GeneralCategory::kNd || gc == GeneralCategory::kNl || gc == GeneralCategory::kNo;
}

bool is_alphanumeric(uint32_t cp) {
  return is_alphabetic(cp) || is_numeric(cp);
}

bool is_punctuation(uint32_t cp) {
  switch (general_category(cp)) {
    case GeneralCategory::kPc:
    case GeneralCategory::kPd:
    case GeneralCategory::kPs:
    case GeneralCategory::kPe:
    case GeneralCategory::kPi:
    case GeneralCategory::kPf:
    case GeneralCategory::kPo:
      return true;
    default:
      return false;
  }
}

bool is_mark(uint32_t cp) {
  auto gc = general_category(cp);
  return gc == GeneralCategory::kMn || gc == GeneralCategory::kMc || gc == GeneralCategory::kMe;
}

bool is_other(uint32_t cp) {
  switch (general_category(cp)) {
    case GeneralCategory::kCc:
    case GeneralCategory::kCf:
    case GeneralCategory::kCs:
    case GeneralCategory::kCo:
    case GeneralCategory::kCn:
      return true;
    default:
      return false;
  }
}

GeneralCategory general_category_v8(uint32_t cp) {
  return static_cast<GeneralCategory>(range_value(kGeneralCategoryV8, cp));
}

bool is_punctuation_v8(uint32_t cp) {
  switch (general_category_v8(cp)) {
    case GeneralCategory::kPc:
    case GeneralCategory::kPd:
    case GeneralCategory::kPs:
    case GeneralCategory::kPe:
    case GeneralCategory::kPi:
    case GeneralCategory::kPf:
    case GeneralCategory::kPo:
      return true;
    default:
      return false;
  }
}

bool is_control_v8(uint32_t cp) {
  auto gc = general_category_v8(cp);
  return gc == GeneralCategory::kCc || gc == GeneralCategory::kCf || gc == GeneralCategory::kCo ||
         gc == GeneralCategory::kCs;
}

bool is_mark_v9(uint32_t cp) {
  return in_ranges(kMarkV9, cp);
}

uint8_t combining_class(uint32_t cp) {
  if (cp < 0x300) return 0;
  return range_value(kCombiningClass, cp);
}

void append_lowercase(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp));
    return;
  }
  if (cp == 0x130) {  // the only unconditional multi-char lowercase (SpecialCasing.txt)
    out.append("i\xCC\x87");
    return;
  }
  auto it = std::lower_bound(std::begin(kLowercase), std::end(kLowercase), cp,
                             [](const CodepointPair& p, uint32_t c) { return p.cp < c; });
  append_utf8(out, it != std::end(kLowercase) && it->cp == cp ? it->mapped : cp);
}

namespace {

// Chars with quick-check Yes and combining class 0 in `form`: normalization
// never reaches across them. A bitmap for the BMP, ranges above it.
class BoundarySet {
 public:
  explicit BoundarySet(NormalForm form) : ranges_(unstable_ranges(form)), bmp_(0x10000 / 64, 0) {
    for (const UnicodeRange& r : ranges_) {
      for (uint32_t c = r.lo; c <= r.hi && c < 0x10000; ++c)
        bmp_[c / 64] |= uint64_t{1} << (c % 64);
    }
  }
  bool is_boundary(uint32_t cp) const {
    if (cp < 0x10000) return !((bmp_[cp / 64] >> (cp % 64)) & 1);
    return !in_ranges(ranges_, cp);
  }

 private:
  std::span<const UnicodeRange> ranges_;
  std::vector<uint64_t> bmp_;
};

const BoundarySet& boundaries(NormalForm form) {
  static const BoundarySet sets[] = {BoundarySet(NormalForm::kNfc), BoundarySet(NormalForm::kNfd),
                                     BoundarySet(NormalForm::kNfkc),
                                     BoundarySet(NormalForm::kNfkd)};
  return sets[static_cast<int>(form)];
}

void normalize_run(std::string_view run, NormalForm form, std::string& out) {
  bool compat = form == NormalForm::kNfkc || form == NormalForm::kNfkd;
  std::u32string cps;
  size_t i = 0;
  while (i < run.size()) decompose_into(next_code_point(run, i), compat, cps);
  reorder(cps);
  if (form == NormalForm::kNfc || form == NormalForm::kNfkc) compose(cps);
  for (char32_t cp : cps) append_utf8(out, cp);
}

}  // namespace

bool is_normalized_quick(std::string_view text, NormalForm form) {
  const BoundarySet& b = boundaries(form);
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    if (!b.is_boundary(next_code_point(text, i))) return false;
  }
  return true;
}

// Text splits into runs that start at a boundary char; only runs holding some
// other char can change, and each normalizes on its own.
std::string normalize(std::string_view text, NormalForm form) {
  const BoundarySet& b = boundaries(form);
  std::string out;
  out.reserve(text.size() + 8);
  size_t run_start = 0;
  bool run_changes = false;
  size_t i = 0;
  while (i < text.size()) {
    size_t at = i;
    uint32_t cp = static_cast<unsigned char>(text[i]) < 0x80 ? text[i++] : next_code_point(text, i);
    if (!b.is_boundary(cp)) {
      run_changes = true;
      continue;
    }
    if (run_changes) {
      normalize_run(text.substr(run_start, at - run_start), form, out);
    } else {
      out.append(text.substr(run_start, at - run_start));
    }
    run_start = at;
    run_changes = false;
  }
  if (run_changes) {
    normalize_run(text.substr(run_start), form, out);
  } else {
    out.append(text.substr(run_start));
  }
  return out;
}

}  // namespace pagoda::tok
