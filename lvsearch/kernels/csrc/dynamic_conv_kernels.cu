// Fused lightweight dynamic convolution for the DC layer, (batch, length, hidden) layout.
//
// Wu et al. 2019, "Pay Less Attention with Lightweight and Dynamic Convolutions";
// LV-BERT appendix A, eq. 15-16. With d = hidden / heads, left = (K - 1) / 2 and h = c / d:
//
//   p[b, t, h, :]  = softmax(weights[b, t, h, :])            (or the weights as given)
//   out[b, t, c]   = sum_k p[b, t, h, k] * vm[b, t + k - left, c]
//   vm             = value with padding positions (mask == 0) and out-of-range positions zeroed
//
// What each kernel fuses (one pass over its inputs, no intermediate tensor in global memory):
//   forward          softmax over the K taps (fp32, or fp64 for double) + padding mask +
//                    windowed weighted sum; optionally writes p for the backward.
//   backward_value   grad_vm gathered per source position (no atomics) + padding mask.
//   backward_weights per-tap dot products over the head's channels (warp shuffle reduction,
//                    fixed order, no atomics) + the softmax backward.
// Everything is deterministic: each output element is written by exactly one thread.
//
// Pure CUDA C++ (no torch headers): compiled by nvcc alone and called through the C ABI in
// dynamic_conv_launch.h, so a CPU machine with nvcc can compile-check it.
// K is a template parameter (3, 5, 7, 9, 15, 31); any other K returns LVDC_BAD_KERNEL_SIZE.

#ifdef LVDC_HOST_EMULATION
// Tests only (tests/kernel_emulation/): the same kernels compiled as host C++ and run on the
// CPU, one std::thread per CUDA thread, to check their indexing without a GPU.
#include "lvdc_host_emulation.h"
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define LVDC_DYNAMIC_SMEM(name) extern __shared__ unsigned char name[]
#define LVDC_LAUNCH(kernel, grid, block, smem, stream, ...) kernel<<<grid, block, smem, stream>>>(__VA_ARGS__)
#endif

#include "dynamic_conv_launch.h"

namespace {

// ---------------------------------------------------------------------------------------
// element types: T in memory, A (accumulation) in registers

template <typename T> struct Acc { using type = float; };
template <> struct Acc<double> { using type = double; };

__device__ __forceinline__ float to_acc(float x) { return x; }
__device__ __forceinline__ double to_acc(double x) { return x; }
__device__ __forceinline__ float to_acc(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_acc(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T from_acc(typename Acc<T>::type x);
template <> __device__ __forceinline__ float from_acc<float>(float x) { return x; }
template <> __device__ __forceinline__ double from_acc<double>(double x) { return x; }
template <> __device__ __forceinline__ __half from_acc<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

__device__ __forceinline__ float exp_acc(float x) { return expf(x); }
__device__ __forceinline__ double exp_acc(double x) { return exp(x); }

// ---------------------------------------------------------------------------------------
// tiling

constexpr int kChannels = 128;       // threads per block in forward / backward_value: one channel each
constexpr int kMaxTile = 32;         // positions per block in forward / backward_value
constexpr int kWarpsPerBlock = 8;    // backward_weights: one warp per (b, t, h)
constexpr size_t kSmemBudget = 48 * 1024;

// Heads that a block of kChannels consecutive channels starting anywhere can touch.
inline int64_t max_heads_per_block(int64_t hidden, int64_t heads) {
  int64_t d = hidden / heads;
  int64_t n = (kChannels + d - 1) / d + 1;
  return n < heads ? n : heads;
}

// ---------------------------------------------------------------------------------------
// forward
//
// grid.x = batch * n_tiles (position tiles of `tile` rows), grid.y = channel chunks of
// kChannels; block = kChannels threads. The block first computes p for its positions and the
// heads its channels touch into shared memory; then each thread walks its channel down the
// tile keeping a K-wide window of values in registers, so every value is read from global
// memory once per block (plus K - 1 halo rows).

template <typename T, int K>
__global__ void __launch_bounds__(kChannels)
forward_kernel(const T* __restrict__ value, const T* __restrict__ weights,
               const uint8_t* __restrict__ mask, T* __restrict__ out,
               typename Acc<T>::type* __restrict__ probs_out, int64_t length, int64_t hidden,
               int64_t heads, int64_t n_tiles, int tile, bool softmax) {
  using A = typename Acc<T>::type;
  constexpr int left = (K - 1) / 2;
  LVDC_DYNAMIC_SMEM(smem_raw);
  A* p_smem = reinterpret_cast<A*>(smem_raw);  // [tile][nh][K]

  const int64_t b = blockIdx.x / n_tiles;
  const int64_t t0 = (blockIdx.x % n_tiles) * tile;
  const int64_t c0 = static_cast<int64_t>(blockIdx.y) * kChannels;
  const int64_t d = hidden / heads;
  const int64_t c_last = (c0 + kChannels < hidden ? c0 + kChannels : hidden) - 1;
  const int64_t h_lo = c0 / d;
  const int nh = static_cast<int>(c_last / d - h_lo + 1);

  for (int r = threadIdx.x; r < tile * nh; r += blockDim.x) {
    const int tt = r / nh;
    const int64_t t = t0 + tt;
    const int64_t h = h_lo + r % nh;
    A* p = p_smem + static_cast<int64_t>(r) * K;
    if (t >= length) {
#pragma unroll
      for (int k = 0; k < K; ++k) p[k] = A(0);
      continue;
    }
    const T* w = weights + ((b * length + t) * heads + h) * K;
    A x[K];
#pragma unroll
    for (int k = 0; k < K; ++k) x[k] = to_acc(w[k]);
    if (softmax) {
      A m = x[0];
#pragma unroll
      for (int k = 1; k < K; ++k) m = x[k] > m ? x[k] : m;
      A s = A(0);
#pragma unroll
      for (int k = 0; k < K; ++k) {
        x[k] = exp_acc(x[k] - m);
        s += x[k];
      }
      const A inv = A(1) / s;
#pragma unroll
      for (int k = 0; k < K; ++k) x[k] *= inv;
    }
#pragma unroll
    for (int k = 0; k < K; ++k) p[k] = x[k];
    // Each head's p is written by the block that holds the head's first channel.
    if (probs_out != nullptr && h * d >= c0) {
      A* po = probs_out + ((b * length + t) * heads + h) * K;
#pragma unroll
      for (int k = 0; k < K; ++k) po[k] = x[k];
    }
  }
  __syncthreads();

  const int64_t c = c0 + threadIdx.x;
  if (c >= hidden) return;
  const int hh = static_cast<int>(c / d - h_lo);
  const T* vcol = value + b * length * hidden + c;
  const uint8_t* m = mask == nullptr ? nullptr : mask + b * length;
  auto load = [&](int64_t s) -> A {
    if (s < 0 || s >= length) return A(0);
    if (m != nullptr && m[s] == 0) return A(0);
    return to_acc(vcol[s * hidden]);
  };

  A win[K];  // win[k] = vm[t + k - left]
#pragma unroll
  for (int k = 0; k < K - 1; ++k) win[k] = load(t0 - left + k);
  const int64_t t_end = t0 + tile < length ? t0 + tile : length;
  for (int64_t t = t0; t < t_end; ++t) {
    win[K - 1] = load(t + K - 1 - left);
    const A* p = p_smem + ((t - t0) * nh + hh) * K;
    A acc = A(0);
#pragma unroll
    for (int k = 0; k < K; ++k) acc += p[k] * win[k];
    out[(b * length + t) * hidden + c] = from_acc<T>(acc);
#pragma unroll
    for (int k = 0; k < K - 1; ++k) win[k] = win[k + 1];
  }
}

// ---------------------------------------------------------------------------------------
// backward, value
//
// Same grid as the forward. Source position s receives from the outputs t = s - k + left,
// k = 0..K-1, i.e. t in [s - right, s + left]: each thread walks its channel keeping a K-wide
// window of grad_out in registers and reads p (fp32) from global memory, where every thread of
// a head reads the same address.

template <typename T, int K>
__global__ void __launch_bounds__(kChannels)
backward_value_kernel(const T* __restrict__ grad_out, const typename Acc<T>::type* __restrict__ probs,
                      const uint8_t* __restrict__ mask, T* __restrict__ grad_value,
                      int64_t length, int64_t hidden, int64_t heads, int64_t n_tiles, int tile) {
  using A = typename Acc<T>::type;
  constexpr int left = (K - 1) / 2;
  constexpr int right = K - 1 - left;

  const int64_t b = blockIdx.x / n_tiles;
  const int64_t s0 = (blockIdx.x % n_tiles) * tile;
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kChannels + threadIdx.x;
  if (c >= hidden) return;
  const int64_t d = hidden / heads;
  const int64_t h = c / d;
  const T* gcol = grad_out + b * length * hidden + c;
  const A* pb = probs + (b * length * heads + h) * K;  // p[t, k] = pb[t * heads * K + k]
  const int64_t p_row = heads * K;
  auto load = [&](int64_t t) -> A {
    return (t < 0 || t >= length) ? A(0) : to_acc(gcol[t * hidden]);
  };

  A win[K];  // win[j] = grad_out[s - right + j], read with tap k = K - 1 - j
#pragma unroll
  for (int j = 0; j < K - 1; ++j) win[j] = load(s0 - right + j);
  const int64_t s_end = s0 + tile < length ? s0 + tile : length;
  for (int64_t s = s0; s < s_end; ++s) {
    win[K - 1] = load(s + left);
    A acc = A(0);
#pragma unroll
    for (int j = 0; j < K; ++j) {
      const int64_t t = s - right + j;
      if (t >= 0 && t < length) acc += win[j] * pb[t * p_row + (K - 1 - j)];
    }
    if (mask != nullptr && mask[b * length + s] == 0) acc = A(0);
    grad_value[(b * length + s) * hidden + c] = from_acc<T>(acc);
#pragma unroll
    for (int j = 0; j < K - 1; ++j) win[j] = win[j + 1];
  }
}

// ---------------------------------------------------------------------------------------
// backward, weights (or logits)
//
// grid.x = batch * ceil(length / kWarpsPerBlock), grid.y = heads; one warp per (b, t, h).
// Lanes stride over the head's d channels accumulating the K tap products, then a butterfly
// shuffle reduction (same order on every run, same result on every lane); lane k writes tap k.

template <typename T, int K>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
backward_weights_kernel(const T* __restrict__ grad_out, const T* __restrict__ value,
                        const typename Acc<T>::type* __restrict__ probs,
                        const uint8_t* __restrict__ mask, T* __restrict__ grad_weights,
                        int64_t length, int64_t hidden, int64_t heads, int64_t n_tiles,
                        bool softmax) {
  static_assert(K <= 32, "one lane per tap");
  using A = typename Acc<T>::type;
  constexpr int left = (K - 1) / 2;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int64_t b = blockIdx.x / n_tiles;
  const int64_t t = (blockIdx.x % n_tiles) * kWarpsPerBlock + warp;
  if (t >= length) return;
  const int64_t h = blockIdx.y;
  const int64_t d = hidden / heads;

  unsigned valid = 0;  // bit k: source position t + k - left is in range and not padding
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t s = t + k - left;
    if (s >= 0 && s < length && (mask == nullptr || mask[b * length + s] != 0)) valid |= 1u << k;
  }

  A acc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) acc[k] = A(0);
  const T* g = grad_out + (b * length + t) * hidden + h * d;
  const T* v = value + b * length * hidden + h * d;  // row s of the head: v[s * hidden + j]
  for (int64_t j = lane; j < d; j += 32) {
    const A gv = to_acc(g[j]);
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (valid & (1u << k)) acc[k] += gv * to_acc(v[(t + k - left) * hidden + j]);
  }
#pragma unroll
  for (int k = 0; k < K; ++k)
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc[k] += __shfl_xor_sync(0xffffffffu, acc[k], off);

  const A* p = probs + ((b * length + t) * heads + h) * K;
  A dot = A(0);
  if (softmax) {
#pragma unroll
    for (int k = 0; k < K; ++k) dot += p[k] * acc[k];
  }
  T* gw = grad_weights + ((b * length + t) * heads + h) * K;
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (lane == k) gw[k] = from_acc<T>(softmax ? p[k] * (acc[k] - dot) : acc[k]);
}

// ---------------------------------------------------------------------------------------
// launchers

inline int launch_status() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? LVDC_OK : static_cast<int>(e);
}

inline int check_shape(int64_t batch, int64_t length, int64_t hidden, int64_t heads) {
  if (batch < 0 || length < 0 || hidden < 1 || heads < 1 || hidden % heads != 0) return LVDC_BAD_SHAPE;
  return LVDC_OK;
}

template <typename T, int K>
int forward_t(const void* value, const void* weights, const uint8_t* mask, void* out, void* probs_out,
              int64_t batch, int64_t length, int64_t hidden, int64_t heads, int softmax, cudaStream_t stream) {
  using A = typename Acc<T>::type;
  const int64_t nh = max_heads_per_block(hidden, heads);
  int tile = kMaxTile;
  while (tile > 1 && static_cast<size_t>(tile) * nh * K * sizeof(A) > kSmemBudget) tile /= 2;
  const size_t smem = static_cast<size_t>(tile) * nh * K * sizeof(A);
  if (smem > kSmemBudget) return LVDC_BAD_SHAPE;
  const int64_t n_tiles = (length + tile - 1) / tile;
  const dim3 grid(static_cast<unsigned>(batch * n_tiles), static_cast<unsigned>((hidden + kChannels - 1) / kChannels));
  const auto kernel = forward_kernel<T, K>;
  LVDC_LAUNCH(kernel, grid, kChannels, smem, stream,
      static_cast<const T*>(value), static_cast<const T*>(weights), mask, static_cast<T*>(out),
      static_cast<A*>(probs_out), length, hidden, heads, n_tiles, tile, softmax != 0);
  return launch_status();
}

template <typename T, int K>
int backward_value_t(const void* grad_out, const void* probs, const uint8_t* mask, void* grad_value,
                     int64_t batch, int64_t length, int64_t hidden, int64_t heads, cudaStream_t stream) {
  using A = typename Acc<T>::type;
  const int tile = kMaxTile;
  const int64_t n_tiles = (length + tile - 1) / tile;
  const dim3 grid(static_cast<unsigned>(batch * n_tiles), static_cast<unsigned>((hidden + kChannels - 1) / kChannels));
  const auto kernel = backward_value_kernel<T, K>;
  LVDC_LAUNCH(kernel, grid, kChannels, 0, stream,
      static_cast<const T*>(grad_out), static_cast<const A*>(probs), mask, static_cast<T*>(grad_value),
      length, hidden, heads, n_tiles, tile);
  return launch_status();
}

template <typename T, int K>
int backward_weights_t(const void* grad_out, const void* value, const void* probs, const uint8_t* mask,
                       void* grad_weights, int64_t batch, int64_t length, int64_t hidden, int64_t heads,
                       int softmax, cudaStream_t stream) {
  using A = typename Acc<T>::type;
  const int64_t n_tiles = (length + kWarpsPerBlock - 1) / kWarpsPerBlock;
  const dim3 grid(static_cast<unsigned>(batch * n_tiles), static_cast<unsigned>(heads));
  const auto kernel = backward_weights_kernel<T, K>;
  LVDC_LAUNCH(kernel, grid, kWarpsPerBlock * 32, 0, stream,
      static_cast<const T*>(grad_out), static_cast<const T*>(value), static_cast<const A*>(probs), mask,
      static_cast<T*>(grad_weights), length, hidden, heads, n_tiles, softmax != 0);
  return launch_status();
}

// Dispatch on (dtype, K): the only place that lists the instantiated kernel sizes.
#define LVDC_DISPATCH_K(FN, T, k, ...)          \
  switch (k) {                                  \
    case 3: return FN<T, 3>(__VA_ARGS__);       \
    case 5: return FN<T, 5>(__VA_ARGS__);       \
    case 7: return FN<T, 7>(__VA_ARGS__);       \
    case 9: return FN<T, 9>(__VA_ARGS__);       \
    case 15: return FN<T, 15>(__VA_ARGS__);     \
    case 31: return FN<T, 31>(__VA_ARGS__);     \
    default: return LVDC_BAD_KERNEL_SIZE;       \
  }

#define LVDC_DISPATCH(FN, dtype, k, ...)                                           \
  switch (dtype) {                                                                 \
    case LVDC_F32: LVDC_DISPATCH_K(FN, float, k, __VA_ARGS__)                      \
    case LVDC_F16: LVDC_DISPATCH_K(FN, __half, k, __VA_ARGS__)                     \
    case LVDC_BF16: LVDC_DISPATCH_K(FN, __nv_bfloat16, k, __VA_ARGS__)             \
    case LVDC_F64: LVDC_DISPATCH_K(FN, double, k, __VA_ARGS__)                     \
    default: return LVDC_BAD_DTYPE;                                                \
  }

}  // namespace

extern "C" {

int lvdc_supported_kernel_size(int k) {
  return k == 3 || k == 5 || k == 7 || k == 9 || k == 15 || k == 31;
}

const char* lvdc_status_string(int status) {
  switch (status) {
    case LVDC_OK: return "ok";
    case LVDC_BAD_KERNEL_SIZE: return "unsupported kernel size (instantiated: " LVDC_KERNEL_SIZES_STR ")";
    case LVDC_BAD_DTYPE: return "unsupported dtype (float32, float16, bfloat16, float64)";
    case LVDC_BAD_SHAPE: return "bad shape (hidden must be divisible by heads, and a head's kernels must fit in shared memory)";
    default: return status > 0 ? cudaGetErrorString(static_cast<cudaError_t>(status)) : "unknown status";
  }
}

int lvdc_forward(int dtype, int k, const void* value, const void* weights, const uint8_t* mask,
                 void* out, void* probs_out, int64_t batch, int64_t length, int64_t hidden,
                 int64_t heads, int softmax, void* stream) {
  if (!lvdc_supported_kernel_size(k)) return LVDC_BAD_KERNEL_SIZE;
  if (int rc = check_shape(batch, length, hidden, heads)) return rc;
  if (batch == 0 || length == 0) return LVDC_OK;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  LVDC_DISPATCH(forward_t, dtype, k, value, weights, mask, out, probs_out, batch, length, hidden, heads, softmax, s)
}

int lvdc_backward_value(int dtype, int k, const void* grad_out, const void* probs,
                        const uint8_t* mask, void* grad_value, int64_t batch, int64_t length,
                        int64_t hidden, int64_t heads, void* stream) {
  if (!lvdc_supported_kernel_size(k)) return LVDC_BAD_KERNEL_SIZE;
  if (int rc = check_shape(batch, length, hidden, heads)) return rc;
  if (batch == 0 || length == 0) return LVDC_OK;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  LVDC_DISPATCH(backward_value_t, dtype, k, grad_out, probs, mask, grad_value, batch, length, hidden, heads, s)
}

int lvdc_backward_weights(int dtype, int k, const void* grad_out, const void* value,
                          const void* probs, const uint8_t* mask, void* grad_weights,
                          int64_t batch, int64_t length, int64_t hidden, int64_t heads,
                          int softmax, void* stream) {
  if (!lvdc_supported_kernel_size(k)) return LVDC_BAD_KERNEL_SIZE;
  if (int rc = check_shape(batch, length, hidden, heads)) return rc;
  if (batch == 0 || length == 0) return LVDC_OK;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  LVDC_DISPATCH(backward_weights_t, dtype, k, grad_out, value, probs, mask, grad_weights, batch, length,
                hidden, heads, softmax, s)
}

}  // extern "C"
