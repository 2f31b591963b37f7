#include "pagoda/model_flags.h"

#include <cstdio>
#include <cstring>

#include "io/hub/gguf_pick.h"

namespace pagoda::app {

void add_model_source_flags(CLI::App& app, std::string& revision, std::string& download_dir) {
  app.add_option("--revision", revision,
                 "the branch, tag or commit id of a repo-id MODEL to use and download (default "
                 "main); the cache keeps refs/<revision> -> commit like huggingface_hub");
  app.add_option("--download-dir", download_dir,
                 "the hub cache folder to look up and download repo-id models in, instead of "
                 "$HF_HUB_CACHE (else $HF_HOME/hub, else ~/.cache/huggingface/hub); the layout "
                 "is huggingface_hub's, shared with transformers and vLLM");
}

void add_hf_repo_flag(CLI::App& app, std::string& hf_repo) {
  app.add_option("--hf-repo", hf_repo,
                 "(also -hf, as llama-server) a GGUF repo on the hub, Org/Name[:QUANT], to use as "
                 "MODEL: the .gguf file whose name contains QUANT (default Q4_K_M), downloaded "
                 "into the hub cache on first use");
}

bool apply_hf_repo(const std::string& hf_repo, std::string& model, const char* command) {
  if (hf_repo.empty()) return true;
  if (!model.empty()) {
    std::fprintf(stderr, "%s: give MODEL or --hf-repo, not both\n", command);
    return false;
  }
  auto spec = parse_repo_model_spec(hf_repo);
  model = spec && !spec->quant ? hf_repo + ":" + kDefaultGgufQuant : hf_repo;
  return true;
}

void rewrite_single_dash_aliases(int argc, char** argv) {
  static char kHfRepo[] = "--hf-repo";
  static char kParallel[] = "--parallel";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-hf") == 0) argv[i] = kHfRepo;
    if (std::strcmp(argv[i], "-np") == 0) argv[i] = kParallel;
  }
}

}  // namespace pagoda::app
