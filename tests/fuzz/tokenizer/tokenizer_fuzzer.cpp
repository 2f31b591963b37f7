// Fuzzes Tokenizer::encode/decode and IncrementalDetokenizer on arbitrary
// bytes. Byte 0 picks the tokenizer (byte-level BPE or Metaspace with byte
// fallback) and the flags; the rest is the text, and also read as token ids.
// Invariants (trap on violation):
//   - nothing crashes, every decode and stream delta is valid UTF-8;
//   - stream deltas + flush == decode;
//   - byte-level BPE without special handling: decode(encode(text)) == text
//     for valid UTF-8 text.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "core/utf8.h"

namespace {

const pagoda::Tokenizer& fixture(const char* name) {
  auto tok = pagoda::Tokenizer::load(std::string(PAGODA_TOKENIZER_FIXTURES) + "/" + name);
  if (!tok.ok()) std::abort();
  return *std::move(tok).value().release();
}

void require(bool ok) {
  if (!ok) __builtin_trap();
}

void check_stream(const pagoda::Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  pagoda::IncrementalDetokenizer detok(tok, skip);
  std::string text;
  for (int32_t id : ids) {
    std::string delta = detok.feed(id);
    require(pagoda::is_valid_utf8(delta));
    text += delta;
  }
  text += detok.flush();
  std::string full = tok.decode(ids, skip);
  require(pagoda::is_valid_utf8(full));
  require(text == full);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const pagoda::Tokenizer& bytelevel = fixture("bytelevel");
  static const pagoda::Tokenizer& metaspace = fixture("metaspace");
  if (size == 0) return 0;
  uint8_t flags = data[0];
  const pagoda::Tokenizer& tok = (flags & 1) ? metaspace : bytelevel;
  bool add_special = flags & 2, parse_special = flags & 4, skip = flags & 8;
  std::string text(reinterpret_cast<const char*>(data + 1), size - 1);

  std::vector<int32_t> ids = tok.encode(text, add_special, parse_special);
  for (int32_t id : ids) require(id >= 0 && id < tok.vocab_size());
  std::string decoded = tok.decode(ids, skip);
  require(pagoda::is_valid_utf8(decoded));
  if (!(flags & 1) && !add_special && !parse_special && pagoda::is_valid_utf8(text)) {
    require(decoded == text);
  }
  check_stream(tok, ids, skip);

  // The same bytes as ids, including out-of-range ones.
  std::vector<int32_t> raw;
  for (size_t i = 1; i + 1 < size; i += 2) {
    raw.push_back(static_cast<int32_t>((data[i] << 8 | data[i + 1]) % (tok.vocab_size() + 8)) - 4);
  }
  check_stream(tok, raw, skip);
  return 0;
}
