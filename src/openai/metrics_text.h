// Prometheus text exposition (format 0.0.4) of EngineMetrics: pagoda's own
// families (`pagoda:` prefix, label model_name) and, beside them, vLLM's
// (`vllm:` prefix, labels model_name and engine="0", vLLM's names, types,
// help texts and buckets), so that dashboards made for vLLM work unchanged.
// docs/api.md lists every family.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/engine_api.h"

namespace pagoda::openai {

inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// Speculative decoding's accepted tokens per draft position, labelled by
// the position ("0", "1", ...).
std::vector<std::pair<std::string, double>> spec_positions(const EngineMetrics& m);

// `info` gives the gauges of the engine's configuration:
// pagoda:tensor_parallel_size, pagoda:pipeline_parallel_size,
// pagoda:kv_cache_capacity_tokens, pagoda:kv_cache_info (1, labelled
// with the cache's dtype and block size) and, when info.weight_precision is
// set, pagoda:weight_precision_info{precision="..."}.
std::string format_prometheus(const EngineMetrics& metrics, const std::string& model_name,
                              const ModelInfo& info);

// Appends vLLM's families (vllm_metrics_text.cpp).
void append_vllm_metrics(std::string& out, const EngineMetrics& metrics, const std::string& model_name);

}  // namespace pagoda::openai
