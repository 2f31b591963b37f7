#include "grammar/compiler.h"

#include "core/utf8.h"
#include "grammar/gbnf_parser.h"
#include "grammar/gbnf_writer.h"
#include "grammar/grammar_constraint.h"
#include "grammar/json_schema_to_gbnf.h"
#include "grammar/regex_to_gbnf.h"

namespace pagoda::grammar {

namespace {

using Kind = StructuredOutputSpec::Kind;

Error invalid(std::string message) {
  return make_error(ErrorCode::kInvalidArgument, std::move(message));
}

Result<std::string> choice_gbnf(const std::vector<std::string>& choices) {
  if (choices.empty()) return invalid("choice: the list of choices is empty");
  std::string out = "root ::= ";
  for (size_t i = 0; i < choices.size(); ++i) {
    if (!is_valid_utf8(choices[i])) {
      return invalid("choice " + std::to_string(i) + " is not valid UTF-8");
    }
    if (i > 0) out += " | ";
    out += gbnf_literal(choices[i]);
  }
  return out + "\n";
}

// The cache key: every field, length-prefixed so that no two specs collide.
std::string spec_key(const StructuredOutputSpec& spec) {
  std::string key = structured_output_kind_name(spec.kind);
  auto add = [&](const std::string& s) { key += ":" + std::to_string(s.size()) + ":" + s; };
  add(spec.text);
  for (const std::string& c : spec.choices) add(c);
  return key;
}

}  // namespace

Result<std::string> GrammarCompiler::spec_to_gbnf(const StructuredOutputSpec& spec) {
  switch (spec.kind) {
    case Kind::kGrammar:
      return spec.text;
    case Kind::kChoice:
      return choice_gbnf(spec.choices);
    case Kind::kJsonObject:
      return json_object_gbnf();
    case Kind::kJsonSchema:
      return json_schema_to_gbnf(spec.text);
    case Kind::kRegex:
      return regex_to_gbnf(spec.text, "root");
  }
  return invalid("unknown structured output kind");
}

GrammarCompiler::GrammarCompiler(std::shared_ptr<const GrammarVocabulary> vocab,
                                 GrammarCompilerOptions options)
    : vocab_(std::move(vocab)), options_(options) {}

Result<std::shared_ptr<const CompiledConstraint>> GrammarCompiler::compile(
    const StructuredOutputSpec& spec) const {
  const std::string key = spec_key(spec);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
  }
  PAGODA_ASSIGN_OR_RETURN(std::string gbnf, spec_to_gbnf(spec));
  auto grammar = parse_gbnf_shared(gbnf);
  if (!grammar.ok()) {
    const std::string prefix = spec.kind == Kind::kGrammar
                                   ? ""
                                   : std::string(structured_output_kind_name(spec.kind)) + ": ";
    return invalid(prefix + grammar.error().message);
  }
  std::shared_ptr<const CompiledConstraint> compiled =
      std::make_shared<CompiledGrammar>(*grammar, vocab_, options_.mask_cache_bytes);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it != index_.end()) return it->second->second;  // compiled meanwhile by another thread
  lru_.push_front({key, compiled});
  index_[key] = lru_.begin();
  while (lru_.size() > options_.max_cached_grammars) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return compiled;
}

size_t GrammarCompiler::num_cached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

}  // namespace pagoda::grammar
