#include "io/hub/hub_options.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pagoda {

namespace {

namespace fs = std::filesystem;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

// huggingface_hub's truth test for environment switches.
bool env_is_true(const char* name) {
  std::string v = env_or_empty(name);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::toupper(c); });
  return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

std::string trimmed(std::string s) {
  auto space = [](unsigned char c) { return std::isspace(c) != 0; };
  s.erase(s.begin(), std::find_if_not(s.begin(), s.end(), space));
  s.erase(std::find_if_not(s.rbegin(), s.rend(), space).base(), s.end());
  return s;
}

std::string token_from_file() {
  std::string path = env_or_empty("HF_TOKEN_PATH");
  if (path.empty()) path = (fs::path(hf_home_dir()) / "token").string();
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  return trimmed(text.str());
}

}  // namespace

std::string hf_home_dir() {
  if (std::string v = env_or_empty("HF_HOME"); !v.empty()) return v;
  if (std::string v = env_or_empty("XDG_CACHE_HOME"); !v.empty())
    return (fs::path(v) / "huggingface").string();
  return (fs::path(env_or_empty("HOME")) / ".cache" / "huggingface").string();
}

std::string hf_hub_cache_dir() {
  if (std::string v = env_or_empty("HF_HUB_CACHE"); !v.empty()) return v;
  return (fs::path(hf_home_dir()) / "hub").string();
}

HubOptions HubOptions::from_env(const std::string& revision, const std::string& download_dir) {
  HubOptions o;
  if (std::string v = env_or_empty("HF_ENDPOINT"); !v.empty()) {
    while (!v.empty() && v.back() == '/') v.pop_back();
    o.endpoint = v;
  }
  if (!revision.empty()) {
    o.revision = revision;
    o.revision_given = true;
  }
  o.token = trimmed(env_or_empty("HF_TOKEN"));
  if (o.token.empty()) o.token = trimmed(env_or_empty("HUGGING_FACE_HUB_TOKEN"));
  if (o.token.empty()) o.token = token_from_file();
  o.cache_dir = download_dir.empty() ? hf_hub_cache_dir() : download_dir;
  o.offline = env_is_true("HF_HUB_OFFLINE") || env_is_true("TRANSFORMERS_OFFLINE");
  return o;
}

}  // namespace pagoda
