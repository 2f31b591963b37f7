// Compiles a StructuredOutputSpec (sample/structured_output.h) into a shared
// CompiledConstraint over one vocabulary: GBNF (kGrammar), choice lists
// (kChoice, alternatives of literals), JSON Schema / any JSON object / regex
// through their converters to GBNF. Compiled constraints are cached by the
// spec (kind, text, choices) in a bounded LRU. Thread-safe.
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/result.h"
#include "grammar/vocabulary.h"
#include "sample/structured_output.h"
#include "sample/token_constraint.h"

namespace pagoda::grammar {

struct GrammarCompilerOptions {
  size_t max_cached_grammars = 64;
  size_t mask_cache_bytes = 64ull << 20;  // per compiled grammar
};

class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const GrammarVocabulary> vocab,
                           GrammarCompilerOptions options = {});

  // Errors: kInvalidArgument naming the field and position (the parser's
  // and converters' messages, prefixed by the kind).
  Result<std::shared_ptr<const CompiledConstraint>> compile(const StructuredOutputSpec& spec) const;

  // The GBNF text a spec compiles from (root rule "root").
  static Result<std::string> spec_to_gbnf(const StructuredOutputSpec& spec);

  const GrammarVocabulary& vocab() const { return *vocab_; }
  size_t num_cached() const;

 private:
  std::shared_ptr<const GrammarVocabulary> vocab_;
  GrammarCompilerOptions options_;
  mutable std::mutex mu_;
  using Entry = std::pair<std::string, std::shared_ptr<const CompiledConstraint>>;
  mutable std::list<Entry> lru_;  // most recent first
  mutable std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

}  // namespace pagoda::grammar
