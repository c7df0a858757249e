// Host emulation of the small CUDA subset used by lvsearch/kernels/csrc/dynamic_conv_kernels.cu,
// so the kernels' indexing and maths can be tested on a machine without a GPU.
//
// Compiled as C++20 with -DLVDC_HOST_EMULATION (see tests/test_dc_kernel.py). A launch runs the
// grid's blocks one after another on the calling thread; each CUDA thread of a block is a
// fiber (ucontext) with its own stack, switched at __syncthreads and __shfl_xor_sync, which
// exchanges values through a per-warp buffer. The block's dynamic shared memory is one buffer
// reused by consecutive blocks. float16 / bfloat16 are stored as their 16-bit patterns
// (round-to-nearest-even conversions), as on the GPU. Not a CUDA simulator: memory ordering,
// coalescing, occupancy and launch limits are not modelled. Single-threaded by design (the
// test machines are small and shared).
#pragma once

#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

typedef void* cudaStream_t;
enum cudaError_t { cudaSuccess = 0 };
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline const char* cudaGetErrorString(cudaError_t) { return "host emulation"; }

// ---- 16-bit float types

struct __half { uint16_t bits; };
struct __nv_bfloat16 { uint16_t bits; };

inline float __half2float(__half h) {
  _Float16 f;
  std::memcpy(&f, &h.bits, 2);
  return static_cast<float>(f);
}
inline __half __float2half_rn(float x) {
  _Float16 f = static_cast<_Float16>(x);  // round to nearest even
  __half h;
  std::memcpy(&h.bits, &f, 2);
  return h;
}
inline float __bfloat162float(__nv_bfloat16 b) {
  uint32_t u = static_cast<uint32_t>(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline __nv_bfloat16 __float2bfloat16_rn(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  __nv_bfloat16 b;
  if (std::isnan(x)) {
    b.bits = 0x7fc0;
  } else {
    u += 0x7fffu + ((u >> 16) & 1u);
    b.bits = static_cast<uint16_t>(u >> 16);
  }
  return b;
}

// ---- launch state: one fiber (ucontext) per CUDA thread, all on the calling OS thread

namespace lvdc_emu {

inline dim3 thread_idx, block_idx, block_dim, grid_dim;

constexpr size_t kStack = 64 * 1024;

struct Fiber {
  ucontext_t ctx;
  std::vector<char> stack = std::vector<char>(kStack);
  bool done = false;
  unsigned shuffles = 0;
};

struct Block {
  ucontext_t scheduler;
  std::vector<std::unique_ptr<Fiber>> fibers;
  unsigned current = 0;
  std::function<void()> body;
  std::vector<unsigned char> smem;
  std::vector<double> warp_slots;  // 2 buffers x 32 lanes per warp
};
inline Block block;

inline void yield() {
  Fiber& f = *block.fibers[block.current];
  swapcontext(&f.ctx, &block.scheduler);
  thread_idx = dim3(block.current);  // restored when resumed
}

inline void fiber_main() {
  block.body();
  block.fibers[block.current]->done = true;
}  // returns to uc_link = the scheduler

// Run the grid's blocks one after another; in a block, resume every live fiber in turn until it
// yields (barrier or shuffle) or finishes, and repeat until all have finished. A sweep brings
// every live thread to its next synchronisation point, which is __syncthreads' guarantee.
template <typename Kernel, typename... Args>
void launch(Kernel kernel, dim3 grid, dim3 threads, size_t smem, Args... args) {
  const unsigned n = threads.x;
  while (block.fibers.size() < n) block.fibers.push_back(std::make_unique<Fiber>());
  block.smem.assign(smem + 16, 0);
  block.warp_slots.assign(((n + 31) / 32) * 2 * 32, 0.0);
  block.body = [=] { kernel(args...); };
  block_dim = threads;
  grid_dim = grid;
  for (unsigned by = 0; by < grid.y; ++by) {
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      block_idx = dim3(bx, by);
      for (unsigned t = 0; t < n; ++t) {
        Fiber& f = *block.fibers[t];
        f.done = false;
        f.shuffles = 0;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack.data();
        f.ctx.uc_stack.ss_size = f.stack.size();
        f.ctx.uc_link = &block.scheduler;
        makecontext(&f.ctx, fiber_main, 0);
      }
      for (unsigned live = n; live > 0;) {
        live = 0;
        for (unsigned t = 0; t < n; ++t) {
          Fiber& f = *block.fibers[t];
          if (f.done) continue;
          block.current = t;
          thread_idx = dim3(t);
          swapcontext(&block.scheduler, &f.ctx);
          live += !f.done;
        }
      }
    }
  }
}

inline unsigned char* dynamic_smem() { return block.smem.data(); }

}  // namespace lvdc_emu

#define threadIdx (lvdc_emu::thread_idx)
#define blockIdx (lvdc_emu::block_idx)
#define blockDim (lvdc_emu::block_dim)
#define gridDim (lvdc_emu::grid_dim)

inline void __syncthreads() { lvdc_emu::yield(); }

// Two exchange buffers used alternately: a lane writes buffer b, yields (all lanes of the
// warp write in the same sweep), then reads its partner's value; the next shuffle uses the
// other buffer, and buffer b is written again only after every lane has read it.
template <typename V>
V __shfl_xor_sync(unsigned /*mask*/, V v, int lane_mask) {
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned buffer = lvdc_emu::block.fibers[threadIdx.x]->shuffles++ % 2;
  double* slots = lvdc_emu::block.warp_slots.data() + (2 * warp + buffer) * 32;
  slots[lane] = static_cast<double>(v);
  lvdc_emu::yield();
  return static_cast<V>(slots[lane ^ static_cast<unsigned>(lane_mask)]);
}

#define LVDC_DYNAMIC_SMEM(name) unsigned char* name = lvdc_emu::dynamic_smem()
#define LVDC_LAUNCH(kernel, grid, threads, smem, stream, ...) \
  lvdc_emu::launch(kernel, dim3(grid), dim3(threads), (smem), __VA_ARGS__)
