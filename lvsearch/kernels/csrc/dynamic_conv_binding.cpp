// PyTorch binding of the fused dynamic-convolution kernels (dynamic_conv_kernels.cu).
//
// Checks devices, dtypes, shapes and contiguity, allocates outputs and calls the C-ABI
// launchers on the current CUDA stream of the tensors' device. The autograd wiring lives in
// Python (lvsearch/kernels/dynamic_conv.py, _FusedDynamicConv); see there for the maths.
//
// Error messages are built from strings only (std::to_string, Device::str, c10::toString):
// streaming a number into a TORCH_CHECK message segfaulted (cuda-gdb: in
// std::ostream::_M_insert<long>, inside this extension's .so) when it was built on the H200
// device image (CXX=/opt/gcc/bin/g++ wrapper, gcc 13.3, torch 2.11), where the .so defines
// libstdc++'s stream code itself (nm) and apparently uses locale state nobody initialised.
// Inserting strings does not touch the locale; messages here therefore never format numbers.

#include <torch/extension.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>
#include <vector>

#include "dynamic_conv_launch.h"

namespace {

int dtype_code(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return LVDC_F32;
    case at::kHalf: return LVDC_F16;
    case at::kBFloat16: return LVDC_BF16;
    case at::kDouble: return LVDC_F64;
    default: TORCH_CHECK(false, "lvsearch dynamic_conv: unsupported dtype ", c10::toString(t),
                         " (float32, float16, bfloat16, float64)");
  }
  return -1;
}

at::ScalarType probs_dtype(at::ScalarType t) { return t == at::kDouble ? at::kDouble : at::kFloat; }

void check_status(int rc, const char* what) {
  TORCH_CHECK(rc == LVDC_OK, "lvsearch dynamic_conv ", what, ": ", lvdc_status_string(rc));
}

void check_cuda(const at::Tensor& x, const char* name, const at::Tensor& like) {
  TORCH_CHECK(x.is_cuda(), "lvsearch dynamic_conv: ", name, " must be a CUDA tensor");
  TORCH_CHECK(x.device() == like.device(), "lvsearch dynamic_conv: ", name, " is on ", x.device().str(),
              ", expected ", like.device().str());
  TORCH_CHECK(x.is_contiguous(), "lvsearch dynamic_conv: ", name, " must be contiguous");
}

const uint8_t* mask_ptr(const std::optional<at::Tensor>& mask, const at::Tensor& value) {
  if (!mask.has_value()) return nullptr;
  const at::Tensor& m = *mask;
  check_cuda(m, "padding_mask", value);
  TORCH_CHECK(m.scalar_type() == at::kBool, "lvsearch dynamic_conv: padding_mask must be bool");
  TORCH_CHECK(m.dim() == 2 && m.size(0) == value.size(0) && m.size(1) == value.size(1),
              "lvsearch dynamic_conv: padding_mask must be (batch, length)");
  return reinterpret_cast<const uint8_t*>(m.data_ptr<bool>());
}

// value (B, L, H), weights (B, L, heads, K) of the same dtype.
void check_pair(const at::Tensor& value, const at::Tensor& weights) {
  check_cuda(value, "value", value);
  check_cuda(weights, "weights", value);
  TORCH_CHECK(value.dim() == 3 && weights.dim() == 4, "lvsearch dynamic_conv: expected value (B, L, H) and weights (B, L, heads, K)");
  TORCH_CHECK(weights.size(0) == value.size(0) && weights.size(1) == value.size(1),
              "lvsearch dynamic_conv: weights and value differ in (B, L)");
  TORCH_CHECK(value.size(2) % weights.size(2) == 0, "lvsearch dynamic_conv: hidden not divisible by heads");
  TORCH_CHECK(value.scalar_type() == weights.scalar_type(), "lvsearch dynamic_conv: value and weights dtypes differ");
}

void* stream_of(const at::Tensor& x) {
  return static_cast<void*>(c10::cuda::getCurrentCUDAStream(x.device().index()).stream());
}

}  // namespace

// Returns (out, probs); probs is (B, L, heads, K) fp32 (fp64 for double) when save_probs, else empty.
std::vector<at::Tensor> dc_forward(const at::Tensor& value, const at::Tensor& weights,
                                   const std::optional<at::Tensor>& mask, bool softmax, bool save_probs) {
  check_pair(value, weights);
  const c10::cuda::CUDAGuard guard(value.device());
  const int k = static_cast<int>(weights.size(3));
  TORCH_CHECK(lvdc_supported_kernel_size(k), "lvsearch dynamic_conv: kernel size ", std::to_string(k),
              " is not instantiated (supported: " LVDC_KERNEL_SIZES_STR ")");
  at::Tensor out = at::empty_like(value);
  at::Tensor probs = save_probs ? at::empty(weights.sizes(), weights.options().dtype(probs_dtype(value.scalar_type())))
                                : at::Tensor();
  check_status(lvdc_forward(dtype_code(value.scalar_type()), k, value.data_ptr(), weights.data_ptr(),
                            mask_ptr(mask, value), out.data_ptr(), save_probs ? probs.data_ptr() : nullptr,
                            value.size(0), value.size(1), value.size(2), weights.size(2), softmax ? 1 : 0,
                            stream_of(value)),
               "forward");
  return {out, probs};
}

at::Tensor dc_backward_value(const at::Tensor& grad_out, const at::Tensor& probs,
                             const std::optional<at::Tensor>& mask) {
  check_cuda(grad_out, "grad_out", grad_out);
  check_cuda(probs, "probs", grad_out);
  TORCH_CHECK(grad_out.dim() == 3 && probs.dim() == 4, "lvsearch dynamic_conv: bad backward shapes");
  TORCH_CHECK(probs.scalar_type() == probs_dtype(grad_out.scalar_type()), "lvsearch dynamic_conv: probs dtype");
  const c10::cuda::CUDAGuard guard(grad_out.device());
  at::Tensor grad_value = at::empty_like(grad_out);
  check_status(lvdc_backward_value(dtype_code(grad_out.scalar_type()), static_cast<int>(probs.size(3)),
                                   grad_out.data_ptr(), probs.data_ptr(), mask_ptr(mask, grad_out),
                                   grad_value.data_ptr(), grad_out.size(0), grad_out.size(1),
                                   grad_out.size(2), probs.size(2), stream_of(grad_out)),
               "backward (value)");
  return grad_value;
}

at::Tensor dc_backward_weights(const at::Tensor& grad_out, const at::Tensor& value, const at::Tensor& probs,
                               const std::optional<at::Tensor>& mask, bool softmax) {
  check_cuda(grad_out, "grad_out", value);
  check_cuda(value, "value", value);
  check_cuda(probs, "probs", value);
  TORCH_CHECK(grad_out.sizes() == value.sizes() && grad_out.scalar_type() == value.scalar_type(),
              "lvsearch dynamic_conv: grad_out must match value");
  TORCH_CHECK(probs.dim() == 4 && probs.scalar_type() == probs_dtype(value.scalar_type()),
              "lvsearch dynamic_conv: bad probs");
  const c10::cuda::CUDAGuard guard(value.device());
  at::Tensor grad_weights = at::empty(probs.sizes(), value.options());
  check_status(lvdc_backward_weights(dtype_code(value.scalar_type()), static_cast<int>(probs.size(3)),
                                     grad_out.data_ptr(), value.data_ptr(), probs.data_ptr(),
                                     mask_ptr(mask, value), grad_weights.data_ptr(), value.size(0),
                                     value.size(1), value.size(2), probs.size(2), softmax ? 1 : 0,
                                     stream_of(value)),
               "backward (weights)");
  return grad_weights;
}

bool dc_supported_kernel_size(int64_t k) { return lvdc_supported_kernel_size(static_cast<int>(k)) != 0; }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "lvsearch fused lightweight dynamic convolution (CUDA)";
  m.def("forward", &dc_forward, "fused softmax + windowed weighted sum; returns (out, probs)",
        py::arg("value"), py::arg("weights"), py::arg("padding_mask"), py::arg("softmax"), py::arg("save_probs"));
  m.def("backward_value", &dc_backward_value, "gradient w.r.t. the value", py::arg("grad_out"),
        py::arg("probs"), py::arg("padding_mask"));
  m.def("backward_weights", &dc_backward_weights, "gradient w.r.t. the weights / logits",
        py::arg("grad_out"), py::arg("value"), py::arg("probs"), py::arg("padding_mask"), py::arg("softmax"));
  m.def("supported_kernel_size", &dc_supported_kernel_size, py::arg("k"));
}
