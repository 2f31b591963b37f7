// ConstraintMasks (engine/constraint_masks.h): rows whose constraints share
// their mask (TokenConstraint::shared_next_mask) and have the same
// allowed_token_ids get one computed mask; other constraints are filled one
// by one; allowed_token_ids intersect; a mask left empty reads as empty.
#include "engine/constraint_masks.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <vector>

#include "sample/token_mask.h"

namespace pagoda {
namespace {

constexpr int64_t kVocab = 100;  // 4 words, 4 bits of the last one inside

// A constraint in one of a few states, each state's mask shared (or, with
// `share` off, only filled): state s allows tokens s, s + 10, ..., and the
// end ids where s is odd.
class StateConstraint final : public TokenConstraint {
 public:
  StateConstraint(int state, bool share, std::atomic<int>* fills)
      : state_(state), share_(share), fills_(fills) {}
  void fill_next_mask(std::span<uint32_t> words) const override {
    ++*fills_;
    const SharedMask m = mask_of(state_);
    for (size_t k = 0; k < m.base->size(); ++k) words[k] |= (*m.base)[k];
    if (m.extra != nullptr) {
      for (int32_t t : *m.extra) words[t >> 5] |= 1u << (t & 31);
    }
  }
  SharedMask shared_next_mask() const override { return share_ ? mask_of(state_) : SharedMask{}; }
  bool accept(int32_t) override { return true; }
  bool is_finished() const override { return false; }
  std::unique_ptr<TokenConstraint> clone() const override {
    return std::make_unique<StateConstraint>(*this);
  }

 private:
  static SharedMask mask_of(int state) {
    static const std::vector<int32_t> end_ids = {97, 99};
    static std::vector<std::shared_ptr<const std::vector<uint32_t>>> masks = [] {
      std::vector<std::shared_ptr<const std::vector<uint32_t>>> m;
      for (int s = 0; s < 10; ++s) {
        auto words = std::make_shared<std::vector<uint32_t>>(4, 0u);
        for (int t = s; t < kVocab; t += 10) (*words)[t >> 5] |= 1u << (t & 31);
        m.push_back(words);
      }
      return m;
    }();
    return {masks[static_cast<size_t>(state)], state % 2 == 1 ? &end_ids : nullptr};
  }
  int state_;
  bool share_;
  std::atomic<int>* fills_;
};

std::vector<int32_t> ids_of(std::span<const uint32_t> words) {
  std::vector<int32_t> ids;
  for (int32_t t = 0; t < static_cast<int32_t>(words.size()) * 32; ++t) {
    if (words[static_cast<size_t>(t) >> 5] >> (t & 31) & 1u) ids.push_back(t);
  }
  return ids;
}

std::vector<int32_t> expected_ids(int state) {
  std::vector<int32_t> ids;
  for (int t = state; t < kVocab; t += 10) ids.push_back(t);
  if (state % 2 == 1) {
    for (int32_t t : {97, 99}) {
      if (std::find(ids.begin(), ids.end(), t) == ids.end()) ids.push_back(t);
    }
    std::sort(ids.begin(), ids.end());
  }
  return ids;
}

// 24 rows in 3 states (above kMinParallelEntries: the pool computes them):
// three masks, each handed to its rows as the same words.
TEST(ConstraintMasks, RowsInOneSharedStateComputeOneMask) {
  std::atomic<int> fills{0};
  std::vector<StateConstraint> rows;
  for (int i = 0; i < 24; ++i) rows.emplace_back(i % 3, /*share=*/true, &fills);
  ConstraintMasks masks(kVocab);
  std::vector<size_t> entries;
  for (const StateConstraint& c : rows) entries.push_back(masks.add(c, {}));
  masks.compute();
  EXPECT_EQ(masks.num_computed(), 3u);
  EXPECT_EQ(fills.load(), 0);  // the shared words are copied, never filled
  for (size_t i = 0; i < rows.size(); ++i) {
    const int state = static_cast<int>(i % 3);
    EXPECT_EQ(ids_of(masks.mask(entries[i])), expected_ids(state)) << i;
    EXPECT_EQ(masks.mask(entries[i]).data(), masks.mask(entries[i % 3]).data()) << i;
  }
  // A new step starts over.
  masks.clear();
  const size_t e = masks.add(rows[1], {});
  masks.compute();
  EXPECT_EQ(masks.num_computed(), 1u);
  EXPECT_EQ(ids_of(masks.mask(e)), expected_ids(1));
}

// allowed_token_ids are part of a mask's identity; unshared constraints are
// filled one by one; an intersection left empty reads as empty.
TEST(ConstraintMasks, AllowedIdsAndUnsharedConstraintsGetTheirOwnMasks) {
  std::atomic<int> fills{0};
  StateConstraint a(3, true, &fills), b(3, true, &fills), c(3, false, &fills),
      d(3, false, &fills);
  std::vector<uint32_t> low(4, 0u), none(4, 0u);
  for (int t = 0; t < 40; ++t) low[static_cast<size_t>(t) >> 5] |= 1u << (t & 31);
  none[0] = 1u << 1;  // token 1: state 3 does not allow it
  ConstraintMasks masks(kVocab);
  const size_t ea = masks.add(a, {}), eb = masks.add(b, low), eb2 = masks.add(b, low),
               ec = masks.add(c, {}), ed = masks.add(d, {}), en = masks.add(a, none);
  masks.compute();
  EXPECT_EQ(masks.num_computed(), 5u);  // a; b & low (twice); c; d; a & none
  EXPECT_EQ(fills.load(), 2);
  EXPECT_EQ(ids_of(masks.mask(ea)), expected_ids(3));
  EXPECT_EQ(ids_of(masks.mask(eb)), (std::vector<int32_t>{3, 13, 23, 33}));
  EXPECT_EQ(masks.mask(eb).data(), masks.mask(eb2).data());
  EXPECT_EQ(ids_of(masks.mask(ec)), expected_ids(3));
  EXPECT_EQ(ids_of(masks.mask(ed)), expected_ids(3));
  EXPECT_TRUE(masks.mask(en).empty());
}

}  // namespace
}  // namespace pagoda
