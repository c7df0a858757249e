"""Convolution kernels used by the DC layer.

:func:`lvsearch.kernels.dynamic_conv.dynamic_conv` and
:func:`~lvsearch.kernels.dynamic_conv.dynamic_conv_softmax` are the dispatch points for the
lightweight dynamic convolution: the PyTorch reference implementation, or a fused CUDA
extension (sources in ``kernels/csrc/``, built on first use by
:func:`load_extension`, from :mod:`lvsearch.kernels._extension`) for CUDA tensors. ``$LVSEARCH_DC_IMPL`` forces either.
"""

from lvsearch.kernels._extension import load_extension
from lvsearch.kernels.dynamic_conv import (
    IMPL_ENV,
    SUPPORTED_KERNEL_SIZES,
    dynamic_conv,
    dynamic_conv_cuda,
    dynamic_conv_softmax,
    dynamic_conv_torch,
)

__all__ = ["IMPL_ENV", "SUPPORTED_KERNEL_SIZES", "dynamic_conv", "dynamic_conv_cuda",
           "dynamic_conv_softmax", "dynamic_conv_torch", "load_extension"]
