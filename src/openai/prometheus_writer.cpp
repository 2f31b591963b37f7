#include "openai/prometheus_writer.h"

#include <fmt/format.h>

#include <cmath>

namespace pagoda::openai {

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string prometheus_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  // Python's repr: the shortest round-trip digits, ".0" on integral values
  // in plain notation.
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  // floatToGoString: plain positive values with more than 6 integer digits
  // switch to Go's exponent form (1000000.0 -> 1e+06).
  const size_t dot = s.find('.');
  if (v > 0 && dot != std::string::npos && dot > 6 && s.find('e') == std::string::npos) {
    std::string mantissa = s.substr(0, 1) + "." + s.substr(1, dot - 1) + s.substr(dot + 1);
    while (!mantissa.empty() && (mantissa.back() == '0' || mantissa.back() == '.'))
      mantissa.pop_back();
    return fmt::format("{}e+0{}", mantissa, dot - 1);
  }
  return s;
}

void PrometheusWriter::header(std::string_view name, std::string_view type, std::string_view help) {
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void PrometheusWriter::sample(std::string_view name, double value, std::string_view extra_labels) {
  const std::string_view comma = !labels_.empty() && !extra_labels.empty() ? "," : "";
  out_ += fmt::format("{}{{{}{}{}}} {}\n", name, labels_, comma, extra_labels,
                      prometheus_number(value));
}

void PrometheusWriter::gauge(std::string_view name, double value, std::string_view help) {
  header(name, "gauge", help);
  sample(name, value);
}

void PrometheusWriter::info(std::string_view name, std::string_view help, std::string_view labels) {
  header(name, "gauge", help);
  sample(name, 1.0, labels);
}

void PrometheusWriter::counter(std::string_view name, double value, std::string_view help) {
  const std::string total = fmt::format("{}_total", name);
  header(total, "counter", help);
  sample(total, value);
}

void PrometheusWriter::labelled_counter(
    std::string_view name, std::string_view help, std::string_view label,
    const std::vector<std::pair<std::string, double>>& samples) {
  const std::string total = fmt::format("{}_total", name);
  header(total, "counter", help);
  for (const auto& [value, count] : samples) {
    sample(total, count, fmt::format("{}=\"{}\"", label, escape_label_value(value)));
  }
}

void PrometheusWriter::info(std::string_view name, std::string_view help, std::string_view label,
                            std::string_view value) {
  header(name, "gauge", help);
  sample(name, 1.0, fmt::format("{}=\"{}\"", label, escape_label_value(value)));
}

void PrometheusWriter::histogram(std::string_view name, const Histogram& h, std::string_view help) {
  header(name, "histogram", help);
  const std::string bucket = fmt::format("{}_bucket", name);
  for (size_t i = 0; i < h.bounds.size() && i < h.counts.size(); ++i) {
    sample(bucket, static_cast<double>(h.counts[i]),
           fmt::format("le=\"{}\"", prometheus_number(h.bounds[i])));
  }
  sample(bucket, static_cast<double>(h.count), "le=\"+Inf\"");
  sample(fmt::format("{}_sum", name), h.sum);
  sample(fmt::format("{}_count", name), static_cast<double>(h.count));
}

}  // namespace pagoda::openai
