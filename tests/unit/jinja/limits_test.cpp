// Hostile templates end in an error value: no crash, no hang, bounded
// memory. Also built with AddressSanitizer + UBSan (pagoda_add_sanitize_test).
#include <gtest/gtest.h>

#include <string>

#include "jinja/chat_template.h"

namespace pagoda {
namespace {

Result<std::string> run(const std::string& source) {
  Result<ChatTemplate> t = ChatTemplate::parse(source);
  if (!t.ok()) return t.error();
  return t->render_variables(nlohmann::ordered_json::object());
}

void expect_limit(const std::string& source) {
  Result<std::string> out = run(source);
  ASSERT_FALSE(out.ok()) << source.substr(0, 80);
  EXPECT_EQ(out.error().code, ErrorCode::kResourceExhausted) << out.error().message;
}

TEST(JinjaLimits, LoopSteps) {
  expect_limit("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
}

TEST(JinjaLimits, OutputSize) {
  expect_limit("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}");
}

TEST(JinjaLimits, StringAndListSize) {
  expect_limit("{{ 'x' * 100000000 }}");
  expect_limit("{{ [1] * 100000000 }}");
  expect_limit(
      "{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% "
      "endfor %}");
}

TEST(JinjaLimits, QuadraticStringBuilding) {
  expect_limit(
      "{% set ns = namespace(s='') %}{% for i in range(100000) %}"
      "{% set ns.s = ns.s ~ ('y' * 100) %}{% endfor %}{{ ns.s|length }}");
}

TEST(JinjaLimits, MacroRecursion) {
  expect_limit("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}");
}

TEST(JinjaLimits, DeepSourceNesting) {
  expect_limit("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}");
  expect_limit("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}");
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += "+1";
  expect_limit(chain + " }}");
  std::string ifs;
  for (int i = 0; i < 3000; ++i) ifs += "{% if true %}";
  expect_limit(ifs);
  expect_limit("{{ " + std::string(10000, '-') + "1 }}");
  std::string filters = "{{ x";
  for (int i = 0; i < 10000; ++i) filters += "|upper";
  expect_limit(filters + " }}");
}

TEST(JinjaLimits, DeeplyNestedValues) {
  expect_limit(
      "{% set ns = namespace(v=[]) %}{% for i in range(5000) %}{% set ns.v = [ns.v] %}"
      "{% endfor %}{{ ns.v }}");
}

TEST(JinjaLimits, SelfReferenceDoesNotLoop) {
  Result<std::string> out = run("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}");
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(*out, "<Namespace {'me': <Namespace {...}>}>");  // as Python prints it
  EXPECT_FALSE(run("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns|tojson }}").ok());
}

// Unclosed comments and raw blocks at the very end are accepted, as by jinja2.
TEST(JinjaLimits, UnclosedCommentAtEndIsText) {
  EXPECT_EQ(*run("a{#"), "a");
  EXPECT_EQ(*run("a{% raw %}"), "a");
}

// Templates are UTF-8 (jinja2 gets a decoded str); other bytes are an error.
TEST(JinjaLimits, MalformedInputsAreErrors) {
  for (const char* src : {"{% for %}", "{{ 'abc", "{% macro %}", "\xff\xfe", "{{ '\\u12' }}",
                          "{{ 99999999999999999999999 }}", "{% set x = %}", "{{ x[ }}", "{{ (1, }}",
                          "{% if %}{% endif %}", "{{ '\\ud800' }}"}) {
    Result<std::string> out = run(src);
    EXPECT_FALSE(out.ok()) << src;
  }
}

}  // namespace
}  // namespace pagoda
