"""lvsearch: neural architecture search for BERT-style encoders.

Searches the order and type of layers (self-attention SA, feed-forward FF, dynamic
convolution DC; LV-BERT, Yu et al. 2021) together with ELC-BERT layer mixing
(Charpentier & Samuel 2023) over a weight-sharing supernet. See docs/architecture.md.
"""

__version__ = "0.1.0"

from lvsearch.errors import LvsearchError  # noqa: E402

__all__ = ["LvsearchError", "__version__", "load_model"]


def __getattr__(name: str):
    # Lazy export: ``lvsearch.load_model`` without importing torch at ``import lvsearch``.
    if name == "load_model":
        from lvsearch.modeldir import load_model

        return load_model
    raise AttributeError(f"module 'lvsearch' has no attribute {name!r}")
