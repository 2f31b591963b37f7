// W7 "input-grounded editing" (bench/README.md's workload list): a prompt of
// about input_len tokens made of a fixed source file -- the first whole lines
// of jinja2 3.1.6's jinja2/lexer.py, read from the installed package at run
// time (bench/package_source.h), never stored in this repository, from its
// first line that defines a name (past the docstring and imports) -- wrapped
// in an instruction to reproduce it with one small edit (rename one name the
// excerpt defines). The output largely copies the prompt, which is where
// n-gram and suffix speculation pay. Chat models get the instruction as a
// user message through their chat template; other models a plain completion
// prompt that ends where the edited file starts.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/package_source.h"
#include "core/result.h"
#include "jinja/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::bench {

// The W7 text: package, version and path.
PackageFile w7_source();

// Renders a chat for the model (Engine::apply_chat_template); null: the
// model has no chat template (plain completion prompts).
using ChatRenderer = std::function<Result<std::string>(const ChatTemplateInputs&)>;

class W7Prompts {
 public:
  // Requests are numbered 0 .. kMaxRequests - 1.
  static constexpr int64_t kMaxRequests = 1000000;

  // Keeps the most whole lines of `source`, from its first line that
  // defines a name (a `def` or `class`, or a module-level assignment), with
  // which every prompt has at most input_len tokens. Errors
  // (kInvalidArgument): the source defines no name, input_len (named as
  // --input-len) leaves no room for the instruction and that first line; and
  // the chat template's error.
  static Result<W7Prompts> create(std::string source, const Tokenizer& tokenizer, ChatRenderer chat,
                                  int64_t input_len);

  // The prompts of requests first .. first + count - 1 (first + count <=
  // kMaxRequests). Request i renames names()[i % names().size()] to
  // "<name>_e<i>": every prompt differs, so the prefix cache shares only
  // what precedes the instruction's name. Errors: the chat template's, or
  // a range outside [0, kMaxRequests).
  Result<std::vector<std::vector<int32_t>>> make(int64_t first, int64_t count) const;

  int64_t first_line() const { return static_cast<int64_t>(first_) + 1; }  // 1-based
  int64_t num_lines() const { return static_cast<int64_t>(lines_); }       // kept from it
  const std::vector<std::string>& names() const { return names_; }

 private:
  W7Prompts(std::string source, const Tokenizer& tokenizer, ChatRenderer chat)
      : source_(std::move(source)), tokenizer_(&tokenizer), chat_(std::move(chat)) {}
  // `lines` lines of the source from first_ (with their line ends).
  std::string excerpt(size_t lines) const;
  // Request `index`'s prompt over `text`, renaming `name`.
  Result<std::vector<int32_t>> prompt(const std::string& text, const std::string& name,
                                      int64_t index) const;

  std::string source_;
  const Tokenizer* tokenizer_;
  ChatRenderer chat_;
  size_t first_ = 0;  // 0-based: the first line that defines a name
  size_t lines_ = 0;
  std::vector<std::string> names_;
};

}  // namespace pagoda::bench
