#include "bench/inproc/w7_editing.h"

#include <algorithm>
#include <regex>

namespace pagoda::bench {

namespace {

// Byte offsets just past each line end of `text` (a last line without one
// ends at text.size()).
std::vector<size_t> line_ends(const std::string& text) {
  std::vector<size_t> ends;
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') ends.push_back(i + 1);
  if (ends.empty() || ends.back() != text.size()) ends.push_back(text.size());
  return ends;
}

// Names `text` defines, in order of first definition: `def NAME`, `class
// NAME` (any indent) and module-level `NAME =` / `NAME:` assignments.
std::vector<std::string> defined_names(const std::string& text) {
  static const std::regex def_re(R"(^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+([A-Za-z_]\w*))");
  static const std::regex assign_re(R"(^([A-Za-z_]\w*)[ \t]*(?::|=[^=]))");
  std::vector<std::string> names;
  size_t begin = 0;
  for (size_t end : line_ends(text)) {
    const std::string line = text.substr(begin, end - begin);
    begin = end;
    std::smatch m;
    if (std::regex_search(line, m, def_re) || std::regex_search(line, m, assign_re)) {
      const std::string name = m[1].str();
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  return names;
}

}  // namespace

PackageFile w7_source() {
  return {"jinja2", "3.1.6", "jinja2/lexer.py"};
}

std::string W7Prompts::excerpt(size_t lines) const {
  const std::vector<size_t> ends = line_ends(source_);
  const size_t begin = first_ == 0 ? 0 : ends[first_ - 1];
  const size_t last = std::min(first_ + lines, ends.size());
  return last <= first_ ? std::string() : source_.substr(begin, ends[last - 1] - begin);
}

Result<std::vector<int32_t>> W7Prompts::prompt(const std::string& text, const std::string& name,
                                               int64_t index) const {
  const PackageFile src = w7_source();
  const std::string renamed = name + "_e" + std::to_string(index);
  std::string instruction =
      "Here is a part of the file " + src.path + " from " + src.package + " " + src.version +
      ". Reproduce it exactly, with one edit: rename `" + name + "` to `" + renamed +
      "` everywhere it appears. Answer with the edited text only.\n\n" + "```python\n" + text +
      (text.empty() || text.back() == '\n' ? "" : "\n") + "```\n";
  if (!chat_) {
    instruction += "\nThe edited text:\n```python\n";
    return tokenizer_->encode(instruction);
  }
  ChatTemplateInputs inputs;
  inputs.messages.push_back({{"role", "user"}, {"content", instruction}});
  inputs.add_generation_prompt = true;
  PAGODA_ASSIGN_OR_RETURN(std::string rendered, chat_(inputs));
  return tokenizer_->encode_prompt(rendered);
}

Result<W7Prompts> W7Prompts::create(std::string source, const Tokenizer& tokenizer,
                                    ChatRenderer chat, int64_t input_len) {
  W7Prompts w(std::move(source), tokenizer, std::move(chat));
  // From the first line that defines a name (past a module's docstring and
  // imports).
  const std::vector<size_t> ends = line_ends(w.source_);
  for (size_t begin = 0; w.first_ < ends.size(); begin = ends[w.first_++])
    if (!defined_names(w.source_.substr(begin, ends[w.first_] - begin)).empty()) break;
  if (w.first_ == ends.size())
    return make_error(ErrorCode::kInvalidArgument, "the W7 source defines no name to rename");
  const size_t total = ends.size() - w.first_;
  // The longest prompt over the names the first `lines` lines define, each
  // with the longest request number: the name whose rename takes the most
  // tokens (names only appear in the instruction), or every name (`all`).
  auto longest = [&](size_t lines, bool all) -> Result<int64_t> {
    const std::string text = w.excerpt(lines);
    std::vector<std::string> names = defined_names(text);
    if (names.empty()) names.push_back("x");  // measures the instruction alone
    if (!all) {
      auto cost = [&](const std::string& n) {
        return tokenizer
            .encode_continuation("`" + n + "` to `" + n + "_e" + std::to_string(kMaxRequests - 1) +
                                 "`")
            .size();
      };
      names = {*std::max_element(names.begin(), names.end(),
                                 [&](const auto& a, const auto& b) { return cost(a) < cost(b); })};
    }
    int64_t most = 0;
    for (const std::string& name : names) {
      PAGODA_ASSIGN_OR_RETURN(auto ids, w.prompt(text, name, kMaxRequests - 1));
      most = std::max(most, static_cast<int64_t>(ids.size()));
    }
    return most;
  };
  PAGODA_ASSIGN_OR_RETURN(int64_t shortest, longest(1, true));
  if (shortest > input_len)
    return make_error(ErrorCode::kInvalidArgument,
                      "--input-len " + std::to_string(input_len) +
                          " is too short for W7: the instruction and the file's first line take " +
                          std::to_string(shortest) + " tokens");
  // The most lines that fit (prompts grow with the lines), then checked
  // with every name.
  size_t lo = 1, hi = total;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo + 1) / 2;
    PAGODA_ASSIGN_OR_RETURN(int64_t n, longest(mid, false));
    if (n <= input_len)
      lo = mid;
    else
      hi = mid - 1;
  }
  for (;; --lo) {
    PAGODA_ASSIGN_OR_RETURN(int64_t n, longest(lo, true));
    if (n <= input_len || lo == 1) break;
  }
  w.lines_ = lo;
  w.names_ = defined_names(w.excerpt(lo));
  return w;
}

Result<std::vector<std::vector<int32_t>>> W7Prompts::make(int64_t first, int64_t count) const {
  if (first < 0 || count < 0 || first + count > kMaxRequests)
    return make_error(ErrorCode::kInvalidArgument,
                      "W7 numbers at most " + std::to_string(kMaxRequests) + " requests");
  const std::string text = excerpt(lines_);
  std::vector<std::vector<int32_t>> out;
  for (int64_t i = first; i < first + count; ++i) {
    PAGODA_ASSIGN_OR_RETURN(auto ids,
                            prompt(text, names_[static_cast<size_t>(i) % names_.size()], i));
    out.push_back(std::move(ids));
  }
  return out;
}

}  // namespace pagoda::bench
