// Loading ShareGPT-format conversation files (see dataset.h).
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "bench/dataset.h"

namespace pagoda::bench {

namespace {

struct Conversation {
  std::string prompt;
  std::string completion;
};

// The first two turns' text of every entry that has them.
Result<std::vector<Conversation>> read_conversations(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kNotFound, "cannot open ShareGPT file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    return make_error(ErrorCode::kCorrupt,
                      "ShareGPT file '" + path + "' is not valid JSON: " + e.what());
  }
  if (!doc.is_array())
    return make_error(ErrorCode::kCorrupt,
                      "ShareGPT file '" + path + "': expected a JSON array of conversations");
  std::vector<Conversation> out;
  for (const auto& entry : doc) {
    if (!entry.is_object()) continue;
    auto it = entry.find("conversations");
    if (it == entry.end() || !it->is_array() || it->size() < 2) continue;
    const auto& a = (*it)[0];
    const auto& b = (*it)[1];
    if (!a.is_object() || !b.is_object()) continue;
    auto va = a.find("value"), vb = b.find("value");
    if (va == a.end() || vb == b.end() || !va->is_string() || !vb->is_string()) continue;
    out.push_back({va->get<std::string>(), vb->get<std::string>()});
  }
  return out;
}

// vLLM's is_valid_sequence with its defaults; a fixed output length skips
// the minimum-output check.
bool is_valid_sequence(int64_t prompt_len, int64_t output_len, bool fixed_output) {
  return prompt_len >= 4 && (fixed_output || output_len >= 4) && prompt_len <= 1024 &&
         prompt_len + output_len <= 2048;
}

}  // namespace

Result<std::vector<BenchRequest>> load_sharegpt_requests(const std::string& path,
                                                         int64_t num_requests,
                                                         int64_t output_len_override, uint64_t seed,
                                                         const TokenCounter& count_tokens) {
  PAGODA_ASSIGN_OR_RETURN(auto convs, read_conversations(path));
  std::mt19937_64 rng(seed);
  std::shuffle(convs.begin(), convs.end(), rng);
  std::vector<BenchRequest> valid;
  for (const auto& c : convs) {
    if (static_cast<int64_t>(valid.size()) >= num_requests) break;
    PAGODA_ASSIGN_OR_RETURN(int64_t prompt_len, count_tokens(c.prompt));
    int64_t output_len = output_len_override;
    if (output_len <= 0) {
      PAGODA_ASSIGN_OR_RETURN(output_len, count_tokens(c.completion));
    }
    if (!is_valid_sequence(prompt_len, output_len, output_len_override > 0)) continue;
    valid.push_back({{}, c.prompt, prompt_len, output_len});
  }
  if (valid.empty())
    return make_error(ErrorCode::kInvalidArgument,
                      "ShareGPT file '" + path +
                          "' has no conversation with two turns within the "
                          "length limits (prompt 4..1024 tokens, total <= 2048)");
  std::vector<BenchRequest> out;
  out.reserve(static_cast<size_t>(std::max<int64_t>(num_requests, 0)));
  for (int64_t i = 0; i < num_requests; ++i)
    out.push_back(valid[static_cast<size_t>(i) % valid.size()]);
  return out;
}

}  // namespace pagoda::bench
