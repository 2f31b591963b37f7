// A fixed pool of worker threads for data-parallel CPU loops.
// Size: set_num_cpu_threads() (the commands' --threads), else
// PAGODA_NUM_THREADS, else std::thread::hardware_concurrency().
#pragma once

#include <cstdint>
#include <functional>

namespace pagoda {

// Sets the pool's size (n >= 1). Only before the size is first read (by
// num_cpu_threads() or the first parallel_for); returns false, changing
// nothing, after.
bool set_num_cpu_threads(int n);
int num_cpu_threads();

// Calls fn(lo, hi) on disjoint chunks covering [0, n), in parallel on the
// global pool; returns when all chunks are done. Chunks hold at least
// `min_chunk` items. Safe to call from any thread; nested calls run inline.
void parallel_for(int64_t n, int64_t min_chunk, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace pagoda
