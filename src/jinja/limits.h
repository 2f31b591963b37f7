// Resource bounds of one render: a template can neither loop forever nor
// exhaust memory or the stack. Reaching one is an ErrorKind::kLimit error.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pagoda::jinja {

constexpr int64_t kMaxLoopSteps = 1'000'000;     // loop iterations + macro calls, per render
constexpr size_t kMaxOutputBytes = 16u << 20;    // the rendered text and any captured block
constexpr size_t kMaxStringBytes = 16u << 20;    // one string value
constexpr size_t kMaxListItems = 1'000'000;      // one list built by an operation
constexpr uint64_t kMaxBytesBuilt = 1ull << 30;  // all strings built by operations, per render
constexpr int kMaxCallDepth = 200;               // nested macro / caller / recursive-loop calls
constexpr int kMaxEvalDepth = 600;               // nested expression + statement evaluation
constexpr int kMaxParseDepth = 200;              // nested expressions / blocks in the source
constexpr int kMaxExprDepth = 400;               // height of one expression tree
constexpr int64_t kMaxRange = 100'000;           // jinja2 sandbox MAX_RANGE

}  // namespace pagoda::jinja
