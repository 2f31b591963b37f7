#include "sample/stop_checker.h"

#include <algorithm>
#include <cassert>

namespace pagoda {

StopChecker::StopChecker(const SamplingParams& params, std::span<const int32_t> eos_token_ids,
                         int32_t max_tokens)
    : stop_(params.stop),
      request_stop_tokens_(params.stop_token_ids),
      include_stop_(params.include_stop_str_in_output),
      min_tokens_(params.min_tokens),
      max_tokens_(max_tokens) {
  std::sort(request_stop_tokens_.begin(), request_stop_tokens_.end());
  if (!params.ignore_eos) eos_tokens_.assign(eos_token_ids.begin(), eos_token_ids.end());
}

bool StopChecker::is_request_stop_token(int32_t token) const {
  return std::binary_search(request_stop_tokens_.begin(), request_stop_tokens_.end(), token);
}

bool StopChecker::is_stop_token(int32_t token) const {
  return is_request_stop_token(token) ||
         std::find(eos_tokens_.begin(), eos_tokens_.end(), token) != eos_tokens_.end();
}

size_t StopChecker::find_stop(size_t* which) const {
  size_t best = std::string::npos;
  for (size_t i = 0; i < stop_.size(); ++i) {
    size_t at = pending_.find(stop_[i]);
    if (at < best) {
      best = at;
      *which = i;
    }
  }
  return best;
}

size_t StopChecker::held_suffix() const {
  size_t held = 0;
  for (const std::string& s : stop_) {
    size_t max_len = std::min(s.size() - 1, pending_.size());
    for (size_t len = max_len; len > held; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) ==
          std::string_view(s).substr(0, len)) {
        held = len;
        break;
      }
    }
  }
  return held;
}

StopUpdate StopChecker::emit(size_t num_bytes) {
  StopUpdate u;
  u.text = pending_.substr(0, num_bytes);
  pending_.erase(0, num_bytes);
  emitted_ += u.text;
  return u;
}

bool StopChecker::stops_at(int32_t token) const {
  return num_tokens_ + 1 >= min_tokens_ && is_stop_token(token);
}

bool StopChecker::ends_with(int32_t token) const {
  return num_tokens_ + 1 >= max_tokens_ || stops_at(token);
}

StopUpdate StopChecker::append(int32_t token, std::string_view text, std::string_view released) {
  assert(!finished_);
  ++num_tokens_;
  const bool may_stop = num_tokens_ >= min_tokens_;
  const bool stop_token = may_stop && is_stop_token(token);
  pending_ += released;
  if (!stop_token || include_stop_) pending_ += text;
  StopUpdate u;
  size_t which = 0;
  size_t at = may_stop ? find_stop(&which) : std::string::npos;
  if (at != std::string::npos) {
    u = emit(include_stop_ ? at + stop_[which].size() : at);
    pending_.clear();
    u.finish = StopFinish::kStop;
    u.stop_string = stop_[which];
  } else if (stop_token) {
    u = emit(pending_.size());
    u.finish = StopFinish::kStop;
    u.stop_token = token;
    u.by_eos = !is_request_stop_token(token);
  } else if (num_tokens_ >= max_tokens_) {
    u = emit(pending_.size());
    u.finish = StopFinish::kLength;
  } else {
    u = emit(pending_.size() - (may_stop ? held_suffix() : 0));
  }
  finished_ = u.finished();
  return u;
}

StopUpdate StopChecker::end_complete() {
  assert(!finished_);
  StopUpdate u = emit(pending_.size());
  u.finish = StopFinish::kStop;
  finished_ = true;
  return u;
}

}  // namespace pagoda
