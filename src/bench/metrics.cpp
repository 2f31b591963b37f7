#include "bench/metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace pagoda::bench {

namespace {

constexpr double kMsPerS = 1000.0;

double mean_of(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Population standard deviation (numpy's default ddof=0).
double std_of(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  double m = mean_of(v);
  double acc = 0.0;
  for (double x : v) acc += (x - m) * (x - m);
  return std::sqrt(acc / static_cast<double>(v.size()));
}

bool meets_slo(const SloConfig& slo, double ttft, double tpot, double e2el) {
  if (slo.ttft_ms && *slo.ttft_ms / kMsPerS < ttft) return false;
  if (slo.tpot_ms && *slo.tpot_ms / kMsPerS < tpot) return false;
  if (slo.e2el_ms && *slo.e2el_ms / kMsPerS < e2el) return false;
  return true;
}

// Chunks in the busiest one-second bucket counted from the earliest start,
// and the peak number of requests in flight (half-open [start, end)).
void peak_rates(const std::vector<RequestRecord>& records, ServeMetrics& m) {
  double min_start = 0.0, max_end = 0.0;
  bool any = false;
  for (const auto& r : records) {
    if (!r.success) continue;
    min_start = any ? std::min(min_start, r.start_time) : r.start_time;
    max_end = any ? std::max(max_end, r.start_time + r.latency) : r.start_time + r.latency;
    any = true;
  }
  if (!any) return;
  auto num_buckets = static_cast<int64_t>(std::ceil(max_end - min_start)) + 1;
  std::vector<double> per_second(static_cast<size_t>(num_buckets), 0.0);
  std::vector<std::pair<double, int>> events;
  for (const auto& r : records) {
    if (!r.success) continue;
    double t = r.start_time + r.ttft;
    auto add = [&](double at) {
      auto b = static_cast<int64_t>(at - min_start);
      if (b >= 0 && b < num_buckets) per_second[static_cast<size_t>(b)] += 1.0;
    };
    add(t);
    for (double gap : r.itl) add(t += gap);
    events.emplace_back(r.start_time, 1);
    events.emplace_back(r.start_time + r.latency, -1);
  }
  m.max_output_tokens_per_s = *std::max_element(per_second.begin(), per_second.end());
  std::sort(events.begin(), events.end());  // at equal times, -1 sorts before +1
  int64_t now = 0;
  for (const auto& e : events) {
    now += e.second;
    m.max_concurrent_requests = std::max(m.max_concurrent_requests, now);
  }
}

}  // namespace

int64_t output_length(const RequestRecord& r) {
  return r.output_tokens > 0 ? r.output_tokens : r.num_chunks;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  double pos = p / 100.0 * static_cast<double>(values.size() - 1);
  auto lo = static_cast<size_t>(std::floor(pos));
  auto hi = static_cast<size_t>(std::ceil(pos));
  double frac = pos - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

LatencyStats latency_stats(const std::vector<double>& values_s,
                           const std::vector<double>& percentiles) {
  LatencyStats s;
  s.mean_ms = mean_of(values_s) * kMsPerS;
  s.median_ms = percentile(values_s, 50.0) * kMsPerS;
  s.std_ms = std_of(values_s) * kMsPerS;
  for (double p : percentiles) s.percentiles_ms.emplace_back(p, percentile(values_s, p) * kMsPerS);
  return s;
}

std::vector<double> tpot_values(const std::vector<RequestRecord>& records) {
  std::vector<double> out;
  for (const auto& r : records) {
    int64_t n = output_length(r);
    if (r.success && n > 1) out.push_back((r.latency - r.ttft) / static_cast<double>(n - 1));
  }
  return out;
}

ServeMetrics compute_serve_metrics(const std::vector<RequestRecord>& records, double duration_s,
                                   const SloConfig& slo, const std::vector<double>& percentiles) {
  ServeMetrics m;
  m.duration_s = duration_s;
  std::vector<double> ttfts, tpots, itls, e2els;
  for (const auto& r : records) {
    if (!r.success) {
      ++m.failed;
      m.output_lens.push_back(0);
      continue;
    }
    int64_t n = output_length(r);
    m.output_lens.push_back(n);
    m.total_input += r.prompt_len;
    m.total_output += n;
    double tpot = 0.0;  // one-token requests count as TPOT 0 for goodput
    if (n > 1) {
      tpot = (r.latency - r.ttft) / static_cast<double>(n - 1);
      tpots.push_back(tpot);
    }
    itls.insert(itls.end(), r.itl.begin(), r.itl.end());
    ttfts.push_back(r.ttft);
    e2els.push_back(r.latency);
    ++m.completed;
    if (slo.any() && meets_slo(slo, r.ttft, tpot, r.latency)) ++m.num_good;
  }
  double d = duration_s > 0.0 ? duration_s : 1.0;
  m.request_throughput = static_cast<double>(m.completed) / d;
  if (slo.any()) m.request_goodput = static_cast<double>(m.num_good) / d;
  m.output_throughput = static_cast<double>(m.total_output) / d;
  m.total_token_throughput = static_cast<double>(m.total_input + m.total_output) / d;
  m.ttft = latency_stats(ttfts, percentiles);
  m.tpot = latency_stats(tpots, percentiles);
  m.itl = latency_stats(itls, percentiles);
  m.e2el = latency_stats(e2els, percentiles);
  peak_rates(records, m);
  return m;
}

}  // namespace pagoda::bench
