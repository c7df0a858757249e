"""Configuration of an lvsearch encoder exported for Hugging Face transformers.

Written by ``lvsearch export``; self-contained (imports only transformers and the op index
shipped next to it), so the exported folder loads with ``trust_remote_code=True`` on a machine
without lvsearch.

An lvsearch architecture is a list of N *slots*. Slot ``n`` (1-based) runs one operation,
``ops[n-1]``, the code of an op the folder ships (``ops_index.OPS``: e.g. ``SA`` multi-head
self-attention, ``FF`` feed-forward, ``DC`` span-based dynamic convolution of LV-BERT, Yu et
al. 2021, ``LA`` local self-attention), on a mixture of earlier outputs
``inputs[n-1]`` (a subset of ``0..n-1``, 0 = embedding output; ELC-BERT layer mixing,
Charpentier & Samuel 2023). ``inputs[n-1] == [n-1]`` everywhere is the plain stack.
``op_sizes[n-1]`` holds the layer sizes of slot ``n``'s variant (e.g. ``{"heads": 2}``,
``{"inner": 512}``, ``{"kernel": 3}``; ``{}`` = the op at the sizes above), the keywords of
the op module's ``build``.
"""

from transformers import PretrainedConfig

from .ops_index import OPS


class LvsearchConfig(PretrainedConfig):
    """Sizes and switches of one exported lvsearch encoder.

    Args:
        vocab_size: V.
        hidden_size: H, width of every slot.
        embedding_size: E; the embeddings are projected E -> H when E != H (ELECTRA-style).
        intermediate_size: FF inner size.
        num_attention_heads: attention heads, and the DC layer's conv heads.
        conv_kernel_size: DC kernel width K (odd).
        max_position_embeddings: longest input (learned positions under ``position="absolute"``).
        hidden_dropout_prob: hidden and attention-probability dropout.
        pre_ln: pre-LN slots plus a final LayerNorm, instead of post-LN.
        ff_activation: ``"gelu"`` or ``"geglu"``.
        mixing_normalized: layer-normalise (no affine) each input before ELC mixing.
        weighted_output: the output is a learned softmax mixture of ``h_0 .. h_N``.
        position: ``"absolute"`` or ``"relative"`` (T5-style bucketed bias in every SA slot).
        relative_buckets, relative_max_distance: bucketing of relative distances.
        ops: op code per slot (a key of ``ops_index.OPS``).
        inputs: per slot, the indices of the earlier outputs it mixes.
        op_sizes: per slot, the layer sizes of its variant (``build`` keywords of its op
            module, e.g. ``{"heads": 2}``); None or ``{}`` = the sizes above.
        layer_norm_eps: LayerNorm epsilon (1e-12, BERT).
        initializer_range: std of the normal init of fresh weights.
        classifier_dropout: dropout before classification heads (None = 0.1, as lvsearch).

    Raises:
        ValueError: an op the folder does not ship, ops/inputs inconsistent, or sizes that do not fit together.
    """

    model_type = "lvsearch"

    def __init__(self, vocab_size=16384, hidden_size=256, embedding_size=128, intermediate_size=1024,
                 num_attention_heads=4, conv_kernel_size=9, max_position_embeddings=512, hidden_dropout_prob=0.1,
                 pre_ln=False, ff_activation="gelu", mixing_normalized=False, weighted_output=False,
                 position="absolute", relative_buckets=32, relative_max_distance=128, ops=("SA", "FF"),
                 inputs=None, op_sizes=None, layer_norm_eps=1e-12, initializer_range=0.02, classifier_dropout=None,
                 pad_token_id=0, tie_word_embeddings=True, **kwargs):
        kwargs.pop("num_hidden_layers", None)  # derived from ops
        ops = [str(op).upper() for op in ops]
        if inputs is None:
            inputs = [[n] for n in range(len(ops))]
        inputs = [sorted(int(i) for i in inp) for inp in inputs]
        if not ops or any(op not in OPS for op in ops):
            raise ValueError(f"ops must be a non-empty list of {tuple(OPS)}, got {ops}")
        if len(inputs) != len(ops):
            raise ValueError(f"{len(inputs)} input lists for {len(ops)} slots")
        for n, inp in enumerate(inputs, start=1):
            if not inp or any(i < 0 or i >= n for i in inp):
                raise ValueError(f"slot {n} may read outputs 0..{n - 1}, got {inp}")
        op_sizes = [dict(s or {}) for s in (op_sizes or [{}] * len(ops))]
        if len(op_sizes) != len(ops):
            raise ValueError(f"{len(op_sizes)} op_sizes for {len(ops)} slots")
        for n, (op, sizes) in enumerate(zip(ops, op_sizes), start=1):
            known = {e.name for e in OPS[op].elastic}
            if set(sizes) - known or any(not isinstance(v, int) or v < 1 for v in sizes.values()):
                raise ValueError(f"slot {n} ({op}): op_sizes {sizes} must map {sorted(known)} to positive integers")
        if hidden_size % num_attention_heads:
            raise ValueError(f"hidden_size {hidden_size} is not divisible by num_attention_heads {num_attention_heads}")
        if conv_kernel_size % 2 == 0:
            raise ValueError(f"conv_kernel_size must be odd, got {conv_kernel_size}")
        if ff_activation not in ("gelu", "geglu"):
            raise ValueError(f"unknown ff_activation {ff_activation!r}")
        if position not in ("absolute", "relative"):
            raise ValueError(f"unknown position {position!r}")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.embedding_size = embedding_size
        self.intermediate_size = intermediate_size
        self.num_attention_heads = num_attention_heads
        self.conv_kernel_size = conv_kernel_size
        self.max_position_embeddings = max_position_embeddings
        self.hidden_dropout_prob = hidden_dropout_prob
        self.pre_ln = pre_ln
        self.ff_activation = ff_activation
        self.mixing_normalized = mixing_normalized
        self.weighted_output = weighted_output
        self.position = position
        self.relative_buckets = relative_buckets
        self.relative_max_distance = relative_max_distance
        self.ops = ops
        self.inputs = inputs
        self.op_sizes = op_sizes
        self.num_hidden_layers = len(ops)
        self.layer_norm_eps = layer_norm_eps
        self.initializer_range = initializer_range
        self.classifier_dropout = classifier_dropout
        super().__init__(pad_token_id=pad_token_id, tie_word_embeddings=tie_word_embeddings, **kwargs)
