// libFuzzer target: the PyTorch zip checkpoint parser (zip directory, pickle
// interpreter, storage checks) on arbitrary bytes. Every accepted tensor's
// byte range is read so that an out-of-bounds offset shows up under
// AddressSanitizer.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "io/torch_checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exact-size buffer so any read past `size` is caught.
  std::vector<uint8_t> buf(data, data + size);
  auto tensors = pagoda::parse_torch_checkpoint(buf.data(), buf.size(), "fuzz.bin");
  if (!tensors.ok()) return 0;
  uint8_t acc = 0;
  for (const pagoda::TorchCheckpointTensor& t : *tensors) {
    if (t.begin > t.end || t.end > buf.size()) __builtin_trap();  // the parser's contract
    for (uint64_t i = t.begin; i < t.end; ++i) acc ^= buf[i];
  }
  volatile uint8_t sink = acc;
  (void)sink;
  return 0;
}
