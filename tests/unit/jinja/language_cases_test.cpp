// Replays tests/data/jinja/language_cases.json: template snippets with the
// output jinja2 (configured as transformers configures it) produced for
// them, or the fact that jinja2 raised an error. Regenerate the file with
// tests/data/jinja/gen_language_cases.py.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "jinja/chat_template.h"

namespace pagoda {
namespace {

using nlohmann::ordered_json;

const ordered_json& cases_file() {
  static const ordered_json j = [] {
    std::ifstream f(std::string(PAGODA_SOURCE_DIR) + "/tests/data/jinja/language_cases.json");
    std::stringstream ss;
    ss << f.rdbuf();
    return ordered_json::parse(ss.str());
  }();
  return j;
}

std::vector<size_t> case_indices() {
  std::vector<size_t> out(cases_file()["cases"].size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = i;
  return out;
}

class LanguageCase : public ::testing::TestWithParam<size_t> {};

TEST_P(LanguageCase, MatchesJinja2) {
  const ordered_json& c = cases_file()["cases"][GetParam()];
  const std::string source = c["template"].get<std::string>();
  SCOPED_TRACE(source);
  Result<std::string> out = std::string();
  Result<ChatTemplate> tmpl = ChatTemplate::parse(source);
  if (tmpl.ok()) {
    out = tmpl->render_variables(cases_file()["variables"]);
  } else {
    out = tmpl.error();
  }
  if (c.contains("output")) {
    ASSERT_TRUE(out.ok()) << out.error().message;
    EXPECT_EQ(*out, c["output"].get<std::string>());
  } else {
    EXPECT_FALSE(out.ok()) << "jinja2 raised " << c["error"].get<std::string>() << " but got "
                           << *out;
  }
}

std::string case_name(const ::testing::TestParamInfo<size_t>& info) {
  std::string name = cases_file()["cases"][info.param]["name"].get<std::string>();
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Jinja2, LanguageCase, ::testing::ValuesIn(case_indices()), case_name);

TEST(LanguageCases, FileIsPresent) {
  EXPECT_GT(cases_file()["cases"].size(), 300u);
}

}  // namespace
}  // namespace pagoda
