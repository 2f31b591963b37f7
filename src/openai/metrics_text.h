// Prometheus text exposition (format 0.0.4) of EngineMetrics, with vLLM's
// metric names under the `pagoda:` prefix, each labelled model_name="...".
#pragma once

#include <string>

#include "engine/engine_api.h"

namespace pagoda::openai {

inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

std::string format_prometheus(const EngineMetrics& metrics, const std::string& model_name);

}  // namespace pagoda::openai
