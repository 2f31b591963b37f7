// ChatTemplate's contract: the variables transformers passes, error values,
// and concurrent rendering. Expected strings were printed by jinja2 with
// tests/python/jinja/hf_jinja.py for the same inputs.
#include "jinja/chat_template.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace pagoda {
namespace {

using nlohmann::ordered_json;

std::string render(const std::string& source, const ChatTemplateInputs& in) {
  Result<ChatTemplate> t = ChatTemplate::parse(source);
  EXPECT_TRUE(t.ok()) << t.error().message;
  Result<std::string> out = t->render(in);
  EXPECT_TRUE(out.ok()) << out.error().message;
  return out.ok() ? *out : "";
}

ChatTemplateInputs user_says(const std::string& text) {
  ChatTemplateInputs in;
  in.messages = ordered_json::array({{{"role", "user"}, {"content", text}}});
  return in;
}

TEST(ChatTemplate, DropsNullKeysOfMessages) {
  ChatTemplateInputs in;
  in.messages = ordered_json::parse(R"([{"role": "user", "content": "hi", "name": null}])");
  EXPECT_EQ(render("{{ messages }}", in), "[{'role': 'user', 'content': 'hi'}]");
}

TEST(ChatTemplate, MirrorsReasoningLikeTransformers) {
  ChatTemplateInputs in;
  in.messages = ordered_json::parse(
      R"([{"role": "assistant", "content": "x", "reasoning": "r"},
          {"role": "assistant", "thinking": "t", "content": "y"}])");
  EXPECT_EQ(render("{{ messages }}", in),
            "[{'thinking': 'r', 'role': 'assistant', 'content': 'x', 'reasoning': 'r', "
            "'reasoning_content': 'r'}, {'thinking': 't', 'role': 'assistant', 'content': 'y', "
            "'reasoning_content': 't'}]");
}

TEST(ChatTemplate, PassesNoneForMissingToolsAndOmitsEmptyTokens) {
  ChatTemplateInputs in = user_says("a");
  in.eos_token = "</s>";
  EXPECT_EQ(render("{{ tools }}|{{ documents }}|{{ add_generation_prompt }}|"
                   "{{ bos_token is defined }}|{{ eos_token }}",
                   in),
            "None|None|False|False|</s>");
}

TEST(ChatTemplate, ExtraKwargsOverrideSpecialTokens) {
  ChatTemplateInputs in = user_says("a");
  in.tools =
      ordered_json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {}}}])");
  in.add_generation_prompt = true;
  in.bos_token = "<s>";
  in.extra = {{"enable_thinking", false}, {"bos_token", "X"}};
  EXPECT_EQ(
      render("{{ tools|tojson }}|{{ bos_token }}|{{ enable_thinking }}|{{ add_generation_prompt }}",
             in),
      "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
      "{}}}]|X|False|True");
}

TEST(ChatTemplate, RejectsBadInputs) {
  Result<ChatTemplate> t = ChatTemplate::parse("{{ messages|length }}");
  ASSERT_TRUE(t.ok());
  ChatTemplateInputs empty;
  EXPECT_EQ(t->render(empty).error().code, ErrorCode::kInvalidArgument);
  ChatTemplateInputs not_dict;
  not_dict.messages = ordered_json::array({"hello"});
  EXPECT_EQ(t->render(not_dict).error().code, ErrorCode::kInvalidArgument);
  ChatTemplateInputs bad_tools = user_says("a");
  bad_tools.tools = "not a list";
  EXPECT_EQ(t->render(bad_tools).error().code, ErrorCode::kInvalidArgument);
  ChatTemplateInputs clash = user_says("a");
  clash.extra = {{"messages", 1}};
  EXPECT_NE(t->render(clash).error().message.find("messages"), std::string::npos);
}

// continue_final_message, as transformers cuts the rendered text: right after
// the final message's stripped text, keeping its trailing spacing only where
// the template kept it.
TEST(ChatTemplate, ContinueFinalMessageLeavesTheLastMessageOpen) {
  const std::string source =
      "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|assistant|>{% endif %}";
  ChatTemplateInputs in;
  in.messages = ordered_json::parse(
      R"([{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Once upon"}])");
  in.continue_final_message = true;
  EXPECT_EQ(render(source, in), "<|user|>Hi.<|end|>\n<|assistant|>Once upon");
  in.messages[1]["content"] = "Once upon ";  // the template keeps the space
  EXPECT_EQ(render(source, in), "<|user|>Hi.<|end|>\n<|assistant|>Once upon ");
  EXPECT_EQ(render("{% for m in messages %}{{ m.content|trim }}<|end|>{% endfor %}", in),
            "Hi.<|end|>Once upon");  // the template trims it
  in.messages = ordered_json::parse(
      R"([{"role": "assistant", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"},
                                            {"type": "image"}]}])");
  // The last part with text.
  EXPECT_EQ(render("{% for m in messages %}[{{ m.content[1].text }}]{% endfor %}", in), "[B");
}

TEST(ChatTemplate, ContinueFinalMessageErrors) {
  Result<ChatTemplate> t = ChatTemplate::parse("{% for m in messages %}{{ m.role }}{% endfor %}");
  ASSERT_TRUE(t.ok());
  ChatTemplateInputs in = user_says("never rendered");
  in.continue_final_message = true;
  Result<std::string> out = t->render(in);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("does not appear"), std::string::npos) << out.error().message;
  in.add_generation_prompt = true;
  EXPECT_NE(t->render(in).error().message.find("not compatible"), std::string::npos);
  ChatTemplateInputs none;
  none.continue_final_message = true;
  EXPECT_EQ(t->render(none).error().code, ErrorCode::kInvalidArgument);
}

TEST(ChatTemplate, SyntaxErrorsNameTheLine) {
  Result<ChatTemplate> t = ChatTemplate::parse("line one\n{% if x %}\n{% endfor %}");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(t.error().message.find("line 3"), std::string::npos) << t.error().message;
  EXPECT_NE(t.error().message.find("TemplateSyntaxError"), std::string::npos);
}

TEST(ChatTemplate, RaiseExceptionCarriesTheMessageAndLine) {
  Result<ChatTemplate> t = ChatTemplate::parse(
      "{% for m in messages %}\n{% if m.role == 'user' %}\n"
      "{{ raise_exception('roles must alternate: ' ~ m.role) }}{% endif %}{% endfor %}");
  ASSERT_TRUE(t.ok());
  Result<std::string> out = t->render(user_says("hi"));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("TemplateError: roles must alternate: user"),
            std::string::npos)
      << out.error().message;
  EXPECT_NE(out.error().message.find("line 3"), std::string::npos) << out.error().message;
}

TEST(ChatTemplate, UndefinedAttributeAccessIsAnError) {
  Result<ChatTemplate> t = ChatTemplate::parse("{{ messages[0].missing.deeper }}");
  ASSERT_TRUE(t.ok());
  Result<std::string> out = t->render(user_says("hi"));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("'dict object' has no attribute 'missing'"), std::string::npos)
      << out.error().message;
}

TEST(ChatTemplate, RendersConcurrently) {
  Result<ChatTemplate> t = ChatTemplate::parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
      "<{{ m.role }}>{{ m.content|upper }}{% endfor %}{{ ns.n }}");
  ASSERT_TRUE(t.ok());
  ChatTemplateInputs in = user_says("hello");
  in.messages.push_back({{"role", "assistant"}, {"content", "world"}});
  const std::string expected = "<user>HELLO<assistant>WORLD2";
  std::vector<std::thread> threads;
  std::vector<int> num_bad(8, 0);
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      ChatTemplate copy = *t;
      for (int k = 0; k < 200; ++k) {
        Result<std::string> out = copy.render(in);
        if (!out.ok() || *out != expected) ++num_bad[i];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int bad : num_bad) EXPECT_EQ(bad, 0);
}

TEST(ChatTemplate, RenderVariablesNeedsAnObject) {
  Result<ChatTemplate> t = ChatTemplate::parse("{{ x }}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t->render_variables({{"x", 5}}), "5");
  EXPECT_FALSE(t->render_variables(ordered_json::array()).ok());
}

}  // namespace
}  // namespace pagoda
