// io/hub without a network: repo specs, GGUF quant picking, which files are
// fetched, the cache layout and the environment's hub settings.
#include <gtest/gtest.h>

#include <filesystem>

#include "io/hub/gguf_pick.h"
#include "io/hub/hub_cache.h"
#include "io/hub/hub_options.h"
#include "io/hub/model_files_select.h"
#include "io_test_util.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;
using testing::ScopedEnv;
using testing::TempDir;
using testing::write_bytes;

TEST(RepoModelSpec, SplitsQuantTag) {
  auto s = parse_repo_model_spec("Org/Name:Q4_K_M");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->repo_id, "Org/Name");
  EXPECT_EQ(s->quant, "Q4_K_M");
  s = parse_repo_model_spec("Org/Name");
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->quant);
  EXPECT_TRUE(parse_repo_model_spec("gpt2"));
  for (const char* bad :
       {"", "/abs", "a/b/c", "Org/", "Org/Name:", "./x", "Org/..", "a:b/c", "my model"}) {
    EXPECT_FALSE(parse_repo_model_spec(bad)) << bad;
  }
}

TEST(GgufPick, ByTagCaseInsensitivePreferringWholeTag) {
  const std::vector<std::string> files = {"README.md", "m-Q4_K_M.gguf", "m-Q4_K.gguf",
                                          "m-Q8_0.gguf", "mmproj-m-Q8_0.gguf"};
  EXPECT_EQ(*pick_gguf_file(files, "q8_0"), "m-Q8_0.gguf");
  EXPECT_EQ(*pick_gguf_file(files, "Q4_K"), "m-Q4_K.gguf");
  EXPECT_EQ(*pick_gguf_file(files, "Q4_K_M"), "m-Q4_K_M.gguf");
  EXPECT_EQ(*pick_gguf_file({"sub/m.Q4_K_M.gguf"}, kDefaultGgufQuant), "sub/m.Q4_K_M.gguf");
  auto none = pick_gguf_file(files, "IQ2_XS");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::kNotFound);
  EXPECT_NE(none.error().message.find("available: Q4_K, Q4_K_M, Q8_0"), std::string::npos)
      << none.error().message;
  auto several = pick_gguf_file({"a-Q4_K_M.gguf", "b-Q4_K_M.gguf"}, "Q4_K_M");
  ASSERT_FALSE(several.ok());
  EXPECT_NE(several.error().message.find("a-Q4_K_M.gguf, b-Q4_K_M.gguf"), std::string::npos);
  EXPECT_FALSE(pick_gguf_file({"README.md"}, "Q4_K_M").ok());
}

TEST(GgufPick, SplitFilesAreRefused) {
  auto r = pick_gguf_file(
      {"m-Q8_0-00001-of-00002.gguf", "m-Q8_0-00002-of-00002.gguf", "m-Q4_0.gguf"}, "Q8_0");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(r.error().message.find("split GGUF"), std::string::npos) << r.error().message;
}

TEST(GgufPick, QuantOfFileName) {
  EXPECT_EQ(gguf_quant_of("SmolLM2-135M-Instruct.Q4_1.gguf"), "Q4_1");
  EXPECT_EQ(gguf_quant_of("qwen2.5-0.5b-instruct-q4_k_m.gguf"), "Q4_K_M");
  EXPECT_EQ(gguf_quant_of("Model-IQ4_XS.gguf"), "IQ4_XS");
  EXPECT_EQ(gguf_quant_of("model-bf16.gguf"), "BF16");
  EXPECT_EQ(gguf_quant_of("dir/plain.gguf"), "plain");
}

TEST(ModelFilesSelect, MetadataAndSafetensorsOnly) {
  const std::vector<std::string> files = {"README.md",
                                          ".gitattributes",
                                          "tokenizer.json",
                                          "config.json",
                                          "model.safetensors",
                                          "pytorch_model.bin",
                                          "onnx/model.onnx",
                                          "original/consolidated.safetensors",
                                          "additional_chat_templates/rag.jinja",
                                          "generation_config.json",
                                          "hf_quant_config.json"};
  EXPECT_EQ(
      select_metadata_files(files),
      (std::vector<std::string>{"config.json", "generation_config.json", "hf_quant_config.json",
                                "tokenizer.json", "additional_chat_templates/rag.jinja"}));
  auto w = select_weight_files(files, "");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, std::vector<std::string>{"model.safetensors"});
}

TEST(ModelFilesSelect, IndexNamesTheShards) {
  const std::vector<std::string> files = {
      "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
      "consolidated.safetensors", "model.safetensors.index.json"};
  const std::string index =
      R"({"metadata": {}, "weight_map": {"a": "model-00002-of-00002.safetensors",
      "b": "model-00001-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}})";
  auto w = select_weight_files(files, index);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(*w, (std::vector<std::string>{"model-00001-of-00002.safetensors",
                                          "model-00002-of-00002.safetensors"}));
  EXPECT_FALSE(select_weight_files({"model.safetensors.index.json"}, index).ok());  // shard absent
  EXPECT_FALSE(select_weight_files(files, "{}").ok());
}

TEST(ModelFilesSelect, PyTorchCheckpointsWhenThereAreNoSafetensors) {
  auto w = select_weight_files({"config.json", "pytorch_model.bin", "README.md"}, "");
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(*w, std::vector<std::string>{"pytorch_model.bin"});
  w = select_weight_files({"pytorch_model-00002-of-00002.bin", "pytorch_model.bin.index.json",
                           "pytorch_model-00001-of-00002.bin", "training_args.bin", "x/pytorch_model.bin"},
                          "");
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(*w, (std::vector<std::string>{"pytorch_model.bin.index.json",
                                          "pytorch_model-00002-of-00002.bin",
                                          "pytorch_model-00001-of-00002.bin"}));
  // safetensors win when a repo has both.
  w = select_weight_files({"pytorch_model.bin", "model.safetensors"}, "");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, std::vector<std::string>{"model.safetensors"});
}

TEST(ModelFilesSelect, NothingReadableIsAnErrorNamingTheFiles) {
  for (const std::vector<std::string>& files :
       {std::vector<std::string>{"config.json", "model.pt"},
        std::vector<std::string>{"config.json", "pytorch_model.bin.index.json"}}) {
    auto w = select_weight_files(files, "");
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.error().code, ErrorCode::kUnsupported);
    EXPECT_NE(w.error().message.find(files[1]), std::string::npos) << w.error().message;
  }
}

TEST(HubCache, Layout) {
  TempDir tmp;
  const HubRepoCache cache(tmp.path(), "Org/Name");
  EXPECT_EQ(cache.dir(), tmp.path() / "models--Org--Name");
  EXPECT_EQ(cache.lock_path("e1"), tmp.path() / ".locks" / "models--Org--Name" / "e1.lock");
  const std::string commit(40, 'c');
  write_bytes(cache.blob_path("e1"), "{}");
  write_bytes(cache.blob_path("e2"), "t");
  ASSERT_TRUE(cache.link_snapshot_file(commit, "config.json", "e1").ok());
  ASSERT_TRUE(cache.link_snapshot_file(commit, "additional_chat_templates/x.jinja", "e2").ok());
  EXPECT_EQ(fs::read_symlink(cache.snapshot_dir(commit) / "config.json"), "../../blobs/e1");
  EXPECT_EQ(fs::read_symlink(cache.snapshot_dir(commit) / "additional_chat_templates" / "x.jinja"),
            "../../../blobs/e2");

  EXPECT_FALSE(cache.cached_commit("v1"));
  ASSERT_TRUE(cache.write_ref("v1", commit).ok());
  EXPECT_EQ(testing::read_bytes((cache.dir() / "refs" / "v1").string()),
            std::vector<uint8_t>(commit.begin(), commit.end()));  // no newline
  EXPECT_EQ(cache.cached_commit("v1"), commit);
  EXPECT_EQ(cache.cached_commit(commit), commit);
  EXPECT_EQ(cache.cached_commit("main"), commit);  // no refs/main: the newest snapshot
  EXPECT_FALSE(cache.cached_commit(std::string(40, 'd')));
  ASSERT_TRUE(cache.write_ref(commit, commit).ok());
  EXPECT_FALSE(fs::exists(cache.dir() / "refs" / commit));
}

TEST(HubCache, EtagAndCommitForms) {
  EXPECT_EQ(normalize_etag("\"abc\""), "abc");
  EXPECT_EQ(normalize_etag("W/\"abc\""), "abc");
  EXPECT_EQ(normalize_etag("abc"), "abc");
  EXPECT_TRUE(is_commit_hash(std::string(40, 'a')));
  EXPECT_FALSE(is_commit_hash(std::string(40, 'A')));
  EXPECT_FALSE(is_commit_hash("main"));
}

TEST(HubOptions, FromEnvironment) {
  TempDir tmp;
  ScopedEnv endpoint("HF_ENDPOINT", "http://mirror.example/");
  ScopedEnv token("HF_TOKEN", nullptr);
  ScopedEnv legacy_token("HUGGING_FACE_HUB_TOKEN", nullptr);
  ScopedEnv token_path("HF_TOKEN_PATH", nullptr);
  ScopedEnv home("HF_HOME", tmp.path().c_str());
  ScopedEnv hub("HF_HUB_CACHE", nullptr);
  ScopedEnv offline("HF_HUB_OFFLINE", nullptr);
  ScopedEnv tf_offline("TRANSFORMERS_OFFLINE", nullptr);
  HubOptions o = HubOptions::from_env();
  EXPECT_EQ(o.endpoint, "http://mirror.example");
  EXPECT_EQ(o.revision, "main");
  EXPECT_EQ(o.token, "");
  EXPECT_EQ(o.cache_dir, (tmp.path() / "hub").string());
  EXPECT_FALSE(o.offline);

  write_bytes(tmp.path() / "token", "hf_from_file\n");
  EXPECT_EQ(HubOptions::from_env().token, "hf_from_file");
  {
    ScopedEnv t("HF_TOKEN", "hf_env");
    EXPECT_EQ(HubOptions::from_env().token, "hf_env");
  }
  o = HubOptions::from_env("v2", "/elsewhere");
  EXPECT_EQ(o.revision, "v2");
  EXPECT_EQ(o.cache_dir, "/elsewhere");
  for (const char* on : {"1", "true", "YES", "on"}) {
    ScopedEnv off("HF_HUB_OFFLINE", on);
    EXPECT_TRUE(HubOptions::from_env().offline) << on;
  }
  ScopedEnv off("TRANSFORMERS_OFFLINE", "0");
  EXPECT_FALSE(HubOptions::from_env().offline);
  ScopedEnv off2("TRANSFORMERS_OFFLINE", "1");
  EXPECT_TRUE(HubOptions::from_env().offline);
}

TEST(HubOptions, DefaultNeverDownloads) {
  EXPECT_TRUE(HubOptions{}.offline);
}

}  // namespace
}  // namespace pagoda
