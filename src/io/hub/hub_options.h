// Where and how models are fetched from a Hugging Face hub: the settings that
// huggingface_hub reads from the environment (HF_ENDPOINT, HF_TOKEN,
// HF_HUB_OFFLINE, HF_HUB_CACHE / HF_HOME) plus the revision and cache root the
// command line may choose (--revision, --download-dir).
#pragma once

#include <string>

namespace pagoda {

struct HubOptions {
  std::string endpoint = "https://huggingface.co";  // no trailing slash
  std::string revision = "main";                    // branch, tag or 40-hex commit
  // The revision was asked for (--revision), not defaulted: a local MODEL
  // path, which has no revisions, is then refused rather than used as is.
  bool revision_given = false;
  std::string token;                                // sent as "Authorization: Bearer"; empty: none
  std::string cache_dir;  // the hub cache root (models--org--name/ inside)
  // true: never touch the network; a repo id resolves from the cache or not
  // at all (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE, and the default).
  bool offline = true;
  bool show_progress = true;  // a progress bar (or log lines) per downloaded file

  // The environment's settings: HF_ENDPOINT, HF_TOKEN (else
  // HUGGING_FACE_HUB_TOKEN, else the token file $HF_TOKEN_PATH or
  // $HF_HOME/token), HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE (1/ON/YES/TRUE),
  // the cache root `download_dir` when not empty else hf_hub_cache_dir().
  // `revision` empty means "main".
  static HubOptions from_env(const std::string& revision = "",
                             const std::string& download_dir = "");
};

// The Hugging Face hub cache folder: $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
std::string hf_hub_cache_dir();

// The Hugging Face home: $HF_HOME, else $XDG_CACHE_HOME/huggingface, else
// ~/.cache/huggingface (where huggingface_hub keeps the token file).
std::string hf_home_dir();

}  // namespace pagoda
