#include "parallel/cpu_communicator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/half.h"
#include "finishes_within.h"

namespace pagoda {
namespace {

std::string msg(const Communicator& c) { return c.status().ok() ? "" : c.status().error().message; }

// Runs fn(rank) on one thread per communicator.
template <typename Fn>
void on_ranks(std::vector<std::unique_ptr<Communicator>>& comms, Fn fn) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r) threads.emplace_back([&, r] { fn(*comms[r]); });
  for (std::thread& t : threads) t.join();
}

TEST(CpuCommunicator, AllReduceSumsInRankOrderAndAgreesBitwise) {
  for (int size : {1, 2, 3, 4}) {
    for (int64_t n : {1, 5, 64, 1000}) {
      auto comms = create_cpu_communicators(size);
      std::mt19937 rng(static_cast<uint32_t>(size * 1000 + n));
      std::uniform_real_distribution<float> u(-10.0f, 10.0f);
      std::vector<std::vector<float>> data(static_cast<size_t>(size), std::vector<float>(static_cast<size_t>(n)));
      for (auto& v : data) {
        for (float& f : v) f = u(rng);
      }
      std::vector<float> want(static_cast<size_t>(n), 0.0f);
      for (int64_t i = 0; i < n; ++i) {
        for (int r = 0; r < size; ++r) want[static_cast<size_t>(i)] += data[static_cast<size_t>(r)][static_cast<size_t>(i)];
      }
      on_ranks(comms, [&](Communicator& c) {
        // Twice, so a second call reuses the group's buffers.
        for (int rep = 0; rep < 2; ++rep) {
          std::vector<float>& mine = data[static_cast<size_t>(c.rank())];
          std::vector<float> x = mine;
          Tensor t(x.data(), DType::kF32, {n});
          c.all_reduce_sum(t);
          ASSERT_TRUE(c.status().ok()) << msg(c);
          for (int64_t i = 0; i < n; ++i) ASSERT_EQ(x[static_cast<size_t>(i)], want[static_cast<size_t>(i)]) << i;
        }
      });
    }
  }
}

TEST(CpuCommunicator, AllReduceBf16RoundsTheF32SumOnce) {
  auto comms = create_cpu_communicators(3);
  const std::vector<float> vals = {1.0f, 1.0f / 256, 1.0f / 256};  // bf16 keeps 8 bits
  on_ranks(comms, [&](Communicator& c) {
    uint16_t x = float_to_bf16(vals[static_cast<size_t>(c.rank())]);
    Tensor t(&x, DType::kBF16, {1});
    c.all_reduce_sum(t);
    EXPECT_EQ(x, float_to_bf16(1.0f + 2.0f / 256));
  });
}

TEST(CpuCommunicator, AllGatherColumnsPlacesEveryRanksBlockAndDropsPadding) {
  for (int size : {1, 2, 3, 4}) {
    for (int64_t rows : {1, 3}) {
      for (int64_t cols : {1, 5}) {
        for (int64_t width = std::max<int64_t>(1, (size - 1) * cols - cols + 1);
             width <= size * cols; ++width) {
          auto comms = create_cpu_communicators(size);
          // rank j's x[r, c] = 1000 j + 10 r + c
          on_ranks(comms, [&](Communicator& c) {
            std::vector<float> x(static_cast<size_t>(rows * cols));
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t k = 0; k < cols; ++k)
                x[static_cast<size_t>(r * cols + k)] = 1000.0f * c.rank() + 10.0f * r + k;
            std::vector<float> out(static_cast<size_t>(rows * width), -1.0f);
            Tensor xt(x.data(), DType::kF32, {rows, cols}),
                ot(out.data(), DType::kF32, {rows, width});
            c.all_gather_columns(xt, ot);
            ASSERT_TRUE(c.status().ok()) << msg(c);
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t w = 0; w < width; ++w)
                ASSERT_EQ(out[static_cast<size_t>(r * width + w)],
                          1000.0f * (w / cols) + 10.0f * r + w % cols)
                    << "size " << size << " width " << width << " r " << r << " w " << w;
          });
        }
      }
    }
  }
}

TEST(CpuCommunicator, AllGatherColumnsRefusesAnOutTooWide) {
  auto comms = create_cpu_communicators(2);
  on_ranks(comms, [&](Communicator& c) {
    std::vector<float> x(4, 1.0f), out(10, 0.0f);
    Tensor xt(x.data(), DType::kF32, {2, 2}), ot(out.data(), DType::kF32, {2, 5});
    c.all_gather_columns(xt, ot);
    EXPECT_NE(msg(c).find("all_gather_columns"), std::string::npos) << msg(c);
  });
}

// The fused op is, on the cpu, exactly the all-reduce and then the backend's
// add_rms_norm: compared bit for bit with those two calls.
TEST(CpuCommunicator, AllReduceAddRmsNormIsTheSumThenTheBackendsAddRmsNorm) {
  constexpr int64_t kRows = 3, kHidden = 7;
  for (int size : {1, 2, 4}) {
    auto fused = create_cpu_communicators(size);
    auto plain = create_cpu_communicators(size);
    std::mt19937 rng(static_cast<uint32_t>(size));
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    auto random = [&](int64_t n) {
      std::vector<float> v(static_cast<size_t>(n));
      for (float& f : v) f = u(rng);
      return v;
    };
    std::vector<std::vector<float>> parts;
    for (int r = 0; r < size; ++r) parts.push_back(random(kRows * kHidden));
    const std::vector<float> residual0 = random(kRows * kHidden), w = random(kHidden);
    std::vector<std::vector<float>> got(static_cast<size_t>(size)), want(static_cast<size_t>(size));
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r) {
      threads.emplace_back([&, r] {
        CpuBackend be;
        const size_t i = static_cast<size_t>(r);
        auto run = [&](Communicator& c, bool fuse) {
          std::vector<float> x = parts[i], res = residual0, out(residual0.size());
          Tensor xt(x.data(), DType::kF32, {kRows, kHidden}),
              rt(res.data(), DType::kF32, {kRows, kHidden});
          Tensor ot(out.data(), DType::kF32, {kRows, kHidden});
          const Tensor wt(const_cast<float*>(w.data()), DType::kF32, {kHidden});
          if (fuse) {
            c.all_reduce_add_rms_norm(be, xt, rt, wt, 1e-5f, ot);
          } else {
            c.all_reduce_sum(xt);
            be.add_rms_norm(rt, xt, wt, 1e-5f, ot);
          }
          EXPECT_TRUE(c.status().ok()) << msg(c);
          std::vector<float> all = x;
          all.insert(all.end(), res.begin(), res.end());
          all.insert(all.end(), out.begin(), out.end());
          return all;
        };
        got[i] = run(*fused[i], true);
        want[i] = run(*plain[i], false);
      });
    }
    for (std::thread& t : threads) t.join();
    for (int r = 0; r < size; ++r) {
      EXPECT_EQ(got[static_cast<size_t>(r)], want[static_cast<size_t>(r)])
          << "size " << size << " rank " << r;
      EXPECT_EQ(got[static_cast<size_t>(r)], got[0]);
    }
  }
}

TEST(CpuCommunicator, MismatchedShapesFailOnEveryRankWithoutHanging) {
  auto comms = create_cpu_communicators(2);
  on_ranks(comms, [&](Communicator& c) {
    std::vector<float> x(static_cast<size_t>(c.rank() + 1), 1.0f);
    Tensor t(x.data(), DType::kF32, {static_cast<int64_t>(x.size())});
    c.all_reduce_sum(t);
    EXPECT_FALSE(c.status().ok());
    EXPECT_NE(msg(c).find("different"), std::string::npos) << msg(c);
  });
}

TEST(CpuCommunicator, SendRecvPassesTensorsInOrder) {
  auto comms = create_cpu_communicators(3);
  on_ranks(comms, [&](Communicator& c) {
    // A ring: each rank sends 4 tensors to the next and receives from the previous.
    const int next = (c.rank() + 1) % 3, prev = (c.rank() + 2) % 3;
    for (int k = 0; k < 4; ++k) {
      std::vector<int32_t> out = {c.rank(), k}, in(2, -1);
      Tensor to(out.data(), DType::kI32, {2}), from(in.data(), DType::kI32, {2});
      c.send(to, next);
      c.recv(from, prev);
      EXPECT_EQ(in[0], prev);
      EXPECT_EQ(in[1], k);
    }
    EXPECT_TRUE(c.status().ok());
  });
}

TEST(CpuCommunicator, RecvOfTheWrongSizeAndBadPeersFail) {
  auto comms = create_cpu_communicators(2);
  on_ranks(comms, [&](Communicator& c) {
    std::vector<float> buf(4, 0.0f);
    if (c.rank() == 0) {
      Tensor t(buf.data(), DType::kF32, {4});
      c.send(t, 1);
      c.send(t, 0);
      EXPECT_NE(msg(c).find("peer 0"), std::string::npos) << msg(c);
    } else {
      Tensor t(buf.data(), DType::kF32, {2});
      c.recv(t, 0);
      EXPECT_NE(msg(c).find("16 bytes sent, 8 expected"), std::string::npos) << msg(c);
    }
  });
}

using Comms = std::vector<std::unique_ptr<Communicator>>;
constexpr auto kLimit = std::chrono::seconds(20);

// Runs waiter(comm) for each of `waiters` on a thread of its own, lets them
// block, aborts the group from rank `aborter`'s communicator, and checks that
// every waiter returned and that every rank's status names the abort.
void expect_abort_releases(std::shared_ptr<Comms> comms, std::vector<int> waiters, int aborter,
                           std::function<void(Communicator&)> waiter) {
  EXPECT_TRUE(test::finishes_within(kLimit, [=] {
    std::vector<std::thread> threads;
    for (int r : waiters) threads.emplace_back([=] { waiter(*(*comms)[static_cast<size_t>(r)]); });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let them block
    (*comms)[static_cast<size_t>(aborter)]->abort("rank 9 failed: out of memory");
    for (std::thread& t : threads) t.join();
    for (const auto& c : *comms) EXPECT_EQ(msg(*c), "aborted: rank 9 failed: out of memory");
    // Later ops return at once, also where no peer will ever come.
    std::vector<float> x(4, 1.0f);
    Tensor t(x.data(), DType::kF32, {4});
    for (const auto& c : *comms) {
      c->all_reduce_sum(t);
      c->send(t, (c->rank() + 1) % c->size());
      c->recv(t, (c->rank() + 1) % c->size());
    }
    // A second abort keeps the first reason.
    (*comms)[0]->abort("again");
    EXPECT_EQ(msg(*(*comms)[0]), "aborted: rank 9 failed: out of memory");
  }));
}

TEST(CpuCommunicator, AbortReleasesRanksWaitingInAllReduce) {
  // Ranks 0 and 1 wait for rank 2, which never comes; rank 2's thread aborts.
  auto comms = std::make_shared<Comms>(create_cpu_communicators(3));
  expect_abort_releases(comms, {0, 1}, 2, [](Communicator& c) {
    std::vector<float> x(8, 1.0f);
    Tensor t(x.data(), DType::kF32, {8});
    c.all_reduce_sum(t);
  });
}

TEST(CpuCommunicator, AbortReleasesARankMidAllReduce) {
  // Rank 1 leaves after the first of the two all-reduces; rank 0 is waiting
  // in the second when the abort comes from a thread of no rank.
  auto comms = std::make_shared<Comms>(create_cpu_communicators(2));
  EXPECT_TRUE(test::finishes_within(kLimit, [comms] {
    std::thread r1([comms] {
      std::vector<float> x(8, 1.0f);
      Tensor t(x.data(), DType::kF32, {8});
      (*comms)[1]->all_reduce_sum(t);
      EXPECT_EQ(x[0], 2.0f);
    });
    std::thread r0([comms] {
      std::vector<float> x(8, 1.0f);
      Tensor t(x.data(), DType::kF32, {8});
      (*comms)[0]->all_reduce_sum(t);
      (*comms)[0]->all_reduce_sum(t);
    });
    r1.join();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (*comms)[1]->abort("stop");
    r0.join();
    EXPECT_EQ(msg(*(*comms)[0]), "aborted: stop");
  }));
}

TEST(CpuCommunicator, AbortReleasesASendToAFullMailbox) {
  // The first send fills rank 1's mailbox; the second waits for a recv that
  // never comes.
  auto comms = std::make_shared<Comms>(create_cpu_communicators(2));
  expect_abort_releases(comms, {0}, 1, [](Communicator& c) {
    std::vector<float> x(4, 1.0f);
    Tensor t(x.data(), DType::kF32, {4});
    c.send(t, 1);
    c.send(t, 1);
  });
}

TEST(CpuCommunicator, AbortReleasesARecvWithNothingSent) {
  auto comms = std::make_shared<Comms>(create_cpu_communicators(2));
  expect_abort_releases(comms, {1}, 0, [](Communicator& c) {
    std::vector<float> x(4, 1.0f);
    Tensor t(x.data(), DType::kF32, {4});
    c.recv(t, 0);
  });
}

TEST(CpuCommunicator, AnEarlierFailureOutlivesTheAbort) {
  auto comms = create_cpu_communicators(2);
  std::vector<float> x(4, 0.0f);
  Tensor t(x.data(), DType::kF32, {4});
  comms[0]->send(t, 0);  // not another rank
  comms[1]->abort("gone");
  EXPECT_NE(msg(*comms[0]).find("peer 0"), std::string::npos) << msg(*comms[0]);
  EXPECT_EQ(msg(*comms[1]), "aborted: gone");
}

}  // namespace
}  // namespace pagoda
