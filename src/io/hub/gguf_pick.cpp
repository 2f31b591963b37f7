#include "io/hub/gguf_pick.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <regex>

namespace pagoda {

namespace {

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_gguf(const std::string& f) {
  return f.size() > 5 && upper(f.substr(f.size() - 5)) == ".GGUF";
}

bool is_split_part(const std::string& f) {
  static const std::regex kSplit(R"(-\d{5}-of-\d{5}\.gguf$)", std::regex::icase);
  return std::regex_search(f, kSplit);
}

bool is_tag_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Where the tag ends in `name` (upper case), or npos when it is absent;
// `exact` when no tag character follows.
size_t find_tag(const std::string& name, const std::string& tag, bool* exact) {
  size_t best = std::string::npos;
  *exact = false;
  for (size_t at = name.find(tag); at != std::string::npos; at = name.find(tag, at + 1)) {
    const size_t end = at + tag.size();
    const bool ends = end == name.size() || !is_tag_char(name[end]);
    if (best == std::string::npos || (ends && !*exact)) {
      best = at;
      *exact = ends;
    }
  }
  return best;
}

std::string quant_list(const std::vector<std::string>& ggufs) {
  std::vector<std::string> quants;
  for (const std::string& f : ggufs) quants.push_back(gguf_quant_of(f));
  std::sort(quants.begin(), quants.end());
  quants.erase(std::unique(quants.begin(), quants.end()), quants.end());
  std::string out;
  for (const std::string& q : quants) out += (out.empty() ? "" : ", ") + q;
  return out;
}

}  // namespace

std::optional<RepoModelSpec> parse_repo_model_spec(std::string_view spec) {
  RepoModelSpec out;
  const size_t colon = spec.rfind(':');
  const size_t last_slash = spec.rfind('/');
  if (colon != std::string_view::npos &&
      (last_slash == std::string_view::npos || colon > last_slash)) {
    if (colon + 1 == spec.size()) return std::nullopt;
    out.quant = std::string(spec.substr(colon + 1));
    spec = spec.substr(0, colon);
  }
  if (spec.empty() || spec.front() == '/' || spec.back() == '/') return std::nullopt;
  const size_t slash = spec.find('/');
  if (slash != std::string_view::npos && spec.find('/', slash + 1) != std::string_view::npos)
    return std::nullopt;
  for (std::string_view part :
       {spec.substr(0, slash), slash == std::string_view::npos ? "x" : spec.substr(slash + 1)}) {
    if (part.empty() || part == "." || part == "..") return std::nullopt;
    for (char c : part) {  // the hub's repo-id alphabet
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
        return std::nullopt;
    }
  }
  out.repo_id = std::string(spec);
  return out;
}

std::string gguf_quant_of(const std::string& file) {
  static const std::regex kQuant(
      R"((^|[^A-Za-z0-9])((I?Q[0-9]+(_[A-Za-z0-9]+)*)|BF16|F16|F32)(?=[^A-Za-z0-9_]|$))",
      std::regex::icase);
  std::string name = base_name(file);
  if (is_gguf(name)) name.resize(name.size() - 5);
  std::smatch m;
  std::string found;
  for (auto it = name.cbegin(); std::regex_search(it, name.cend(), m, kQuant); it = m[0].second) {
    found = m[2].str();  // the last tag in the name
  }
  return found.empty() ? name : upper(found);
}

Result<std::string> pick_gguf_file(const std::vector<std::string>& files,
                                   const std::string& quant) {
  std::vector<std::string> ggufs;
  for (const std::string& f : files) {
    if (is_gguf(f) && upper(base_name(f)).find("MMPROJ") == std::string::npos) ggufs.push_back(f);
  }
  if (ggufs.empty()) return make_error(ErrorCode::kNotFound, "the repo has no .gguf file");
  const std::string tag = upper(quant);
  std::vector<std::string> exact, loose;
  for (const std::string& f : ggufs) {
    bool is_exact = false;
    if (find_tag(upper(base_name(f)), tag, &is_exact) == std::string::npos) continue;
    (is_exact ? exact : loose).push_back(f);
  }
  const std::vector<std::string>& matches = exact.empty() ? loose : exact;
  if (matches.empty()) {
    return make_error(ErrorCode::kNotFound,
                      fmt::format("no .gguf file for quantization '{}'; available: {}", quant,
                                  quant_list(ggufs)));
  }
  std::vector<std::string> whole;
  for (const std::string& f : matches) {
    if (!is_split_part(f)) whole.push_back(f);
  }
  if (whole.empty()) {
    return make_error(
        ErrorCode::kUnsupported,
        fmt::format("'{}' is a split GGUF ({} parts); pagoda reads single-file GGUFs: "
                    "merge the parts with `llama-gguf-split --merge` and pass the file, "
                    "or pick another quantization (available: {})",
                    matches.front(), matches.size(), quant_list(ggufs)));
  }
  if (whole.size() > 1) {
    std::string names;
    for (const std::string& f : whole) names += (names.empty() ? "" : ", ") + f;
    return make_error(
        ErrorCode::kInvalidArgument,
        fmt::format("quantization '{}' matches several files ({}); name one more exactly", quant,
                    names));
  }
  return whole.front();
}

}  // namespace pagoda
