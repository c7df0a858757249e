// C ABI between the CUDA kernels (dynamic_conv_kernels.cu, compiled by nvcc alone, no torch
// headers) and the PyTorch binding (dynamic_conv_binding.cpp, compiled by the host compiler).
//
// Layout, for all launchers (row-major, contiguous):
//   value, out, grad_out, grad_value : (batch, length, hidden)            element type `dtype`
//   weights, grad_weights            : (batch, length, heads, K)          element type `dtype`
//   probs                            : (batch, length, heads, K)          float32, or float64 when dtype is F64
//   mask                             : (batch, length) bytes, nonzero = real token; NULL = no padding
// hidden must be divisible by heads; K must be one of LVDC_KERNEL_SIZES.
//
// Every launcher returns 0 on success, a negative lvdc_status for a rejected argument, or a
// positive cudaError_t when the launch failed; lvdc_status_string() describes any of them.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum lvdc_dtype { LVDC_F32 = 0, LVDC_F16 = 1, LVDC_BF16 = 2, LVDC_F64 = 3 };

enum lvdc_status {
  LVDC_OK = 0,
  LVDC_BAD_KERNEL_SIZE = -1,
  LVDC_BAD_DTYPE = -2,
  LVDC_BAD_SHAPE = -3,
};

// The instantiated kernel sizes, for messages: "3, 5, 7, 9, 15, 31".
#define LVDC_KERNEL_SIZES_STR "3, 5, 7, 9, 15, 31"

// 1 when K is instantiated, else 0.
int lvdc_supported_kernel_size(int k);

const char* lvdc_status_string(int status);

// out = windowed sum of the masked values weighted by p, where p = softmax over the K taps of
// `weights` (softmax != 0) or `weights` itself (softmax == 0). When probs_out is not NULL, p is
// also written there (for the backward). `stream` is a cudaStream_t.
int lvdc_forward(int dtype, int k, const void* value, const void* weights, const uint8_t* mask,
                 void* out, void* probs_out, int64_t batch, int64_t length, int64_t hidden,
                 int64_t heads, int softmax, void* stream);

// grad_value[b, s, c] = mask[b, s] * sum_k grad_out[b, s - k + left, c] * probs[b, s - k + left, c / d, k]
int lvdc_backward_value(int dtype, int k, const void* grad_out, const void* probs,
                        const uint8_t* mask, void* grad_value, int64_t batch, int64_t length,
                        int64_t hidden, int64_t heads, void* stream);

// gp[b, t, h, k] = sum over the head's channels c of grad_out[b, t, c] * masked value[b, t + k - left, c];
// grad_weights = probs * (gp - sum_k probs * gp) when softmax != 0, else gp.
int lvdc_backward_weights(int dtype, int k, const void* grad_out, const void* value,
                          const void* probs, const uint8_t* mask, void* grad_weights,
                          int64_t batch, int64_t length, int64_t hidden, int64_t heads,
                          int softmax, void* stream);

#ifdef __cplusplus
}
#endif
