#include "backend/cuda/nccl_communicator.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/nccl_library.h"
#include "backend/cuda/oneshot_all_reduce.h"
#include "backend/fused_norm_route.h"
#include "core/byte_size.h"
#include "core/log.h"

namespace pagoda {
namespace {

using cuda::NcclLibrary;

cudaStream_t stream_of(const CudaBackend* b) { return b->stream(); }

bool to_nccl_type(DType t, ncclDataType_t* out) {
  switch (t) {
    case DType::kF32:
      *out = ncclFloat32;
      return true;
    case DType::kBF16:
      *out = ncclBfloat16;
      return true;
    case DType::kF16:
      *out = ncclFloat16;
      return true;
    default:
      return false;
  }
}

// Restores the calling thread's current device when it goes out of scope.
class DeviceGuard {
 public:
  DeviceGuard() { cudaGetDevice(&saved_); }
  ~DeviceGuard() { cudaSetDevice(saved_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int saved_ = 0;
};

// What the ranks of one group share; freed with the last communicator, once
// the group's GPUs are idle (ncclCommDestroy also waits until every CUDA
// graph that captured an op of the communicator is destroyed).
struct Group {
  const NcclLibrary* nccl = nullptr;
  std::vector<int> devices;
  std::vector<ncclComm_t> comms;
  // One-shot path: each rank's peer buffer (empty when the path is off) and
  // the byte capacity of one data half.
  std::vector<void*> peer_buffers;
  size_t oneshot_max_bytes = 0;
  size_t oneshot_capacity = 0;
  cuda::OneShotProtocol protocol = cuda::OneShotProtocol::kPush;
  // all_reduce_add_rms_norm's fused kernel takes up to this many rows.
  int64_t fused_norm_max_rows = 0;
  // The one-shot kernels' control words (pinned, mapped into every GPU;
  // null when the path is off).
  cuda::OneShotControl* control = nullptr;
  // Set once by abort(): ops return at once; the comms were aborted (freed).
  std::atomic<bool> aborted{false};
  std::mutex abort_mu;
  std::string abort_reason;  // written before `aborted` is set

  // Communicator::abort: the kernels' abort word, then ncclCommAbort of every
  // rank's comm (which makes its pending kernels return). A rank's thread
  // that is inside an NCCL call on its comm at that moment races with the
  // abort, as with NCCL's own watchdog-style aborts: the callers abort only
  // after a rank failed, when the others wait on the device or the host.
  void abort(const std::string& why) {
    std::lock_guard lock(abort_mu);
    if (aborted.load()) return;
    abort_reason = why;
    aborted.store(true);
    if (control != nullptr) {
      reinterpret_cast<volatile uint32_t*>(&control->aborted)[0] = 1;
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    DeviceGuard guard;
    for (size_t r = 0; r < comms.size(); ++r) {
      if (comms[r] == nullptr) continue;
      cudaSetDevice(devices[r]);
      const ncclResult_t e = nccl->comm_abort(comms[r]);
      if (e != ncclSuccess) log_warn("ncclCommAbort (rank {}): {}", r, nccl->error_string(e));
    }
    log_error("nccl: group of {} ranks aborted: {}", comms.size(), why);
  }

  ~Group() {
    DeviceGuard guard;
    // No kernel may still read a peer buffer or use a communicator.
    for (int d : devices) {
      cudaSetDevice(d);
      cudaDeviceSynchronize();
    }
    for (size_t r = 0; r < comms.size() && !aborted.load(); ++r) {
      cudaSetDevice(devices[r]);
      if (comms[r] != nullptr) {
        const ncclResult_t e = nccl->comm_destroy(comms[r]);
        if (e != ncclSuccess) log_warn("ncclCommDestroy (rank {}): {}", r, nccl->error_string(e));
      }
    }
    for (size_t r = 0; r < peer_buffers.size(); ++r) {
      cudaSetDevice(devices[r]);
      if (peer_buffers[r] != nullptr) cudaFree(peer_buffers[r]);
    }
    if (control != nullptr) cudaFreeHost(control);
  }
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<Group> group, int rank, CudaBackend* backend)
      : group_(std::move(group)), rank_(rank), backend_(backend) {}

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(group_->comms.size()); }
  std::string name() const override {
    std::string s = "nccl " + group_->nccl->version_name;
    if (!group_->peer_buffers.empty()) {
      s += fmt::format(" + one-shot all-reduce up to {} bytes, fused with add + rms_norm up to {} rows",
                       group_->oneshot_max_bytes, group_->fused_norm_max_rows);
    }
    return s;
  }

  Status status() const override {
    const Group& g = *group_;
    // The abort first: an NCCL call that was in flight when the group was
    // aborted fails with NCCL's own (internal) error, which says less.
    if (g.aborted.load()) {
      std::lock_guard lock(group_->abort_mu);
      return make_error(ErrorCode::kInternal, "aborted: " + g.abort_reason);
    }
    if (!status_.ok()) return status_;
    if (g.control != nullptr &&
        reinterpret_cast<const volatile uint32_t*>(&g.control->timed_out)[0] != 0) {
      return make_error(ErrorCode::kInternal,
                        fmt::format("nccl communicator rank {}: one-shot all-reduce: a peer rank "
                                    "did not arrive within {:.0f} s",
                                    rank_, cuda::kOneShotWaitSeconds));
    }
    ncclResult_t async = ncclSuccess;
    const ncclResult_t e = group_->nccl->comm_get_async_error(comm(), &async);
    if (e != ncclSuccess || async != ncclSuccess) {
      return make_error(ErrorCode::kInternal,
                        fmt::format("nccl communicator rank {}: {}", rank_,
                                    group_->nccl->error_string(e != ncclSuccess ? e : async)));
    }
    return {};
  }

  void abort(const std::string& why) override { group_->abort(why); }

  void all_reduce_sum(Tensor& x) override {
    if (group_->aborted.load()) return;
    ncclDataType_t type;
    if (!to_nccl_type(x.dtype, &type)) {
      return fail(fmt::format("all_reduce_sum: dtype {} (expected f32, bf16 or f16)",
                              dtype_name(x.dtype)));
    }
    if (x.data == nullptr && x.numel() > 0) return fail("all_reduce_sum: tensor without data");
    if (x.numel() == 0 || size() == 1) return;
    const Group& g = *group_;
    if (!g.peer_buffers.empty() && x.nbytes() <= g.oneshot_max_bytes) {
      cuda::OneShotParams p = oneshot_params();
      p.dtype = x.dtype;
      p.x = x.data;
      p.n = x.numel();
      return check_cuda(cuda::launch_oneshot_all_reduce(p, stream_of(backend_)),
                        "one-shot all-reduce");
    }
    check_nccl(g.nccl->all_reduce(x.data, x.data, static_cast<size_t>(x.numel()), type, ncclSum,
                                  comm(), stream_of(backend_)),
               "ncclAllReduce");
  }

  void all_reduce_add_rms_norm(Backend& backend, Tensor& x, Tensor& residual, const Tensor& w,
                               float eps, Tensor& out) override {
    if (group_->aborted.load()) return;
    const Group& g = *group_;
    const bool fused = !g.peer_buffers.empty() && size() > 1 && x.ndim == 2 &&
                       takes_fused_norm(x.shape[0], g.fused_norm_max_rows) &&
                       x.nbytes() <= g.oneshot_max_bytes && residual.ndim == 2 &&
                       out.ndim == 2 && residual.shape == x.shape && out.shape == x.shape &&
                       w.numel() == x.shape[1] && residual.dtype == x.dtype &&
                       out.dtype == x.dtype && w.dtype == x.dtype &&
                       cuda::oneshot_norm_fits(x.shape[0], x.shape[1], x.dtype, g.oneshot_capacity);
    if (!fused) return Communicator::all_reduce_add_rms_norm(backend, x, residual, w, eps, out);
    if (x.numel() == 0) return;
    cuda::OneShotNormParams p;
    p.group = oneshot_params();
    p.dtype = x.dtype;
    p.x = x.data;
    p.residual = residual.data;
    p.weight = w.data;
    p.out = out.data;
    p.rows = x.shape[0];
    p.hidden = x.shape[1];
    p.eps = eps;
    check_cuda(cuda::launch_oneshot_all_reduce_norm(p, stream_of(backend_)),
               "one-shot all-reduce + add + rms_norm");
  }

  void all_gather_columns(const Tensor& x, Tensor& out) override {
    if (group_->aborted.load()) return;
    const int64_t rows = x.ndim == 2 ? x.shape[0] : -1, cols = x.ndim == 2 ? x.shape[1] : -1;
    const int64_t width = out.ndim == 2 ? out.shape[1] : -1;
    if (rows < 0 || out.ndim != 2 || out.shape[0] != rows || out.dtype != x.dtype ||
        width > size() * cols) {
      return fail(fmt::format("all_gather_columns: out [{} x {}] does not hold {} blocks [{} x {}]",
                              out.ndim > 0 ? out.shape[0] : 0, width, size(), rows, cols));
    }
    if (out.numel() == 0) return;
    // Every rank's block into its columns of a zeroed out, then a sum over
    // the ranks: x + 0 is exact, so this is the gather, bit for bit.
    const size_t es = dtype_size(x.dtype);
    const int64_t first = rank_ * cols, n = std::clamp<int64_t>(width - first, 0, cols);
    cudaStream_t stream = stream_of(backend_);
    cudaError_t e = cudaMemsetAsync(out.data, 0, out.nbytes(), stream);
    if (e == cudaSuccess && n > 0 && rows > 0) {
      e = cudaMemcpy2DAsync(static_cast<char*>(out.data) + first * es, width * es, x.data,
                            cols * es, n * es, rows, cudaMemcpyDeviceToDevice, stream);
    }
    if (e != cudaSuccess) return check_cuda(e, "all_gather_columns");
    all_reduce_sum(out);
  }

  void send(const Tensor& x, int peer) override {
    if (group_->aborted.load() || !check_peer(peer, "send") || x.nbytes() == 0) return;
    check_nccl(group_->nccl->send(x.data, x.nbytes(), ncclUint8, peer, comm(), stream_of(backend_)),
               "ncclSend");
  }

  void recv(Tensor& x, int peer) override {
    if (group_->aborted.load() || !check_peer(peer, "recv") || x.nbytes() == 0) return;
    check_nccl(group_->nccl->recv(x.data, x.nbytes(), ncclUint8, peer, comm(), stream_of(backend_)),
               "ncclRecv");
  }

 private:
  ncclComm_t comm() const { return group_->comms[static_cast<size_t>(rank_)]; }

  // The group part of a one-shot launch's parameters (the path is on).
  cuda::OneShotParams oneshot_params() const {
    const Group& g = *group_;
    cuda::OneShotParams p;
    for (size_t r = 0; r < g.peer_buffers.size(); ++r) p.buffers[r] = g.peer_buffers[r];
    p.size = size();
    p.rank = rank_;
    p.capacity = g.oneshot_capacity;
    p.control = g.control;
    p.protocol = g.protocol;
    return p;
  }

  bool check_peer(int peer, const char* op) {
    if (peer >= 0 && peer < size() && peer != rank_) return true;
    fail(fmt::format("{}: peer {} is not another rank of this group of {}", op, peer, size()));
    return false;
  }
  void check_nccl(ncclResult_t e, const char* what) {
    if (e != ncclSuccess) fail(fmt::format("{}: {}", what, group_->nccl->error_string(e)));
  }
  void check_cuda(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
      cudaGetLastError();
      fail(fmt::format("{}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e)));
    }
  }
  void fail(const std::string& message) {
    log_error("nccl communicator rank {}: {}", rank_, message);
    if (status_.ok()) {
      status_ = make_error(ErrorCode::kInternal,
                           fmt::format("nccl communicator rank {}: {}", rank_, message));
    }
  }

  std::shared_ptr<Group> group_;
  int rank_;
  CudaBackend* backend_;
  Status status_;
};

// Peer access from every GPU of the group to every other; false (with the
// reason) when some pair lacks it.
bool enable_peer_access(const std::vector<int>& devices, std::string* why) {
  for (int i : devices) {
    for (int j : devices) {
      if (i == j) continue;
      int can = 0;
      cudaError_t e = cudaDeviceCanAccessPeer(&can, i, j);
      if (e != cudaSuccess || can == 0) {
        cudaGetLastError();
        *why = fmt::format("GPU {} cannot access GPU {}'s memory", i, j);
        return false;
      }
      e = cudaSetDevice(i);
      if (e == cudaSuccess) e = cudaDeviceEnablePeerAccess(j, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();
        e = cudaSuccess;
      }
      if (e != cudaSuccess) {
        cudaGetLastError();
        *why = fmt::format("cudaDeviceEnablePeerAccess({} -> {}): {}", i, j, cudaGetErrorString(e));
        return false;
      }
    }
  }
  return true;
}

// Each rank's peer buffer of `capacity`-byte halves, initialised
// (init_oneshot_buffer).
Status allocate_peer_buffers(Group& g, size_t capacity) {
  const int n = static_cast<int>(g.devices.size());
  const size_t bytes = cuda::oneshot_buffer_bytes(capacity, n);
  g.peer_buffers.assign(g.devices.size(), nullptr);
  for (size_t r = 0; r < g.devices.size(); ++r) {
    cudaError_t e = cudaSetDevice(g.devices[r]);
    if (e == cudaSuccess) e = cudaMalloc(&g.peer_buffers[r], bytes);
    if (e == cudaSuccess) e = cuda::init_oneshot_buffer(g.peer_buffers[r], capacity, n, nullptr);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
      cudaGetLastError();
      return make_error(ErrorCode::kResourceExhausted,
                        fmt::format("one-shot all-reduce buffer ({} bytes) on GPU {}: {}", bytes,
                                    g.devices[r], cudaGetErrorString(e)));
    }
  }
  void* control = nullptr;
  cudaError_t e = cudaHostAlloc(&control, sizeof(cuda::OneShotControl),
                                cudaHostAllocMapped | cudaHostAllocPortable);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return make_error(ErrorCode::kResourceExhausted,
                      fmt::format("one-shot all-reduce control words (pinned host memory): {}",
                                  cudaGetErrorString(e)));
  }
  std::memset(control, 0, sizeof(cuda::OneShotControl));
  // Unified addressing (every 64-bit CUDA process): the mapping's device
  // address is the host address on every GPU.
  g.control = static_cast<cuda::OneShotControl*>(control);
  g.oneshot_max_bytes = capacity;
  g.oneshot_capacity = (capacity + 15) / 16 * 16;
  return {};
}

}  // namespace

int64_t default_oneshot_max_bytes(int ranks) {
  if (ranks <= 2) return int64_t{4} << 20;
  if (ranks <= 4) return int64_t{512} << 10;
  return int64_t{256} << 10;
}

Result<int64_t> resolve_oneshot_max_bytes(const NcclCommunicatorOptions& options, int ranks) {
  int64_t v = options.oneshot_max_bytes;
  if (v < 0) {
    const char* env = std::getenv(kOneShotMaxBytesEnv);
    if (env == nullptr || env[0] == '\0') return default_oneshot_max_bytes(ranks);
    auto parsed = parse_byte_size(env);
    if (!parsed.ok() || *parsed > kMaxOneShotBytes) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}={}: expected a byte size from 0 (off) to {} (e.g. 512KiB)",
                                    kOneShotMaxBytesEnv, env, kMaxOneShotBytes));
    }
    v = *parsed;
  }
  if (v > kMaxOneShotBytes) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("one-shot all-reduce threshold {} bytes exceeds {}", v,
                                  kMaxOneShotBytes));
  }
  return v;
}

Result<cuda::OneShotProtocol> resolve_oneshot_protocol(const NcclCommunicatorOptions& options) {
  if (options.oneshot_protocol.has_value()) return *options.oneshot_protocol;
  const char* env = std::getenv(kOneShotProtocolEnv);
  if (env == nullptr || env[0] == '\0' || std::strcmp(env, "push") == 0) {
    return cuda::OneShotProtocol::kPush;
  }
  if (std::strcmp(env, "barrier") == 0) return cuda::OneShotProtocol::kBarrier;
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("{}={}: expected push or barrier", kOneShotProtocolEnv, env));
}

Result<std::vector<std::unique_ptr<Communicator>>> create_nccl_communicators(
    const std::vector<CudaBackend*>& backends, const NcclCommunicatorOptions& options) {
  if (backends.empty()) return make_error(ErrorCode::kInvalidArgument, "nccl: no backends");
  auto group = std::make_shared<Group>();
  std::set<int> seen;
  for (const CudaBackend* b : backends) {
    if (b == nullptr) return make_error(ErrorCode::kInvalidArgument, "nccl: a null backend");
    if (!seen.insert(b->device()).second) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("nccl: GPU {} appears twice (one rank per GPU)", b->device()));
    }
    group->devices.push_back(b->device());
  }
  auto threshold = resolve_oneshot_max_bytes(options, static_cast<int>(backends.size()));
  if (!threshold.ok()) return threshold.error();
  auto protocol = resolve_oneshot_protocol(options);
  if (!protocol.ok()) return protocol.error();
  group->protocol = *protocol;
  auto fused_norm_max_rows = resolve_fused_norm_max_rows(options.fused_norm_max_rows);
  if (!fused_norm_max_rows.ok()) return fused_norm_max_rows.error();
  group->fused_norm_max_rows = *fused_norm_max_rows;

  // Before NCCL reads its environment (at the first communicator's init).
  setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
  auto lib = cuda::load_nccl();
  if (!lib.ok()) return lib.error();
  group->nccl = lib.value();

  DeviceGuard guard;
  const int n = static_cast<int>(backends.size());
  group->comms.assign(static_cast<size_t>(n), nullptr);
  const ncclResult_t e = group->nccl->comm_init_all(group->comms.data(), n, group->devices.data());
  if (e != ncclSuccess) {
    group->comms.clear();  // nothing to destroy
    return make_error(ErrorCode::kInternal,
                      fmt::format("ncclCommInitAll over {} GPUs: {}", n, group->nccl->error_string(e)));
  }

  if (n >= 2 && *threshold > 0) {
    std::string why;
    if (n > cuda::kOneShotMaxRanks) {
      log_info("nccl: one-shot all-reduce off ({} ranks; at most {})", n, cuda::kOneShotMaxRanks);
    } else if (!enable_peer_access(group->devices, &why)) {
      log_info("nccl: one-shot all-reduce off: {}", why);
    } else {
      PAGODA_RETURN_IF_ERROR(allocate_peer_buffers(*group, static_cast<size_t>(*threshold)));
    }
  }

  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < n; ++r) {
    comms.push_back(std::make_unique<NcclCommunicator>(group, r, backends[static_cast<size_t>(r)]));
  }
  log_info("nccl: group of {} ranks ({})", n, comms.front()->name());
  return comms;
}

}  // namespace pagoda
