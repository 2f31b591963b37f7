#include "bench/dataset.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace pagoda::bench {

namespace {

std::vector<int32_t> draw_ids(std::mt19937_64& rng, const TokenPool& pool, int64_t n) {
  std::uniform_int_distribution<size_t> pick(0, pool.size() - 1);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = pool[pick(rng)];
  return ids;
}

Status check_pool(const TokenPool& pool) {
  if (pool.empty())
    return make_error(ErrorCode::kInvalidArgument, "the token pool for random prompts is empty");
  return Status::Ok();
}

int64_t lognormal_len(std::mt19937_64& rng, double mean, double sigma, int64_t lo, int64_t hi) {
  // E[exp(N(mu, sigma^2))] = exp(mu + sigma^2 / 2) = mean.
  std::lognormal_distribution<double> d(std::log(mean) - sigma * sigma / 2.0, sigma);
  return std::clamp(static_cast<int64_t>(std::llround(d(rng))), lo, hi);
}

}  // namespace

Result<std::vector<BenchRequest>> make_random_requests(const RandomSpec& spec,
                                                       const TokenPool& pool) {
  PAGODA_RETURN_IF_ERROR(check_pool(pool));
  if (!(spec.range_ratio >= 0.0 && spec.range_ratio < 1.0))
    return make_error(ErrorCode::kInvalidArgument,
                      "--range-ratio must be in [0, 1), got " + std::to_string(spec.range_ratio));
  if (spec.input_len < 0 || spec.output_len < 1 || spec.prefix_len < 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "--input-len and --prefix-len must be >= 0 and --output-len >= 1");
  auto in_lo = static_cast<int64_t>(
      std::floor(static_cast<double>(spec.input_len) * (1.0 - spec.range_ratio)));
  auto in_hi = static_cast<int64_t>(
      std::ceil(static_cast<double>(spec.input_len) * (1.0 + spec.range_ratio)));
  auto out_lo =
      std::max<int64_t>(1, static_cast<int64_t>(std::floor(static_cast<double>(spec.output_len) *
                                                           (1.0 - spec.range_ratio))));
  auto out_hi =
      std::max<int64_t>(1, static_cast<int64_t>(std::ceil(static_cast<double>(spec.output_len) *
                                                          (1.0 + spec.range_ratio))));
  if (spec.prefix_len + in_lo < 1)
    return make_error(ErrorCode::kInvalidArgument,
                      "random prompts would be empty: raise --input-len or --prefix-len");
  std::mt19937_64 rng(spec.seed);
  std::vector<int32_t> prefix = draw_ids(rng, pool, spec.prefix_len);
  std::uniform_int_distribution<int64_t> in_len(in_lo, in_hi), out_len(out_lo, out_hi);
  std::vector<BenchRequest> out(static_cast<size_t>(spec.num_requests));
  for (auto& r : out) {
    int64_t n = in_len(rng);
    r.output_len = out_len(rng);
    r.prompt_ids = prefix;
    auto tail = draw_ids(rng, pool, n);
    r.prompt_ids.insert(r.prompt_ids.end(), tail.begin(), tail.end());
    r.prompt_len = static_cast<int64_t>(r.prompt_ids.size());
  }
  return out;
}

Result<std::vector<BenchRequest>> make_sharegpt_like_requests(int64_t num_requests,
                                                              int64_t output_len_override,
                                                              uint64_t seed,
                                                              const TokenPool& pool) {
  PAGODA_RETURN_IF_ERROR(check_pool(pool));
  std::mt19937_64 rng(seed);
  std::vector<BenchRequest> out(static_cast<size_t>(std::max<int64_t>(num_requests, 0)));
  for (auto& r : out) {
    int64_t n_in = lognormal_len(rng, kShareGptMeanInput, kShareGptSigmaInput, 4, 1024);
    int64_t n_out = lognormal_len(rng, kShareGptMeanOutput, kShareGptSigmaOutput, 4, 1024);
    r.prompt_ids = draw_ids(rng, pool, n_in);
    r.prompt_len = n_in;
    r.output_len = output_len_override > 0 ? output_len_override : n_out;
  }
  return out;
}

int64_t estimate_tokens(const std::string& text) {
  return std::max<int64_t>(1, static_cast<int64_t>((text.size() + 3) / 4));
}

}  // namespace pagoda::bench
