// Benchmark request sets: what each request sends and how long its output
// must be. Token-id datasets (random, prefix, synthetic ShareGPT) know their
// exact prompt lengths; ShareGPT files carry text whose length comes from a
// token counter (the server's /tokenize, else an estimate).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"

namespace pagoda::bench {

struct BenchRequest {
  std::vector<int32_t> prompt_ids;  // the prompt as token ids (empty for text prompts)
  std::string prompt_text;          // the prompt as text (used when prompt_ids is empty)
  int64_t prompt_len = 0;           // tokens (exact for ids, counted or estimated for text)
  int64_t output_len = 0;           // max_tokens sent with the request
};

// Lengths of a `random` request set: input and output lengths drawn
// uniformly from the integers [floor(L*(1-r)), ceil(L*(1+r))] (output at
// least 1), as vLLM's RandomDataset does. r must lie in [0, 1).
struct RandomSpec {
  int64_t num_requests = 0;
  int64_t input_len = 1024;
  int64_t output_len = 128;
  double range_ratio = 0.0;
  int64_t prefix_len = 0;  // tokens of one shared random prefix put before every prompt
  uint64_t seed = 0;
};

// Token ids the random prompts are drawn from (uniformly): ids the server's
// tokenizer accepts.
using TokenPool = std::vector<int32_t>;

// `random` (and `prefix`, which is random with prefix_len > 0): prompts of
// exactly prefix_len + sampled input length token ids.
Result<std::vector<BenchRequest>> make_random_requests(const RandomSpec& spec,
                                                       const TokenPool& pool);

// ShareGPT-like lengths without a file: log-normal input and output lengths
// with means about kShareGptMeanInput / kShareGptMeanOutput (sigma
// kShareGptSigmaInput / kShareGptSigmaOutput), clamped to [4, 1024] for the
// prompt and [4, 1024] for the output (ShareGPT's usual filter), seeded.
// output_len_override > 0 fixes every output length.
inline constexpr double kShareGptMeanInput = 220.0;
inline constexpr double kShareGptMeanOutput = 190.0;
inline constexpr double kShareGptSigmaInput = 0.8;
inline constexpr double kShareGptSigmaOutput = 0.6;
Result<std::vector<BenchRequest>> make_sharegpt_like_requests(int64_t num_requests,
                                                              int64_t output_len_override,
                                                              uint64_t seed, const TokenPool& pool);

// Counts the tokens of a text (the server's /tokenize or an estimate).
using TokenCounter = std::function<Result<int64_t>(const std::string&)>;

// A ShareGPT-format JSON file: an array of {"conversations": [{"from",
// "value"}, ...]}; the first turn is the prompt, the second's length the
// output length (unless output_len_override > 0). Entries are shuffled with
// the seed; those with fewer than two turns, a prompt or output under 4
// tokens, a prompt over 1024 tokens or a total over 2048 are skipped (vLLM's
// filter); the valid ones are cycled when the file has fewer than needed.
// Errors name the file and what is wrong with it.
Result<std::vector<BenchRequest>> load_sharegpt_requests(const std::string& path,
                                                         int64_t num_requests,
                                                         int64_t output_len_override, uint64_t seed,
                                                         const TokenCounter& count_tokens);

// chars/4 rounded up (at least 1): the length estimate without a tokenizer.
int64_t estimate_tokens(const std::string& text);

}  // namespace pagoda::bench
