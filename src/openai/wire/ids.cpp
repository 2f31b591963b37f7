#include "openai/wire/ids.h"

#include <chrono>
#include <random>

namespace pagoda::openai {

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string random_id(std::string_view prefix, int length) {
  static constexpr char kAlphabet[] =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<int> pick(0, sizeof(kAlphabet) - 2);
  std::string id(prefix);
  for (int i = 0; i < length; ++i) id += kAlphabet[pick(rng)];
  return id;
}

}  // namespace pagoda::openai
