// resolve_model (paths, offline Hugging Face cache) and open_model on a
// Hugging Face folder.
#include "io/model_files.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "io_test_util.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;
using testing::ScopedEnv;
using testing::TempDir;
using testing::write_bytes;

// Clears every variable that picks the hub cache, for one test.
struct CleanHfEnv {
  ScopedEnv hub{"HF_HUB_CACHE", nullptr};
  ScopedEnv home{"HF_HOME", nullptr};
  ScopedEnv xdg{"XDG_CACHE_HOME", nullptr};
};

// hub/<repo_dir>/snapshots/<rev>/config.json as a symlink into blobs/, the
// way huggingface_hub lays out its cache.
fs::path make_snapshot(const fs::path& hub, const std::string& repo_dir, const std::string& rev) {
  const fs::path snap = hub / repo_dir / "snapshots" / rev;
  write_bytes(hub / repo_dir / "blobs" / ("blob-" + rev), "{}");
  fs::create_directories(snap);
  fs::create_symlink(fs::path("../../blobs") / ("blob-" + rev), snap / "config.json");
  return snap;
}

TEST(HfCache, DirectoryPrecedence) {
  CleanHfEnv env;
  ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(hf_hub_cache_dir(), "/home/someone/.cache/huggingface/hub");
  ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
  EXPECT_EQ(hf_hub_cache_dir(), "/xdg/huggingface/hub");
  ScopedEnv hf_home("HF_HOME", "/hfhome");
  EXPECT_EQ(hf_hub_cache_dir(), "/hfhome/hub");
  ScopedEnv hub("HF_HUB_CACHE", "/hubcache");
  EXPECT_EQ(hf_hub_cache_dir(), "/hubcache");
}

TEST(HfCache, ResolvesRepoIdThroughRefsMain) {
  CleanHfEnv env;
  TempDir tmp;
  const fs::path hub = tmp.path() / "hub";
  make_snapshot(hub, "models--Org--Model", "aaaa");
  const fs::path want = make_snapshot(hub, "models--Org--Model", "bbbb");
  make_snapshot(hub, "models--Org--Model", "cccc");
  write_bytes(hub / "models--Org--Model" / "refs" / "main", "bbbb\n");
  ScopedEnv hub_env("HF_HUB_CACHE", hub.c_str());
  auto loc = resolve_model("Org/Model");
  ASSERT_TRUE(loc.ok()) << loc.error().message;
  EXPECT_EQ(loc->format, ModelFormat::kHuggingFace);
  EXPECT_EQ(fs::path(loc->path), want);
  EXPECT_EQ(loc->display_name, "Org/Model");
}

TEST(HfCache, NewestSnapshotWithoutRefs) {
  CleanHfEnv env;
  TempDir tmp;
  const fs::path hub = tmp.path() / "hub";
  const fs::path old_snap = make_snapshot(hub, "models--Org--Model", "old");
  const fs::path new_snap = make_snapshot(hub, "models--Org--Model", "new");
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(old_snap, now - std::chrono::hours(2));
  fs::last_write_time(new_snap, now - std::chrono::hours(1));
  ScopedEnv hf_home("HF_HOME", tmp.path().c_str());  // HF_HOME/hub
  auto loc = resolve_model("Org/Model");
  ASSERT_TRUE(loc.ok()) << loc.error().message;
  EXPECT_EQ(fs::path(loc->path), new_snap);
}

TEST(HfCache, HubCacheWinsOverHfHome) {
  CleanHfEnv env;
  TempDir a, b;
  make_snapshot(a.path() / "hub", "models--Org--Model", "r1");
  const fs::path in_b = make_snapshot(b.path(), "models--Org--Model", "r2");
  ScopedEnv hf_home("HF_HOME", a.path().c_str());
  ScopedEnv hub("HF_HUB_CACHE", b.path().c_str());
  auto loc = resolve_model("Org/Model");
  ASSERT_TRUE(loc.ok()) << loc.error().message;
  EXPECT_EQ(fs::path(loc->path), in_b);
}

TEST(HfCache, GgufOnlySnapshot) {
  CleanHfEnv env;
  TempDir tmp;
  const fs::path snap = tmp.path() / "models--Org--Model-GGUF" / "snapshots" / "r";
  write_bytes(snap / "model.Q4_K_M.gguf", "GGUF");
  ScopedEnv hub("HF_HUB_CACHE", tmp.path().c_str());
  auto loc = resolve_model("Org/Model-GGUF");
  ASSERT_TRUE(loc.ok()) << loc.error().message;
  EXPECT_EQ(loc->format, ModelFormat::kGguf);
  EXPECT_EQ(fs::path(loc->path), snap / "model.Q4_K_M.gguf");
  write_bytes(snap / "model.Q8_0.gguf", "GGUF");
  // Several files: the tag picks one, and no tag means Q4_K_M (llama-server's default).
  loc = resolve_model("Org/Model-GGUF");
  ASSERT_TRUE(loc.ok()) << loc.error().message;
  EXPECT_EQ(fs::path(loc->path), snap / "model.Q4_K_M.gguf");
  loc = resolve_model("Org/Model-GGUF:q8_0");
  ASSERT_TRUE(loc.ok()) << loc.error().message;
  EXPECT_EQ(fs::path(loc->path), snap / "model.Q8_0.gguf");
  EXPECT_EQ(loc->display_name, "Org/Model-GGUF:q8_0");
  fs::remove(snap / "model.Q4_K_M.gguf");
  write_bytes(snap / "model.Q5_K_M.gguf", "GGUF");
  loc = resolve_model("Org/Model-GGUF");
  ASSERT_FALSE(loc.ok());
  EXPECT_NE(loc.error().message.find("available: Q5_K_M, Q8_0"), std::string::npos) << loc.error().message;
  EXPECT_NE(loc.error().message.find("Org/Model-GGUF:QUANT"), std::string::npos) << loc.error().message;
}

TEST(HfCache, OfflineKeepsAnIncompleteSnapshotAndOnlineNeedsNoNetworkForAComplete) {
  CleanHfEnv env;
  TempDir tmp;
  const fs::path snap = make_snapshot(tmp.path(), "models--Org--Model", "r");
  HubOptions hub;  // offline: what is cached, complete or not
  hub.cache_dir = tmp.path().string();
  auto loc = resolve_model("Org/Model", hub);
  ASSERT_TRUE(loc.ok()) << loc.error().message;
  // Online with the weights present: no request (the endpoint does not exist).
  write_bytes(snap / "model.safetensors", "x");
  hub.offline = false;
  hub.endpoint = "http://127.0.0.1:1";
  loc = resolve_model("Org/Model", hub);
  ASSERT_TRUE(loc.ok()) << loc.error().message;
  EXPECT_EQ(fs::path(loc->path), snap);
  // An index naming a missing shard makes it incomplete: online, a download is tried.
  write_bytes(snap / "model.safetensors.index.json", R"({"weight_map": {"w": "model-00001-of-00002.safetensors"}})");
  loc = resolve_model("Org/Model", hub);
  ASSERT_FALSE(loc.ok());
  EXPECT_NE(loc.error().message.find("http://127.0.0.1:1/api/models/Org/Model/revision/main"), std::string::npos)
      << loc.error().message;
}

TEST(HfCache, MissingModelListsPlacesSearched) {
  CleanHfEnv env;
  TempDir tmp;
  ScopedEnv hub("HF_HUB_CACHE", tmp.path().c_str());
  auto loc = resolve_model("Org/Absent");
  ASSERT_FALSE(loc.ok());
  EXPECT_EQ(loc.error().code, ErrorCode::kNotFound);
  const std::string& msg = loc.error().message;
  EXPECT_NE(msg.find("Org/Absent (as a path)"), std::string::npos) << msg;
  EXPECT_NE(msg.find((tmp.path() / "models--Org--Absent").string()), std::string::npos) << msg;
  loc = resolve_model("/no/such/model.gguf");
  ASSERT_FALSE(loc.ok());
  EXPECT_NE(loc.error().message.find("/no/such/model.gguf"), std::string::npos);
}

TEST(ResolveModel, LocalFolderAndFiles) {
  TempDir tmp;
  const fs::path hf = tmp.path() / "my-model";
  write_bytes(hf / "config.json", "{}");
  auto loc = resolve_model(hf.string() + "/");
  ASSERT_TRUE(loc.ok()) << loc.error().message;
  EXPECT_EQ(loc->format, ModelFormat::kHuggingFace);
  EXPECT_EQ(loc->display_name, "my-model");
  loc = resolve_model((hf / "config.json").string());
  ASSERT_TRUE(loc.ok()) << loc.error().message;
  EXPECT_EQ(loc->format, ModelFormat::kHuggingFace);
  const fs::path empty = tmp.path() / "empty";
  fs::create_directories(empty);
  loc = resolve_model(empty.string());
  ASSERT_FALSE(loc.ok());
  EXPECT_NE(loc.error().message.find("neither config.json nor a .gguf"), std::string::npos);
}

TEST(OpenModel, HuggingFaceFolder) {
  const std::string dir = testing::shared_path("models/stories260K");
  if (!fs::exists(dir + "/config.json")) GTEST_SKIP() << "absent: " << dir;
  auto loc = resolve_model(dir);
  ASSERT_TRUE(loc.ok()) << loc.error().message;
  EXPECT_EQ(loc->display_name, "stories260K");
  auto m = open_model(*loc);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(m->config.architecture, "llama");
  EXPECT_EQ(m->config.num_layers, 5);
  EXPECT_EQ(m->generation.eos_token_ids, std::vector<int32_t>{2});
  EXPECT_EQ(m->gguf, nullptr);
  EXPECT_NE(m->weights->find("model.layers.0.mlp.down_proj.weight"), nullptr);
}

TEST(OpenModel, BadGenerationConfigIsAnError) {
  TempDir tmp;
  write_bytes(
      tmp.path() / "config.json",
      R"({"architectures":["LlamaForCausalLM"],"vocab_size":4,"hidden_size":4,"intermediate_size":4,)"
      R"("num_hidden_layers":1,"num_attention_heads":1,"max_position_embeddings":8})");
  write_bytes(tmp.path() / "generation_config.json", "{broken");
  auto m = open_model(ModelLocation{ModelFormat::kHuggingFace, tmp.path().string(), "t"});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("generation_config.json"), std::string::npos)
      << m.error().message;
  fs::remove(tmp.path() / "generation_config.json");
  m = open_model(ModelLocation{ModelFormat::kHuggingFace, tmp.path().string(), "t"});
  ASSERT_FALSE(m.ok());  // no weights
  EXPECT_NE(m.error().message.find("model.safetensors"), std::string::npos) << m.error().message;
  EXPECT_NE(m.error().message.find("pytorch_model.bin"), std::string::npos) << m.error().message;
}

// Without safetensors a folder's pytorch_model.bin is read (io/torch_checkpoint.h);
// with both, the safetensors.
TEST(OpenModel, PyTorchCheckpointOnlyWithoutSafetensors) {
  TempDir tmp;
  write_bytes(
      tmp.path() / "config.json",
      R"({"architectures":["LlamaForCausalLM"],"vocab_size":4,"hidden_size":4,"intermediate_size":4,)"
      R"("num_hidden_layers":1,"num_attention_heads":1,"max_position_embeddings":8})");
  write_bytes(tmp.path() / "pytorch_model.bin", "not a zip archive at all");
  const ModelLocation loc{ModelFormat::kHuggingFace, tmp.path().string(), "t"};
  auto m = open_model(loc);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("pytorch_model.bin: no zip end-of-central-directory record"),
            std::string::npos)
      << m.error().message;
  const std::string header = "{}";
  write_bytes(tmp.path() / "model.safetensors",
              std::string("\x02\0\0\0\0\0\0\0", 8) + header);
  m = open_model(loc);
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_NE(m->weights->describe().find("model.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace pagoda
