// pagoda tokenize / pagoda detokenize: text <-> token ids with the tokenizer of
// a model folder, a tokenizer-only folder, a .gguf file or a repo id (from the
// Hugging Face cache, downloaded on first use). `tokenize --jsonl`
// is a batch protocol for tests and benchmarks (one JSON request per stdin
// line, one JSON reply per stdout line).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/model_location.h"
#include "pagoda/command.h"
#include "pagoda/model_flags.h"
#include "tokenizer/tokenizer.h"

namespace {

using nlohmann::json;
using pagoda::Tokenizer;

// `model`: a tokenizer folder or file, a model folder or .gguf file, or a repo
// id (resolved and downloaded as serve and generate do, with `hub`).
std::unique_ptr<Tokenizer> load_or_report(const std::string& model, const pagoda::HubOptions& hub) {
  std::string path = model;
  if (!std::filesystem::exists(model)) {
    auto location = pagoda::resolve_model(model, hub);
    if (!location.ok()) {
      std::fprintf(stderr, "pagoda: %s\n", location.error().message.c_str());
      return nullptr;
    }
    path = location->path;
  }
  auto tok = Tokenizer::load(path);
  if (!tok.ok()) {
    std::fprintf(stderr, "pagoda: %s\n", tok.error().message.c_str());
    return nullptr;
  }
  return std::move(tok).value();
}

std::string to_hex(std::string_view bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    out += kHex[static_cast<unsigned char>(c) >> 4];
    out += kHex[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

json info(const Tokenizer& tok) {
  json j;
  j["description"] = tok.description();
  j["vocab_size"] = tok.vocab_size();
  j["bos_id"] = tok.bos_id() ? json(*tok.bos_id()) : json();
  j["eos_id"] = tok.eos_id() ? json(*tok.eos_id()) : json();
  j["bos_token"] = tok.bos_token();
  j["eos_token"] = tok.eos_token();
  j["eos_ids"] = tok.eos_ids();
  j["add_bos"] = tok.add_bos();
  j["add_eos"] = tok.add_eos();
  j["chat_templates"] = tok.chat_template_names();
  return j;
}

// One request of the --jsonl protocol:
//   {"op":"encode","text":S | "text_hex":H,"add_special":B,"parse_special":B} -> {"ids":[...]}
//   {"op":"encode_prompt","text":S} -> {"ids":[...]}
//   {"op":"decode","ids":[...],"skip_special":B} -> {"text_hex":H}
//   {"op":"stream","ids":[...],"skip_special":B,"prompt":[...]} ->
//   {"deltas_hex":[H...],"flush_hex":H}
//   {"op":"pieces","ids":[...]} -> {"pieces_hex":[H...]}
//   {"op":"bench","texts":[S...],"rounds":N} -> {"seconds":best round,"num_tokens":T}
//     (encode() of every text on this thread, timed in-process)
//   {"op":"info"} -> vocabulary facts
json bench(const Tokenizer& tok, const json& req) {
  std::vector<std::string> texts = req.value("texts", std::vector<std::string>{});
  int rounds = std::max(1, req.value("rounds", 3));
  double best = 1e300;
  size_t num_tokens = 0;
  for (int r = 0; r < rounds; ++r) {
    auto start = std::chrono::steady_clock::now();
    size_t n = 0;
    for (const std::string& t : texts) n += tok.encode(t).size();
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count());
    num_tokens = n;
  }
  return json{{"seconds", best}, {"num_tokens", num_tokens}};
}

json handle(const Tokenizer& tok, const json& req) {
  std::string op = req.value("op", "encode");
  if (op == "encode" || op == "encode_prompt") {
    std::string text = req.contains("text_hex") ? from_hex(req["text_hex"].get<std::string>())
                                                : req.value("text", "");
    std::vector<int32_t> ids =
        op == "encode_prompt"
            ? tok.encode_prompt(text)
            : tok.encode(text, req.value("add_special", true), req.value("parse_special", true));
    return json{{"ids", ids}};
  }
  std::vector<int32_t> ids = req.value("ids", std::vector<int32_t>{});
  bool skip = req.value("skip_special", false);
  if (op == "decode") return json{{"text_hex", to_hex(tok.decode(ids, skip))}};
  if (op == "stream") {
    std::vector<int32_t> prompt = req.value("prompt", std::vector<int32_t>{});
    pagoda::IncrementalDetokenizer detok(tok, skip, prompt);
    json deltas = json::array();
    for (int32_t id : ids) deltas.push_back(to_hex(detok.feed(id)));
    return json{{"deltas_hex", deltas}, {"flush_hex", to_hex(detok.flush())}};
  }
  if (op == "pieces") {
    json pieces = json::array();
    for (int32_t id : ids) pieces.push_back(to_hex(tok.id_to_token(id)));
    return json{{"pieces_hex", pieces}};
  }
  if (op == "info") return info(tok);
  if (op == "bench") return bench(tok, req);
  return json{{"error", "unknown op '" + op + "'"}};
}

int run_jsonl(const Tokenizer& tok) {
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    json reply;
    try {
      reply = handle(tok, json::parse(line));
    } catch (const json::exception& e) {
      reply = json{{"error", std::string("bad request: ") + e.what()}};
    }
    std::cout << reply.dump(-1, ' ', true, json::error_handler_t::replace) << '\n';
  }
  std::cout.flush();
  return 0;
}

int run_tokenize(int argc, char** argv) {
  CLI::App app{"Print the token ids of TEXT as one JSON array on one line."};
  app.name("pagoda tokenize");
  std::string model, text, revision, download_dir;
  bool no_special = false, no_parse_special = false, pieces = false, jsonl = false;
  app.add_option("MODEL", model,
                 std::string("a tokenizer folder (tokenizer.json / tokenizer.model) or ") +
                     pagoda::app::kModelHelp)
      ->required();
  pagoda::app::add_model_source_flags(app, revision, download_dir);
  app.add_option("TEXT", text, "the text to tokenize (not needed with --jsonl)");
  app.add_flag("--no-special-tokens", no_special,
               "do not add BOS/EOS or other post-processor tokens");
  app.add_flag("--no-parse-special", no_parse_special,
               "tokenize special-token text such as <|im_start|> as plain text");
  app.add_flag("--pieces", pieces,
               "also print the vocabulary pieces of the ids as a JSON array on a second line");
  app.add_flag("--jsonl", jsonl,
               "batch mode for tests: read one JSON request per stdin line "
               "({\"op\": encode|encode_prompt|decode|stream|pieces|bench|info, ...}), "
               "write one JSON reply per line");
  CLI11_PARSE(app, argc, argv);
  auto tok = load_or_report(model, pagoda::app::hub_options(revision, download_dir));
  if (!tok) return 1;
  if (jsonl) return run_jsonl(*tok);
  std::vector<int32_t> ids = tok->encode(text, !no_special, !no_parse_special);
  std::cout << json(ids).dump() << '\n';
  if (pieces) {
    json p = json::array();
    for (int32_t id : ids) p.push_back(tok->id_to_token(id));
    std::cout << p.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
  }
  return 0;
}

int run_detokenize(int argc, char** argv) {
  CLI::App app{"Print the text of a JSON array of token ids."};
  app.name("pagoda detokenize");
  std::string model, ids_json, revision, download_dir;
  bool skip_special = false;
  app.add_option("MODEL", model,
                 std::string("a tokenizer folder (tokenizer.json / tokenizer.model) or ") +
                     pagoda::app::kModelHelp)
      ->required();
  pagoda::app::add_model_source_flags(app, revision, download_dir);
  app.add_option("IDS_JSON", ids_json, "token ids as a JSON array, e.g. [1, 15043, 3186]")
      ->required();
  app.add_flag("--skip-special-tokens", skip_special, "leave special tokens out of the text");
  CLI11_PARSE(app, argc, argv);
  std::vector<int32_t> ids;
  try {
    ids = json::parse(ids_json).get<std::vector<int32_t>>();
  } catch (const json::exception& e) {
    std::fprintf(stderr, "pagoda: IDS_JSON '%s' is not a JSON array of integers\n",
                 ids_json.c_str());
    return 2;
  }
  auto tok = load_or_report(model, pagoda::app::hub_options(revision, download_dir));
  if (!tok) return 1;
  std::cout << tok->decode(ids, skip_special) << '\n';
  return 0;
}

}  // namespace

PAGODA_COMMAND(tokenize, "print the token ids of a text (tokenizer.json, tokenizer.model or GGUF)",
               run_tokenize);
PAGODA_COMMAND(detokenize, "print the text of token ids", run_detokenize);
