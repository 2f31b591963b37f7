// grammar_mask_bench: the host cost of structured-output token masks on a
// real 128k-token vocabulary (Llama 3.1's tokenizer by default).
//
//   grammar_mask_bench [TOKENIZER_DIR] [NUM_STEPS]
//
// Prints the vocabulary build time, then for the JSON grammar (any JSON
// object) and a nested-object schema-like grammar: random walks of NUM_STEPS
// tokens (a random allowed token each step: the random-weight worst case),
// timing fill_next_mask per step: the uncached walk of the trie (miss), the
// cached mask (hit), and the mean over the walk with the cache as the engine
// uses it. The goal (issue 17): a few µs per row on average.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "grammar/compiler.h"
#include "grammar/grammar_constraint.h"
#include "grammar/token_masks.h"
#include "sample/token_mask.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::grammar {
namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

constexpr const char* kJson = R"gbnf(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt/] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)gbnf";

// The shape a JSON Schema converter emits for a nested object with fixed keys.
constexpr const char* kNested = R"gbnf(
root ::= "{" ws "\"name\"" ws ":" ws string "," ws "\"address\"" ws ":" ws address "," ws "\"tags\"" ws ":" ws tags "}" ws
address ::= "{" ws "\"street\"" ws ":" ws string "," ws "\"zip\"" ws ":" ws int "}" ws
tags ::= "[" ws (string ("," ws string){0,9})? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt/] | "u" [0-9a-fA-F]{4}) ){0,40} "\"" ws
int ::= "-"? ([0-9] | [1-9] [0-9]{0,15}) ws
ws ::= | " " | "\n" [ \t]{0,20}
)gbnf";

void run(const char* name, const char* gbnf, std::shared_ptr<const GrammarVocabulary> vocab,
         int num_steps) {
  GrammarCompiler compiler(vocab);
  auto t0 = Clock::now();
  auto compiled = compiler.compile({StructuredOutputSpec::Kind::kGrammar, gbnf, {}});
  const double compile_us = us_since(t0);
  if (!compiled.ok()) {
    std::printf("%s: %s\n", name, compiled.error().message.c_str());
    return;
  }
  const auto& cg = static_cast<const CompiledGrammar&>(**compiled);
  std::vector<uint32_t> words(static_cast<size_t>(mask_num_words(vocab->logits_vocab_size())));
  std::mt19937 rng(1);
  double total_us = 0, miss_us = 0, hit_us = 0;
  int steps = 0, misses = 0, hits = 0, finished = 0;
  auto c = (*compiled)->start();
  while (steps < num_steps) {
    if (c->is_finished()) {
      c = (*compiled)->start();
      ++finished;
    }
    std::fill(words.begin(), words.end(), 0u);
    const uint64_t misses_before = cg.mask_cache().num_misses();
    t0 = Clock::now();
    c->fill_next_mask(words);
    const double us = us_since(t0);
    total_us += us;
    if (cg.mask_cache().num_misses() != misses_before) {
      miss_us += us;
      ++misses;
    } else {
      hit_us += us;
      ++hits;
    }
    ++steps;
    std::vector<int32_t> ids;
    for (size_t w = 0; w < words.size(); ++w) {
      for (uint32_t bits = words[w]; bits; bits &= bits - 1) {
        ids.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(__builtin_ctz(bits))));
      }
    }
    if (ids.empty()) break;
    int32_t pick = ids[rng() % ids.size()];
    if (vocab->is_eos(pick) && ids.size() > 1 && rng() % 4 != 0)
      pick = ids[(rng() % (ids.size() - 1))];
    c->accept(pick);
  }
  std::printf(
      "%-8s compile %8.1f us | %5d steps, %3d outputs | mean %8.1f us/mask | miss %5d x %9.1f us | "
      "hit %5d x %6.2f us | local masks %zu\n",
      name, compile_us, steps, finished, total_us / steps, misses, misses ? miss_us / misses : 0.0,
      hits, hits ? hit_us / hits : 0.0, cg.local_cache().size());
}

}  // namespace
}  // namespace pagoda::grammar

int main(int argc, char** argv) {
  using namespace pagoda;
  using namespace pagoda::grammar;
  const std::string dir = argc > 1 ? argv[1] : PAGODA_SHARED_DIR "/models/tokenizers/llama3_1";
  const int num_steps = argc > 2 ? std::atoi(argv[2]) : 2000;
  auto tok = Tokenizer::load(dir);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.error().message.c_str());
    return 1;
  }
  auto t0 = Clock::now();
  auto vocab = GrammarVocabulary::from_tokenizer(**tok, (*tok)->eos_ids(), (*tok)->vocab_size());
  if (!vocab.ok()) return 1;
  std::printf("vocabulary: %d tokens, %zu trie nodes, built in %.1f ms (%s)\n",
              (*vocab)->num_tokens(), (*vocab)->trie().size(), us_since(t0) / 1000, dir.c_str());
  run("json", kJson, *vocab, num_steps);
  run("nested", kNested, *vocab, num_steps);
  return 0;
}
