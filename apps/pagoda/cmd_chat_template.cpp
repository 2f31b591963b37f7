// pagoda chat-template: renders a model's chat template for a conversation
// exactly as transformers' apply_chat_template(..., tokenize=False) does.
// `--batch` renders many cases in one process (the differential tests).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "core/result.h"
#include "io/chat_templates.h"
#include "io/hf_tokenizer_config.h"
#include "io/model_location.h"
#include "io/gguf.h"
#include "jinja/chat_template.h"
#include "pagoda/command.h"
#include "pagoda/model_flags.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using pagoda::ErrorCode;
using pagoda::make_error;
using pagoda::Result;

// The template of a model and the special-token texts it renders with.
struct ModelTemplate {
  std::string source;
  std::string bos_token, eos_token;
  // The other named special tokens transformers passes (unk_token, pad_token, ...).
  ordered_json other_tokens = ordered_json::object();
};

constexpr const char* kOtherTokens[] = {"unk_token", "sep_token", "pad_token", "cls_token",
                                        "mask_token"};

Result<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error(ErrorCode::kNotFound, "cannot open '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Result<ordered_json> read_json(const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(std::string text, read_file(path));
  try {
    return ordered_json::parse(text);
  } catch (const ordered_json::exception& e) {
    return make_error(ErrorCode::kInvalidArgument, "'" + path + "' is not valid JSON: " + e.what());
  }
}

// tokenizer_config.json's text of the special token `key`; "" when none.
std::string token_text(const nlohmann::json& config, const char* key) {
  auto it = config.find(key);
  return it == config.end() ? "" : pagoda::special_token_text(*it).value_or("");
}

// The special tokens of a model folder (tokenizer_config.json) and, unless
// `with_template` is false, its chat template by io/chat_templates.h's rule.
Result<ModelTemplate> load_from_folder(const fs::path& dir, const std::string& name,
                                       bool has_tools, bool with_template) {
  PAGODA_ASSIGN_OR_RETURN(pagoda::HfTokenizerConfig files, pagoda::read_hf_tokenizer_config(dir));
  ModelTemplate out;
  out.bos_token = token_text(files.tokenizer_config, "bos_token");
  out.eos_token = token_text(files.tokenizer_config, "eos_token");
  for (const char* key : kOtherTokens) {
    std::string text = token_text(files.tokenizer_config, key);
    if (!text.empty()) out.other_tokens[key] = text;
  }
  if (!with_template) return out;
  PAGODA_ASSIGN_OR_RETURN(out.source, pagoda::pick_chat_template(files.chat_templates, name,
                                                                 has_tools, "'" + dir.string() + "'"));
  return out;
}

// The same from a .gguf file: tokenizer.chat_template(.NAME) and the tokens
// of the vocabulary.
Result<ModelTemplate> load_from_gguf(const std::string& path, const std::string& name,
                                     bool has_tools, bool with_template) {
  PAGODA_ASSIGN_OR_RETURN(auto gguf, pagoda::GgufFile::open(path));
  ModelTemplate out;
  if (with_template) {
    const pagoda::NamedChatTemplates named = pagoda::gguf_chat_templates(*gguf);
    if (named.empty())
      return make_error(ErrorCode::kNotFound, "'" + path + "' has no tokenizer.chat_template");
    PAGODA_ASSIGN_OR_RETURN(out.source,
                            pagoda::pick_chat_template(named, name, has_tools, "'" + path + "'"));
  }
  const std::vector<std::string>* tokens = gguf->get_string_array("tokenizer.ggml.tokens");
  auto token = [&](const char* key) -> std::string {
    std::optional<int64_t> id = gguf->get_int(key);
    if (!tokens || !id || *id < 0 || static_cast<size_t>(*id) >= tokens->size()) return "";
    return (*tokens)[static_cast<size_t>(*id)];
  };
  out.bos_token = token("tokenizer.ggml.bos_token_id");
  out.eos_token = token("tokenizer.ggml.eos_token_id");
  const std::pair<const char*, const char*> others[] = {
      {"unk_token", "tokenizer.ggml.unknown_token_id"},
      {"sep_token", "tokenizer.ggml.seperator_token_id"},
      {"pad_token", "tokenizer.ggml.padding_token_id"}};
  for (const auto& [name, key] : others) {
    std::string text = token(key);
    if (!text.empty()) out.other_tokens[name] = text;
  }
  return out;
}

// MODEL's template and special tokens; with --template FILE, FILE's source
// and MODEL's tokens (none without MODEL), as transformers and `serve
// --chat-template` render it.
// A repo-id MODEL is resolved (and downloaded) with `hub`.
Result<ModelTemplate> load_template(const std::string& model, const std::string& template_file,
                                    const std::string& name, bool has_tools,
                                    const pagoda::HubOptions& hub) {
  const bool with_template = template_file.empty();
  ModelTemplate out;
  std::string path = model;
  if (!model.empty() && !fs::exists(model)) {
    PAGODA_ASSIGN_OR_RETURN(pagoda::ModelLocation location, pagoda::resolve_model(model, hub));
    path = location.path;
  }
  if (fs::is_directory(path)) {
    PAGODA_ASSIGN_OR_RETURN(out, load_from_folder(path, name, has_tools, with_template));
  } else if (fs::is_regular_file(path)) {
    PAGODA_ASSIGN_OR_RETURN(out, load_from_gguf(path, name, has_tools, with_template));
  } else if (!model.empty() || with_template) {
    return make_error(ErrorCode::kNotFound,
                      "MODEL '" + model + "' is neither a folder nor a .gguf file");
  }
  if (!with_template) {
    PAGODA_ASSIGN_OR_RETURN(out.source, read_file(template_file));
  }
  return out;
}

// --messages accepts an array of messages or an object with a "messages" key.
Result<ordered_json> load_messages(const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(ordered_json j, read_json(path));
  if (j.is_object() && j.contains("messages")) return j["messages"];
  if (!j.is_array())
    return make_error(ErrorCode::kInvalidArgument, "'" + path + "' must hold an array of messages");
  return j;
}

// One --batch case: {"template": S} and either {"variables": {...}} or the
// chat inputs {"messages", "tools", "documents", "add_generation_prompt",
// "continue_final_message", "bos_token", "eos_token", "kwargs"}.
ordered_json render_case(const ordered_json& c,
                         std::map<std::string, Result<pagoda::ChatTemplate>>& cache) {
  if (!c.is_object() || !c.contains("template") || !c["template"].is_string()) {
    return {{"error", "a batch case needs a \"template\" string"}};
  }
  const std::string source = c["template"].get<std::string>();
  auto it = cache.find(source);
  if (it == cache.end()) it = cache.emplace(source, pagoda::ChatTemplate::parse(source)).first;
  if (!it->second.ok()) return {{"error", it->second.error().message}};
  const pagoda::ChatTemplate& tmpl = it->second.value();
  Result<std::string> out = std::string();
  if (c.contains("variables")) {
    out = tmpl.render_variables(c["variables"]);
  } else {
    pagoda::ChatTemplateInputs in;
    in.messages = c.value("messages", ordered_json::array());
    in.tools = c.value("tools", ordered_json());
    in.documents = c.value("documents", ordered_json());
    in.add_generation_prompt = c.value("add_generation_prompt", false);
    in.continue_final_message = c.value("continue_final_message", false);
    in.bos_token = c.value("bos_token", "");
    in.eos_token = c.value("eos_token", "");
    in.extra = c.value("kwargs", ordered_json::object());
    out = tmpl.render(in);
  }
  if (!out.ok()) return {{"error", out.error().message}};
  return {{"output", out.value()}};
}

int run_batch(const std::string& path) {
  Result<ordered_json> cases = read_json(path);
  if (!cases.ok() || !cases->is_array()) {
    std::fprintf(
        stderr, "pagoda chat-template: %s\n",
        cases.ok() ? "--batch file must hold a JSON array" : cases.error().message.c_str());
    return 1;
  }
  std::map<std::string, Result<pagoda::ChatTemplate>> cache;
  ordered_json results = ordered_json::array();
  for (const ordered_json& c : *cases) results.push_back(render_case(c, cache));
  std::cout << results.dump(-1, ' ', false, ordered_json::error_handler_t::strict) << '\n';
  return 0;
}

struct Options {
  std::string model, template_file, template_name, messages, tools, documents, kwargs;
  std::string revision, download_dir;  // of a repo-id MODEL
  std::optional<std::string> bos_token, eos_token;
  bool add_generation_prompt = false;
  bool continue_final_message = false;
};

int render_one(const Options& opt) {
  auto report = [](const pagoda::Error& e) {
    std::fprintf(stderr, "pagoda chat-template: %s\n", e.message.c_str());
    return 1;
  };
  pagoda::ChatTemplateInputs in;
  Result<ordered_json> messages = load_messages(opt.messages);
  if (!messages.ok()) return report(messages.error());
  in.messages = *messages;
  for (auto [path, slot] :
       {std::pair{&opt.tools, &in.tools}, std::pair{&opt.documents, &in.documents}}) {
    if (path->empty()) continue;
    Result<ordered_json> j = read_json(*path);
    if (!j.ok()) return report(j.error());
    *slot = *j;
  }
  if (!opt.kwargs.empty()) {
    try {
      in.extra = ordered_json::parse(opt.kwargs);
    } catch (const ordered_json::exception& e) {
      return report(make_error(ErrorCode::kInvalidArgument,
                               std::string("--kwargs is not valid JSON: ") + e.what()));
    }
    if (!in.extra.is_object()) {
      return report(make_error(ErrorCode::kInvalidArgument, "--kwargs must be a JSON object"));
    }
  }
  Result<ModelTemplate> model =
      load_template(opt.model, opt.template_file, opt.template_name, !in.tools.is_null(),
                    pagoda::app::hub_options(opt.revision, opt.download_dir));
  if (!model.ok()) return report(model.error());
  in.bos_token = opt.bos_token.value_or(model->bos_token);
  in.eos_token = opt.eos_token.value_or(model->eos_token);
  for (const auto& [key, text] : model->other_tokens.items()) {
    if (!in.extra.contains(key))
      in.extra[key] = text;  // --kwargs wins, as kwargs do in transformers
  }
  in.add_generation_prompt = opt.add_generation_prompt;
  in.continue_final_message = opt.continue_final_message;
  Result<pagoda::ChatTemplate> tmpl = pagoda::ChatTemplate::parse(model->source);
  if (!tmpl.ok()) return report(tmpl.error());
  Result<std::string> out = tmpl->render(in);
  if (!out.ok()) return report(out.error());
  std::fwrite(out->data(), 1, out->size(), stdout);
  return 0;
}

int run_chat_template(int argc, char** argv) {
  CLI::App app{
      "Render a chat template for a conversation, exactly as Hugging Face transformers' "
      "apply_chat_template(..., tokenize=False) does. Prints the prompt with no added newline; "
      "on a template error prints it to stderr and exits 1."};
  app.name("pagoda chat-template");
  Options opt;
  std::string batch;
  app.add_option(
      "MODEL", opt.model,
      "model folder (chat_template.jinja and additional_chat_templates/*.jinja when present, "
      "else tokenizer_config.json chat_template, as transformers; special tokens from "
      "tokenizer_config.json) or .gguf file (tokenizer.chat_template, tokens from the "
      "vocabulary), or a Hugging Face repo id (Org/Name[:QUANT], from the hub cache or downloaded "
      "into it on first use)");
  pagoda::app::add_model_source_flags(app, opt.revision, opt.download_dir);
  app.add_option("--template", opt.template_file,
                 "render this Jinja file instead of MODEL's template (special tokens still come "
                 "from MODEL when it is given)");
  app.add_option("--template-name", opt.template_name,
                 "which of several named templates to use (default: 'tool_use' when --tools is "
                 "given and it exists, else 'default')");
  app.add_option(
      "--messages", opt.messages,
      "JSON file: the conversation, an array of messages (or an object with a \"messages\" key)");
  app.add_option("--tools", opt.tools,
                 "JSON file: an array of tool definitions (passed as `tools`)");
  app.add_option("--documents", opt.documents,
                 "JSON file: an array of documents (passed as `documents`)");
  app.add_flag("--add-generation-prompt", opt.add_generation_prompt,
               "end with the header of an assistant turn (add_generation_prompt=True)");
  app.add_flag("--continue-final-message", opt.continue_final_message,
               "leave the final message open for the model to continue: cut the prompt right "
               "after its text, dropping the end-of-turn the template adds "
               "(continue_final_message=True; not with --add-generation-prompt)");
  app.add_option("--bos-token", opt.bos_token, "bos_token text (default: MODEL's)");
  app.add_option("--eos-token", opt.eos_token, "eos_token text (default: MODEL's)");
  app.add_option("--kwargs", opt.kwargs,
                 "JSON object of extra template variables, e.g. '{\"enable_thinking\": false}'");
  app.add_option(
      "--batch", batch,
      "test mode: JSON file with an array of cases {\"template\": S, \"variables\": {...}} or "
      "{\"template\": S, \"messages\": [...], \"tools\", \"documents\", \"add_generation_prompt\", "
      "\"continue_final_message\", \"bos_token\", \"eos_token\", \"kwargs\"}; prints a JSON array "
      "of {\"output\"} / {\"error\"}");
  CLI11_PARSE(app, argc, argv);
  if (!batch.empty()) return run_batch(batch);
  if (opt.messages.empty() || (opt.model.empty() && opt.template_file.empty())) {
    std::fprintf(stderr,
                 "pagoda chat-template: need MODEL or --template, and --messages (see --help)\n");
    return 2;
  }
  return render_one(opt);
}

}  // namespace

// Registered by hand: PAGODA_COMMAND cannot spell a name with a dash.
static ::pagoda::app::CommandRegistrar pagoda_command_chat_template(
    "chat-template", "render a chat template for a conversation (like transformers)",
    run_chat_template);
