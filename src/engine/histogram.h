// Cumulative histograms for EngineMetrics: vLLM's bucket layouts (so that
// dashboards written for vLLM's /metrics read pagoda's unchanged) and
// observe().
#pragma once

#include <cstdint>
#include <vector>

#include "engine/engine_api.h"

namespace pagoda {

// A histogram with these upper bounds (ascending) and no observations.
Histogram make_histogram(std::vector<double> bounds);

// Adds one observation: every bucket whose bound is >= value counts it
// (cumulative, as the text format wants); a value above every bound is only
// in count (the +Inf bucket). No allocation.
void observe(Histogram& h, double value);

// 1, 2, 5, 10, 20, 50, ... up to and including max_value (empty below 1):
// vLLM's layout for token counts.
std::vector<double> buckets_1_2_5(int64_t max_value);

// Seconds: time to first token; inter-token latency (and per-request time
// per output token); request phases (e2e, queue, prefill, decode, inference).
std::vector<double> ttft_buckets();
std::vector<double> inter_token_buckets();
std::vector<double> request_latency_buckets();
// Tokens per engine step, and the request's n.
std::vector<double> iteration_tokens_buckets();
std::vector<double> params_n_buckets();

// EngineMetrics with every histogram laid out as above; token-count
// histograms go up to max_model_len.
EngineMetrics make_engine_metrics(int64_t max_model_len);

}  // namespace pagoda
