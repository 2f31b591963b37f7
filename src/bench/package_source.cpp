#include "bench/package_source.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pagoda::bench {

namespace {

namespace fs = std::filesystem;

// PEP 503 normalisation, enough to compare a dist-info folder with a name:
// lower case, and '-', '_' and '.' all the same.
std::string normalize(std::string_view name) {
  std::string out;
  for (char c : name) {
    out += (c == '-' || c == '.') ? '_'
                                  : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

// The "Version:" header of a METADATA file ("" when absent).
std::string metadata_version(const fs::path& metadata) {
  std::ifstream in(metadata);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line == "\r") break;  // the headers end at the first blank line
    if (line.rfind("Version:", 0) == 0) {
      std::string v = line.substr(8);
      const auto b = v.find_first_not_of(" \t");
      const auto e = v.find_last_not_of(" \t\r");
      return b == std::string::npos ? "" : v.substr(b, e - b + 1);
    }
  }
  return "";
}

// The installed version of `package` in `dir` ("" when it has no dist-info).
std::string installed_version(const fs::path& dir, const std::string& package) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string suffix = ".dist-info";
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const auto dash = name.find('-');
    if (dash == std::string::npos || normalize(name.substr(0, dash)) != normalize(package))
      continue;
    std::string v = metadata_version(it->path() / "METADATA");
    if (!v.empty()) return v;
  }
  return "";
}

std::string how_to_get(const PackageFile& f) {
  return "pip install " + f.package + "==" + f.version + ", or name a folder that holds it";
}

}  // namespace

Result<std::vector<std::string>> python_path_dirs(const std::string& python) {
  const std::string cmd =
      python + " -c 'import sys; print(\"\\n\".join(p for p in sys.path if p))' 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr)
    return make_error(ErrorCode::kNotFound,
                      "cannot run '" + python + "' to find its site-packages");
  std::string text;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) text.append(buf, n);
  const int rc = pclose(pipe);
  std::vector<std::string> dirs;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) dirs.push_back(line);
  if (rc != 0 || dirs.empty())
    return make_error(ErrorCode::kNotFound,
                      "'" + python + "' did not list its sys.path (is it installed?)");
  return dirs;
}

Result<std::string> read_package_file(const PackageFile& f, const std::vector<std::string>& dirs) {
  const std::string what = f.package + " " + f.version + "'s " + f.path;
  std::string found;  // "VERSION in DIR" of the other versions seen
  for (const std::string& dir : dirs) {
    const std::string v = installed_version(dir, f.package);
    if (v.empty()) continue;
    if (v != f.version) {
      found += (found.empty() ? "" : ", ") + v + " in " + dir;
      continue;
    }
    const fs::path file = fs::path(dir) / f.path;
    std::ifstream in(file, std::ios::binary);
    if (!in)
      return make_error(ErrorCode::kNotFound, what + ": " + f.package + " " + f.version +
                                                  " is installed in " + dir + " but " +
                                                  file.string() + " cannot be read");
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  std::string where;
  for (const std::string& dir : dirs) where += (where.empty() ? "" : ", ") + dir;
  if (!found.empty())
    return make_error(ErrorCode::kNotFound, what + " is needed, but the installed " + f.package +
                                                " has another version (" + found +
                                                "), whose text differs: " + how_to_get(f));
  return make_error(ErrorCode::kNotFound, what + " is needed, but no folder holds " + f.package +
                                              " (searched: " + (where.empty() ? "none" : where) +
                                              "): " + how_to_get(f));
}

}  // namespace pagoda::bench
