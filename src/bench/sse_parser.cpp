#include "bench/sse_parser.h"

namespace pagoda::bench {

std::vector<std::string> SseParser::feed(std::string_view bytes) {
  std::vector<std::string> out;
  size_t i = 0;
  if (last_was_cr_ && !bytes.empty() && bytes[0] == '\n') i = 1;
  last_was_cr_ = false;
  size_t line_start = i;
  for (; i < bytes.size(); ++i) {
    char c = bytes[i];
    if (c != '\n' && c != '\r') continue;
    pending_.append(bytes.substr(line_start, i - line_start));
    take_line(pending_, out);
    pending_.clear();
    if (c == '\r') {
      if (i + 1 < bytes.size()) {
        if (bytes[i + 1] == '\n') ++i;
      } else {
        last_was_cr_ = true;
      }
    }
    line_start = i + 1;
  }
  if (line_start < bytes.size()) pending_.append(bytes.substr(line_start));
  return out;
}

std::vector<std::string> SseParser::finish() {
  std::vector<std::string> out;
  if (!pending_.empty()) {
    take_line(pending_, out);
    pending_.clear();
  }
  take_line("", out);
  return out;
}

void SseParser::take_line(std::string_view line, std::vector<std::string>& out) {
  if (line.empty()) {
    if (has_data_) out.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line[0] == ':') return;
  auto colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  if (field != "data") return;
  std::string_view value =
      colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  if (has_data_) data_.push_back('\n');
  data_.append(value);
  has_data_ = true;
}

}  // namespace pagoda::bench
