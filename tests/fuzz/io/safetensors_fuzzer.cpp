// libFuzzer target: the safetensors header parser on arbitrary bytes. Every
// accepted tensor's byte range is read so that an out-of-bounds offset shows
// up under AddressSanitizer.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exact-size buffer so any read past `size` is caught.
  std::vector<uint8_t> buf(data, data + size);
  auto header = pagoda::parse_safetensors_header(buf.data(), buf.size(), "fuzz.safetensors");
  if (!header.ok()) return 0;
  uint8_t acc = 0;
  for (const pagoda::SafetensorsEntry& e : header->tensors) {
    if (e.begin > e.end || e.end > buf.size()) __builtin_trap();  // the parser's contract
    for (uint64_t i = e.begin; i < e.end; ++i) acc ^= buf[i];
  }
  volatile uint8_t sink = acc;
  (void)sink;
  return 0;
}
