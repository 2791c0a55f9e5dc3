// c10d process groups from the torchrun environment (data_parallel.h). Gloo needs gloo's headers (Debian
// libgloo-dev; LibTorch links libgloo itself); NCCL needs a CUDA LibTorch built with it. Without them a run with
// WORLD_SIZE > 1 stops with a line saying what the build lacks.
#include "optimized/train/data_parallel.h"

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>

#if defined(USE_C10D_GLOO) && __has_include(<gloo/context.h>) && \
    __has_include(<torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#define STATECUT_HAVE_GLOO 1
#endif
#if defined(USE_C10D_NCCL) && __has_include(<torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>) && \
    __has_include(<nccl.h>) && __has_include(<c10/cuda/CUDAFunctions.h>)
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#define STATECUT_HAVE_NCCL 1
#endif

namespace statecut {
namespace {

[[noreturn]] void dp_fail(const std::string& msg) { throw std::runtime_error("data parallel: " + msg); }

int env_int(const char* name, int dflt, bool required) {
  const char* v = std::getenv(name);
  if (!v || !*v) {
    if (required) dp_fail(std::string(name) + " is not set (torchrun sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)");
    return dflt;
  }
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > 1 << 20) dp_fail(std::string(name) + "='" + v + "' is not a non-negative integer");
  return static_cast<int>(x);
}

#if defined(STATECUT_HAVE_GLOO) || defined(STATECUT_HAVE_NCCL)
template <class PG>
class C10dGroup final : public DataParallel {
 public:
  C10dGroup(c10::intrusive_ptr<PG> pg, int rank, int world, std::string backend)
      : pg_(std::move(pg)), rank_(rank), world_(world), backend_(std::move(backend)) {}
  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  void all_reduce_sum(torch::Tensor& t) override {
    std::vector<at::Tensor> v{t};
    pg_->allreduce(v)->wait();
  }
  void barrier() override { pg_->barrier()->wait(); }
  std::string backend() const override { return backend_; }

 private:
  c10::intrusive_ptr<PG> pg_;
  int rank_, world_;
  std::string backend_;
};

c10::intrusive_ptr<c10d::Store> rendezvous(int rank, int world) {
  const char* addr = std::getenv("MASTER_ADDR");
  if (!addr || !*addr) dp_fail("MASTER_ADDR is not set (torchrun sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)");
  const int port = env_int("MASTER_PORT", 0, true);
  if (port <= 0 || port > 65535) dp_fail("MASTER_PORT=" + std::to_string(port) + " is not a port");
  c10d::TCPStoreOptions o;
  o.port = static_cast<std::uint16_t>(port);
  o.isServer = rank == 0;
  o.numWorkers = static_cast<std::size_t>(world);
  o.waitWorkers = true;
  o.timeout = std::chrono::milliseconds(300000);
  try {
    return c10::make_intrusive<c10d::TCPStore>(std::string(addr), o);
  } catch (const std::exception& e) {
    const std::string m = e.what();
    dp_fail(std::string("rendezvous at ") + addr + ":" + std::to_string(port) + " failed: " + m.substr(0, m.find('\n')));
  }
}
#endif

}  // namespace

torch::Device local_cuda_device() {
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env_int("LOCAL_RANK", 0, false)));
}

std::unique_ptr<DataParallel> data_parallel_from_env(const torch::Device& device) {
  const int world = env_int("WORLD_SIZE", 1, false);
  if (world <= 1) return nullptr;
  const int rank = env_int("RANK", 0, true);
  if (rank >= world) dp_fail("RANK=" + std::to_string(rank) + " is not below WORLD_SIZE=" + std::to_string(world));
#if defined(STATECUT_HAVE_NCCL)
  if (device.is_cuda()) {
    c10::cuda::set_device(device.index());
    auto store = rendezvous(rank, world);
    auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world, c10d::ProcessGroupNCCL::Options::create());
    return std::make_unique<C10dGroup<c10d::ProcessGroupNCCL>>(pg, rank, world, "nccl");
  }
#endif
#if defined(STATECUT_HAVE_GLOO)
  auto store = rendezvous(rank, world);
  auto opts = c10d::ProcessGroupGloo::Options::create();
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  const std::string addr = std::getenv("MASTER_ADDR");
  if (ifname && *ifname) {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  } else if (addr == "127.0.0.1" || addr == "localhost") {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, opts);
  return std::make_unique<C10dGroup<c10d::ProcessGroupGloo>>(pg, rank, world, "gloo");
#else
  (void)device;
  dp_fail("WORLD_SIZE=" + std::to_string(world) +
       " but this build has no c10d backend for it (Gloo needs gloo's headers: Debian libgloo-dev; NCCL a CUDA "
       "LibTorch built with it)");
#endif
}

}  // namespace statecut
