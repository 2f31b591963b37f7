#include "sample/penalty_counts.h"

#include <algorithm>

namespace pagoda {

void PenaltyCounts::rebuild(std::span<const int32_t> prompt, std::span<const int32_t> outputs, bool flag_prompt) {
  tokens_.clear();
  counts_.clear();
  in_prompt_.clear();
  num_outputs_ = static_cast<int64_t>(outputs.size());
  // Sorted copies of both lists, merged by id.
  std::vector<int32_t> p;
  if (flag_prompt) {
    p.assign(prompt.begin(), prompt.end());
    std::sort(p.begin(), p.end());
    p.erase(std::unique(p.begin(), p.end()), p.end());
  }
  std::vector<int32_t> o(outputs.begin(), outputs.end());
  std::sort(o.begin(), o.end());
  size_t i = 0;
  size_t j = 0;
  while (i < p.size() || j < o.size()) {
    const int32_t t = j == o.size() || (i < p.size() && p[i] < o[j]) ? p[i] : o[j];
    const bool listed_in_prompt = i < p.size() && p[i] == t;
    if (listed_in_prompt) ++i;
    int32_t count = 0;
    while (j < o.size() && o[j] == t) {
      ++count;
      ++j;
    }
    tokens_.push_back(t);
    counts_.push_back(count);
    in_prompt_.push_back(listed_in_prompt ? 1 : 0);
  }
}

void PenaltyCounts::add(int32_t token) {
  ++num_outputs_;
  auto it = std::lower_bound(tokens_.begin(), tokens_.end(), token);
  const auto at = it - tokens_.begin();
  if (it != tokens_.end() && *it == token) {
    ++counts_[static_cast<size_t>(at)];
    return;
  }
  tokens_.insert(it, token);
  counts_.insert(counts_.begin() + at, 1);
  in_prompt_.insert(in_prompt_.begin() + at, 0);
}

}  // namespace pagoda
