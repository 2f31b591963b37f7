// The cpu backend's communicators: the ranks of a group are threads of this
// process (one CpuBackend each), and the collectives meet in shared memory.
// Used for tensor and pipeline parallelism on the cpu (CI checks TP/PP
// against one rank with them) and by the parallel runner's tests.
#pragma once

#include <memory>
#include <vector>

#include "backend/communicator.h"

namespace pagoda {

// `size` communicators (ranks 0..size-1) of one group; each is used by one
// thread. all_reduce_sum blocks until every rank has called it; each rank
// sums a slice of the elements over the ranks in rank order (f32
// accumulation), so every rank gets the same bits; all_reduce_add_rms_norm
// is the Communicator default (all_reduce_sum, then the backend's
// add_rms_norm); all_gather_columns copies every rank's block in shared
// memory. send() copies into the
// (src, dst) mailbox and waits only while that mailbox still holds an
// unreceived tensor; recv() waits for it. abort() (from any thread) wakes
// every waiting rank of the group; status() is then "aborted: <why>" on each.
// The communicators share the group's state and may be destroyed in any
// order.
std::vector<std::unique_ptr<Communicator>> create_cpu_communicators(int size);

}  // namespace pagoda
