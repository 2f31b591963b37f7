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

// tensor_parallel_size, pipeline_parallel_size, weight_precision: ModelInfo's,
// the gauges pagoda:tensor_parallel_size and pagoda:pipeline_parallel_size and
// the info gauge pagoda:weight_precision_info{precision="..."} (left out when
// empty).
std::string format_prometheus(const EngineMetrics& metrics, const std::string& model_name,
                              int tensor_parallel_size, int pipeline_parallel_size = 1,
                              const std::string& weight_precision = "");

// Appends vLLM's families (vllm_metrics_text.cpp).
void append_vllm_metrics(std::string& out, const EngineMetrics& metrics, const std::string& model_name);

}  // namespace pagoda::openai
