"""Models: ELC mixing, the one-architecture Encoder and the Supernet (the slot ops are in
:mod:`lvsearch.ops`)."""

from lvsearch.model.dims import ModelDims
from lvsearch.model.encoder import Encoder, flops_per_token
from lvsearch.model.mixing import LayerMixing, OutputMixing, alpha_matrix
from lvsearch.model.supernet import Supernet

__all__ = [
    "ModelDims", "Encoder", "Supernet", "flops_per_token", "alpha_matrix",
    "LayerMixing", "OutputMixing",
]
