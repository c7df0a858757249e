"""Models: SA/FF/DC layers, ELC mixing, the one-architecture Encoder and the Supernet."""

from lvsearch.model.dims import ModelDims
from lvsearch.model.encoder import Encoder, flops_per_token
from lvsearch.model.layers import DynamicConv, FeedForward, SelfAttention, make_layer
from lvsearch.model.mixing import LayerMixing, OutputMixing, alpha_matrix
from lvsearch.model.supernet import Supernet

__all__ = [
    "ModelDims", "Encoder", "Supernet", "flops_per_token", "alpha_matrix",
    "SelfAttention", "FeedForward", "DynamicConv", "make_layer", "LayerMixing", "OutputMixing",
]
