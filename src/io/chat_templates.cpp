#include "io/chat_templates.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "io/gguf.h"

namespace pagoda {

namespace fs = std::filesystem;

namespace {

Result<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kIo, fmt::format("cannot read '{}'", path.string()));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void add(NamedChatTemplates& out, std::string name, std::string source) {
  auto same = [&](const auto& entry) { return entry.first == name; };
  auto it = std::find_if(out.begin(), out.end(), same);
  if (it != out.end()) {
    it->second = std::move(source);
  } else {
    out.emplace_back(std::move(name), std::move(source));
  }
}

const std::string* find(const NamedChatTemplates& templates, std::string_view name) {
  for (const auto& [n, source] : templates) {
    if (n == name) return &source;
  }
  return nullptr;
}

}  // namespace

Result<NamedChatTemplates> read_chat_templates(const fs::path& dir,
                                               const nlohmann::json& tokenizer_config) {
  NamedChatTemplates out;
  std::error_code ec;
  if (fs::is_regular_file(dir / "chat_template.jinja", ec)) {
    PAGODA_ASSIGN_OR_RETURN(std::string source, read_text(dir / "chat_template.jinja"));
    add(out, "default", std::move(source));
  }
  const fs::path extra = dir / "additional_chat_templates";
  if (fs::is_directory(extra, ec)) {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(extra, ec)) {
      if (entry.path().extension() == ".jinja") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    for (const fs::path& file : files) {
      PAGODA_ASSIGN_OR_RETURN(std::string source, read_text(file));
      add(out, file.stem().string(), std::move(source));
    }
  }
  if (!out.empty() || !tokenizer_config.is_object()) return out;
  auto it = tokenizer_config.find("chat_template");
  if (it == tokenizer_config.end()) return out;
  if (it->is_string()) {
    add(out, "default", it->get<std::string>());
  } else if (it->is_array()) {
    for (const auto& entry : *it) {
      if (!entry.is_object()) continue;
      auto name = entry.find("name"), source = entry.find("template");
      if (name != entry.end() && name->is_string() && source != entry.end() &&
          source->is_string()) {
        add(out, name->get<std::string>(), source->get<std::string>());
      }
    }
  }
  return out;
}

NamedChatTemplates gguf_chat_templates(const GgufFile& file) {
  NamedChatTemplates out;
  if (auto source = file.get_string("tokenizer.chat_template")) out.emplace_back("default", *source);
  constexpr std::string_view kPrefix = "tokenizer.chat_template.";
  for (const std::string& key : file.keys()) {
    if (key.size() <= kPrefix.size() || key.compare(0, kPrefix.size(), kPrefix) != 0) continue;
    if (auto source = file.get_string(key)) out.emplace_back(key.substr(kPrefix.size()), *source);
  }
  return out;
}

Result<std::string> pick_chat_template(const NamedChatTemplates& templates, std::string_view name,
                                       bool has_tools, std::string_view where) {
  if (!name.empty()) {
    if (const std::string* source = find(templates, name)) return *source;
    return make_error(ErrorCode::kNotFound,
                      fmt::format("{} has no chat template '{}'", where, name));
  }
  if (has_tools) {
    if (const std::string* source = find(templates, "tool_use")) return *source;
  }
  if (const std::string* source = find(templates, "default")) return *source;
  if (templates.empty()) {
    return make_error(ErrorCode::kNotFound,
                      fmt::format("{} has no chat template (chat_template.jinja or "
                                  "tokenizer_config.json chat_template)",
                                  where));
  }
  std::string names;
  for (const auto& [n, source] : templates) names += (names.empty() ? "" : ", ") + n;
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("{} has several chat templates and no 'default' ({}); choose one "
                                "with --template-name",
                                where, names));
}

}  // namespace pagoda
