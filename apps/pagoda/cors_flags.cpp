#include "pagoda/cors_flags.h"

#include <fmt/format.h>

#include <cctype>
#include <nlohmann/json.hpp>

namespace pagoda::app {

namespace {

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

// `value` as JSON: the list itself, shown in --help.
std::string as_json(const std::vector<std::string>& value) {
  return nlohmann::json(value).dump();
}

void add_list_option(CLI::App& app, const std::string& flag, std::vector<std::string>& target,
                     const std::string& help) {
  app.add_option_function<std::string>(
         flag,
         [flag, &target](const std::string& text) {
           auto list = parse_cors_list(flag, text);
           if (!list.ok()) throw CLI::ValidationError(flag, list.error().message);
           target = std::move(list).value();
         },
         help)
      ->default_str(as_json(target));
}

}  // namespace

Result<std::vector<std::string>> parse_cors_list(std::string_view flag, std::string_view text) {
  const std::string_view body = trim(text);
  std::vector<std::string> out;
  if (body.starts_with('[')) {
    const nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (!parsed.is_array()) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: '{}' is not a JSON list of strings", flag, text));
    }
    for (const nlohmann::json& item : parsed) {
      if (!item.is_string()) {
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("{}: '{}' is not a JSON list of strings", flag, text));
      }
      out.push_back(item.get<std::string>());
    }
    return out;
  }
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = trim(text.substr(0, comma));
    if (!item.empty()) out.emplace_back(item);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  return out;
}

void add_cors_flags(CLI::App& app, http::CorsOptions& cors) {
  add_list_option(app, "--allowed-origins", cors.allowed_origins,
                  "origins a browser may call the API from (CORS), as a JSON list or "
                  "comma-separated: '[\"*\"]' any, '[]' none (no CORS headers; preflights get "
                  "400), or origins like '[\"http://localhost:3000\"]'");
  add_list_option(app, "--allowed-methods", cors.allowed_methods,
                  "HTTP methods a cross-origin request may use (CORS preflight), as "
                  "--allowed-origins; '[\"*\"]': any");
  add_list_option(app, "--allowed-headers", cors.allowed_headers,
                  "request headers a cross-origin request may send (CORS preflight), as "
                  "--allowed-origins; '[\"*\"]': any; Accept, Accept-Language, Content-Language "
                  "and Content-Type are always allowed");
  app.add_flag("--allow-credentials", cors.allow_credentials,
               "let browsers send credentials (cookies, Authorization) on cross-origin requests: "
               "answers name the calling origin instead of *, with "
               "Access-Control-Allow-Credentials: true (default off)");
}

}  // namespace pagoda::app
