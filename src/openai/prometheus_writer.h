// Writer of the Prometheus text exposition format 0.0.4: HELP and TYPE
// lines, gauges, counters and cumulative histograms, every sample carrying
// one fixed label set. Numbers are written as Prometheus' Python client
// writes them (1.0, 0.25, 1e+06, +Inf), so bucket `le` labels read the same
// as a vLLM server's.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "engine/engine_api.h"

namespace pagoda::openai {

// `value` as a label value (backslash, double quote and newline escaped).
std::string escape_label_value(std::string_view value);

// `v` as prometheus_client's floatToGoString writes it.
std::string prometheus_number(double v);

class PrometheusWriter {
 public:
  // `out`: the text to append to. `labels`: the label set of every sample,
  // already formatted (`a="x",b="y"`; may be empty).
  PrometheusWriter(std::string& out, std::string labels) : out_(out), labels_(std::move(labels)) {}

  void gauge(std::string_view name, double value, std::string_view help);
  // An info gauge: one sample of value 1 whose `labels` (formatted, as in
  // the constructor) describe a configuration.
  void info(std::string_view name, std::string_view help, std::string_view labels);
  // `name` without the _total suffix. The HELP and TYPE lines name the
  // samples, `name`_total, as Prometheus' own clients write them; parsers
  // then read the family as `name`.
  void counter(std::string_view name, double value, std::string_view help);
  // A counter family (`name` without _total) with one sample per
  // (value of `label`, count).
  void labelled_counter(std::string_view name, std::string_view help, std::string_view label,
                        const std::vector<std::pair<std::string, double>>& samples);
  // An info gauge: one sample of value 1 whose `label` carries `value`.
  void info(std::string_view name, std::string_view help, std::string_view label,
            std::string_view value);
  // _bucket (one per bound, then +Inf), _sum and _count.
  void histogram(std::string_view name, const Histogram& h, std::string_view help);

 private:
  void header(std::string_view name, std::string_view type, std::string_view help);
  void sample(std::string_view name, double value, std::string_view extra_labels = {});

  std::string& out_;
  std::string labels_;
};

}  // namespace pagoda::openai
