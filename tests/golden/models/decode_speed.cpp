// Measures CPU prefill and greedy decode speed of a model through
// ModelRunner (not a ctest; a manual tool):
//   model_decode_speed MODEL [prompt_tokens=32] [decode_tokens=64] [batch=1]
// MODEL is anything resolve_model accepts (folder, .gguf, repo id).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "greedy_driver.h"
#include "io/model_files.h"

using namespace pagoda;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL [prompt_tokens=32] [decode_tokens=64] [batch=1]\n",
                 argv[0]);
    return 2;
  }
  const int prompt_len = argc > 2 ? std::atoi(argv[2]) : 32;
  const int num_decode = argc > 3 ? std::atoi(argv[3]) : 64;
  const int batch = argc > 4 ? std::atoi(argv[4]) : 1;
  Result<ModelLocation> where = resolve_model(argv[1]);
  if (!where.ok()) return std::fprintf(stderr, "%s\n", where.error().message.c_str()), 1;
  Result<OpenedModel> model = open_model(*where);
  if (!model.ok()) return std::fprintf(stderr, "%s\n", model.error().message.c_str()), 1;
  CpuBackend backend;
  RunnerOptions o;
  o.max_model_len = prompt_len + num_decode + 1;
  o.max_num_batched_tokens = std::max(prompt_len * batch, 256);
  Result<std::unique_ptr<ModelRunner>> runner =
      ModelRunner::create(backend, model->config, *model->weights, o);
  if (!runner.ok()) return std::fprintf(stderr, "%s\n", runner.error().message.c_str()), 1;

  std::vector<std::vector<int32_t>> prompts(static_cast<size_t>(batch));
  for (int b = 0; b < batch; ++b)
    for (int i = 0; i < prompt_len; ++i)
      prompts[b].push_back(static_cast<int32_t>((7 * i + 13 * b + 1) % model->config.vocab_size));
  golden::DriverOptions d;
  d.num_top_logprobs = 0;
  std::vector<std::vector<golden::StepRecord>> out;
  using clock = std::chrono::steady_clock;
  d.num_steps = 1;  // prefill + the first token
  auto t0 = clock::now();
  Status st = golden::run_greedy(**runner, prompts, d, &out);
  const double prefill = std::chrono::duration<double>(clock::now() - t0).count();
  d.num_steps = 1 + num_decode;
  t0 = clock::now();
  st = golden::run_greedy(**runner, prompts, d, &out);  // prefill again, then decode
  const double total = std::chrono::duration<double>(clock::now() - t0).count();
  if (!st.ok()) return std::fprintf(stderr, "%s\n", st.error().message.c_str()), 1;
  const double decode = total - prefill;
  std::printf("%s on %s\n", where->display_name.c_str(), backend.name().c_str());
  std::printf("prefill: %d x %d tokens in %.3f s = %.1f tok/s\n", batch, prompt_len, prefill,
              batch * prompt_len / prefill);
  std::printf("decode:  %d x %d tokens in %.3f s = %.2f tok/s (%.1f ms/step)\n", batch, num_decode,
              decode, batch * num_decode / decode, 1000.0 * decode / num_decode);
  return 0;
}
