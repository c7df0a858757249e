"""Convolution kernels used by the DC layer.

:func:`lvsearch.kernels.dynamic_conv.dynamic_conv` is the single dispatch point for the
lightweight dynamic convolution: a PyTorch reference implementation today, a fused CUDA
extension later (sources would live in ``kernels/csrc/``).
"""

from lvsearch.kernels.dynamic_conv import dynamic_conv, dynamic_conv_torch

__all__ = ["dynamic_conv", "dynamic_conv_torch"]
