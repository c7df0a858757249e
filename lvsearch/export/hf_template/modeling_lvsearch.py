"""An lvsearch encoder (slots of registered ops with ELC-BERT layer mixing) for Hugging Face
transformers.

Written by ``lvsearch export`` next to the op code it ships: ``base.py`` and one module per op
(``sa.py``, ``ff.py``, ``dc.py``, ``local.py``, ... copied byte for byte from ``lvsearch/ops``)
and ``ops_index.py``, which imports them (``OPS``: op code -> spec with the layer and its
builder). The folder imports only torch and transformers, so it loads with
``trust_remote_code=True`` on a machine without lvsearch. Each slot's layer *is* lvsearch's
layer class (same code, same parameter names ``layers.{n-1}.<lvsearch name>``); this file adds
the embeddings, mixing, output stage and heads, whose blocks marked ``# Adapted from
lvsearch.X [sha:...]`` differ from their source on purpose (tests/test_hf_template_copies.py
checks the markers). lvsearch's parity tests check hidden states and MLM logits against
``lvsearch.model.Encoder`` (float32, eval mode, to 1e-5) for every registered op.

Model (LV-BERT, Yu et al. 2021, appendix A; ELC-BERT, Charpentier & Samuel 2023):

- embeddings: word (V x E) [+ learned absolute positions], LayerNorm, dropout, then a linear
  projection E -> H when E != H. Output ``h_0``. There are no token-type embeddings.
- slot ``n`` = 1..N: ``x_n = sum_{i in inputs[n]} softmax(mixing_logits[n-1, inputs[n]])_i h_i``
  (a single input is passed through), then ``h_n = op_n(x_n)`` with the op's own residual and
  LayerNorm: post-LN ``LN(x + drop(f(x)))`` or pre-LN ``x + drop(f(LN(x)))``.
- output: ``h_N`` or, with ``weighted_output``, ``sum_i softmax(output_mixing_logits)_i h_i``;
  then a final LayerNorm under pre-LN.
- MLM head: dense H -> E, GELU, LayerNorm, decoder tied to the word embeddings, plus a bias.

``attention_mask`` follows transformers: ``(B, L)``, 1 = real token, 0 = padding; None = no
padding. ``hidden_states`` (with ``output_hidden_states=True``) are ``h_0 .. h_N`` (N + 1
tensors of ``(B, L, H)``); ``last_hidden_state`` is the output above (after the final
LayerNorm / weighted output), so under pre-LN or weighted output it differs from ``h_N``.
"""

from dataclasses import dataclass
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn import BCEWithLogitsLoss, CrossEntropyLoss, MSELoss
from transformers import PreTrainedModel
from transformers.modeling_outputs import (
    BaseModelOutput,
    MaskedLMOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.utils import ModelOutput

from .configuration_lvsearch import LvsearchConfig
from .ops_index import OPS, SlotLayer

try:  # transformers >= 5: init functions that skip weights already loaded from a checkpoint
    from transformers import initialization as _init
except ImportError:  # pragma: no cover
    _init = nn.init


def _copy_into(param, value):
    """Set a fresh parameter to ``value`` (skipped by transformers >= 5 for loaded weights)."""
    if hasattr(_init, "copy_"):
        _init.copy_(param, value)
    else:  # pragma: no cover
        with torch.no_grad():
            param.copy_(value)


def _op_dims(config):
    """The model sizes an op's ``build`` reads (``base.DIMS_FIELDS``, lvsearch's ``ModelDims``
    names), from the config. Fresh relative biases start at zero (``_init_weights``)."""
    return SimpleNamespace(hidden=config.hidden_size, heads=config.num_attention_heads,
                           ff_inner=config.intermediate_size, conv_kernel=config.conv_kernel_size,
                           dropout=config.hidden_dropout_prob, pre_ln=config.pre_ln,
                           ff_activation=config.ff_activation, position=config.position,
                           relative_buckets=config.relative_buckets,
                           relative_max_distance=config.relative_max_distance, relative_init="zero")


class LvsearchEmbeddings(nn.Module):
    """``input_ids (B, L)`` -> ``h_0 (B, L, H)``."""

    def __init__(self, config):
        super().__init__()
        self.max_len = config.max_position_embeddings
        self.word_embeddings = nn.Embedding(config.vocab_size, config.embedding_size)
        self.position_embeddings = (nn.Embedding(config.max_position_embeddings, config.embedding_size)
                                    if config.position == "absolute" else None)
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.projection = (nn.Linear(config.embedding_size, config.hidden_size)
                           if config.embedding_size != config.hidden_size else None)

    # Adapted from lvsearch.model.embeddings.Embeddings.forward [sha:970170a867cd] (inputs_embeds; ValueError)
    def forward(self, input_ids=None, inputs_embeds=None):
        x = self.word_embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        length = x.shape[1]
        if length > self.max_len:
            raise ValueError(f"sequence length {length} exceeds max_position_embeddings {self.max_len}")
        if self.position_embeddings is not None:
            x = x + self.position_embeddings(torch.arange(length, device=x.device))
        x = self.dropout(self.LayerNorm(x))
        return self.projection(x) if self.projection is not None else x


class LvsearchMLMHead(nn.Module):
    """``dense`` (H -> E), GELU, ``LayerNorm``, ``decoder`` (E -> V, tied to the word
    embeddings) + ``bias``."""

    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(config.embedding_size, config.vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    # Adapted from lvsearch.model.heads.MLMHead.forward [sha:cc063a7db49d] (the decoder is a tied nn.Linear)
    def forward(self, hidden):
        """``hidden (..., H)`` -> logits ``(..., V)``."""
        return self.decoder(self.LayerNorm(F.gelu(self.dense(hidden)))) + self.bias


class LvsearchPreTrainedModel(PreTrainedModel):
    """Weight initialisation and the transformers plumbing shared by every lvsearch head."""

    config_class = LvsearchConfig
    base_model_prefix = "lvsearch"
    supports_gradient_checkpointing = False
    _no_split_modules = [spec.layer.__name__ for spec in OPS.values()]

    # Adapted from lvsearch.model.encoder._init_weights [sha:52b2b44c0877] (std from the config; mixing and biases)
    def _init_weights(self, module):
        """BERT init for fresh weights (normal(0, initializer_range), zero biases, unit LayerNorm);
        ELC mixing logits biased towards the previous output; an op's own parameters (SA's
        relative bias) and the MLM bias zero."""
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Conv1d)):
            _init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                _init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            _init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, nn.LayerNorm):
            _init.ones_(module.weight)
            _init.zeros_(module.bias)
        elif isinstance(module, SlotLayer):  # parameters an op holds itself (SA's relative bias) start at zero
            for p in module.parameters(recurse=False):
                _init.zeros_(p)
        elif isinstance(module, LvsearchMLMHead):
            _init.zeros_(module.bias)
        elif isinstance(module, LvsearchModel):
            n = len(module.layers)
            if module.mixing_logits is not None:
                _copy_into(module.mixing_logits, torch.eye(n))
            if module.output_mixing_logits is not None:
                last = torch.zeros(n + 1)
                last[-1] = 1.0
                _copy_into(module.output_mixing_logits, last)


class LvsearchModel(LvsearchPreTrainedModel):
    """The encoder (``AutoModel``): ``input_ids (B, L)`` -> :class:`BaseModelOutput` with
    ``last_hidden_state (B, L, H)`` and, on request, ``hidden_states = (h_0, .., h_N)``."""

    def __init__(self, config):
        super().__init__(config)
        n = len(config.ops)
        self.embeddings = LvsearchEmbeddings(config)
        dims = _op_dims(config)
        sizes = getattr(config, "op_sizes", None) or [{}] * n
        self.layers = nn.ModuleList([OPS[op].build(dims, **s) for op, s in zip(config.ops, sizes)])
        mixes = any(len(inp) > 1 for inp in config.inputs)
        self.mixing_logits = nn.Parameter(torch.eye(n)) if mixes else None
        self.output_mixing_logits = nn.Parameter(torch.zeros(n + 1)) if config.weighted_output else None
        self.final_LayerNorm = (nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
                                if config.pre_ln else None)
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings.word_embeddings

    def set_input_embeddings(self, value):
        self.embeddings.word_embeddings = value

    # Adapted from lvsearch.model.mixing.LayerMixing.forward [sha:019e336fed6c] (one shared matrix of mixing logits)
    def _mix(self, n, inputs, states):
        if len(inputs) == 1:
            return states[inputs[0]]
        w = torch.softmax(self.mixing_logits[n - 1, list(inputs)], dim=0)
        x = None
        for j, i in enumerate(inputs):
            h = states[i]
            if self.config.mixing_normalized:
                h = F.layer_norm(h, h.shape[-1:], eps=self.config.layer_norm_eps)
            term = w[j].to(h.dtype) * h
            x = term if x is None else x + term
        return x

    # Adapted from lvsearch.model.mixing.OutputMixing.forward [sha:5b8fe9bf51e9] (the weighted output, inlined)
    # Adapted from lvsearch.model.encoder._Backbone.finish [sha:974a41aee7d0] (output mixture, final LayerNorm)
    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, output_attentions=None, output_hidden_states=None, return_dict=None, **kwargs):
        """Args:
            input_ids: ``(B, L)`` token ids (or ``inputs_embeds (B, L, E)``).
            attention_mask: ``(B, L)``, 1/True = real token, 0/False = padding; None = no padding.
            token_type_ids, position_ids: accepted for API compatibility and ignored (the model has
                no segment embeddings; positions are always ``0..L-1``).
            output_attentions: not supported (attentions are None).

        Raises:
            ValueError: neither or both of ``input_ids`` / ``inputs_embeds``; L > max length.
        """
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids and inputs_embeds")
        output_hidden_states = (output_hidden_states if output_hidden_states is not None
                                else self.config.output_hidden_states)
        return_dict = return_dict if return_dict is not None else getattr(self.config, "return_dict", True)
        mask = None if attention_mask is None else (attention_mask != 0)
        states = [self.embeddings(input_ids, inputs_embeds)]
        for n, (layer, inputs) in enumerate(zip(self.layers, self.config.inputs), start=1):
            states.append(layer(self._mix(n, inputs, states), mask))
        if self.output_mixing_logits is not None:
            w = torch.softmax(self.output_mixing_logits, dim=0)
            x = None
            for j, h in enumerate(states):
                term = w[j].to(h.dtype) * h
                x = term if x is None else x + term
        else:
            x = states[-1]
        if self.final_LayerNorm is not None:
            x = self.final_LayerNorm(x)
        hidden_states = tuple(states) if output_hidden_states else None
        if not return_dict:
            return tuple(v for v in (x, hidden_states) if v is not None)
        return BaseModelOutput(last_hidden_state=x, hidden_states=hidden_states, attentions=None)


class LvsearchForMaskedLM(LvsearchPreTrainedModel):
    """Encoder + MLM head (``AutoModelForMaskedLM``, ``pipeline("fill-mask")``).

    ``labels (B, L)``: target ids, -100 = not predicted; loss = mean cross-entropy."""

    _tied_weights_keys = {"lm_head.decoder.weight": "lvsearch.embeddings.word_embeddings.weight"}

    def __init__(self, config):
        super().__init__(config)
        self.lvsearch = LvsearchModel(config)
        self.lm_head = LvsearchMLMHead(config)
        self.post_init()

    def get_output_embeddings(self):
        return self.lm_head.decoder

    def set_output_embeddings(self, new_embeddings):
        self.lm_head.decoder = new_embeddings

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, labels=None, output_attentions=None, output_hidden_states=None,
                return_dict=None, **kwargs):
        """-> :class:`MaskedLMOutput`: ``logits (B, L, V)``, ``loss`` when ``labels`` is given."""
        return_dict = return_dict if return_dict is not None else getattr(self.config, "return_dict", True)
        out = self.lvsearch(input_ids, attention_mask, inputs_embeds=inputs_embeds,
                            output_hidden_states=output_hidden_states, return_dict=True)
        logits = self.lm_head(out.last_hidden_state)
        loss = None
        if labels is not None:
            loss = CrossEntropyLoss()(logits.view(-1, logits.shape[-1]).float(), labels.view(-1).to(logits.device))
        if not return_dict:
            rest = (logits,) + ((out.hidden_states,) if out.hidden_states is not None else ())
            return ((loss,) + rest) if loss is not None else rest
        return MaskedLMOutput(loss=loss, logits=logits, hidden_states=out.hidden_states, attentions=None)


class LvsearchForSequenceClassification(LvsearchPreTrainedModel):
    """Encoder + dropout + linear on the first (``[CLS]``) position (no pooler, as lvsearch's
    own fine-tuning). ``labels (B,)``: class ids, floats for ``num_labels == 1`` (regression) or
    ``(B, num_labels)`` multi-hot (multi-label); the loss follows ``config.problem_type``."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.lvsearch = LvsearchModel(config)
        p = config.classifier_dropout if config.classifier_dropout is not None else 0.1
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, labels=None, output_attentions=None, output_hidden_states=None,
                return_dict=None, **kwargs):
        """-> :class:`SequenceClassifierOutput`: ``logits (B, num_labels)``."""
        return_dict = return_dict if return_dict is not None else getattr(self.config, "return_dict", True)
        out = self.lvsearch(input_ids, attention_mask, inputs_embeds=inputs_embeds,
                            output_hidden_states=output_hidden_states, return_dict=True)
        logits = self.classifier(self.dropout(out.last_hidden_state[:, 0]))
        loss = None
        if labels is not None:
            labels = labels.to(logits.device)
            if self.config.problem_type is None:
                if self.num_labels == 1:
                    self.config.problem_type = "regression"
                elif labels.dtype in (torch.long, torch.int):
                    self.config.problem_type = "single_label_classification"
                else:
                    self.config.problem_type = "multi_label_classification"
            if self.config.problem_type == "regression":
                loss = MSELoss()(logits.squeeze(-1).float(), labels.float().view(-1))
            elif self.config.problem_type == "single_label_classification":
                loss = CrossEntropyLoss()(logits.view(-1, self.num_labels).float(), labels.view(-1))
            else:
                loss = BCEWithLogitsLoss()(logits.float(), labels.float())
        if not return_dict:
            rest = (logits,) + ((out.hidden_states,) if out.hidden_states is not None else ())
            return ((loss,) + rest) if loss is not None else rest
        return SequenceClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states, attentions=None)


class LvsearchForTokenClassification(LvsearchPreTrainedModel):
    """Encoder + dropout + linear per token. ``labels (B, L)``: class ids, -100 = ignored."""

    def __init__(self, config):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.lvsearch = LvsearchModel(config)
        p = config.classifier_dropout if config.classifier_dropout is not None else 0.1
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, labels=None, output_attentions=None, output_hidden_states=None,
                return_dict=None, **kwargs):
        """-> :class:`TokenClassifierOutput`: ``logits (B, L, num_labels)``."""
        return_dict = return_dict if return_dict is not None else getattr(self.config, "return_dict", True)
        out = self.lvsearch(input_ids, attention_mask, inputs_embeds=inputs_embeds,
                            output_hidden_states=output_hidden_states, return_dict=True)
        logits = self.classifier(self.dropout(out.last_hidden_state))
        loss = None
        if labels is not None:
            loss = CrossEntropyLoss()(logits.view(-1, self.num_labels).float(), labels.view(-1).to(logits.device))
        if not return_dict:
            rest = (logits,) + ((out.hidden_states,) if out.hidden_states is not None else ())
            return ((loss,) + rest) if loss is not None else rest
        return TokenClassifierOutput(loss=loss, logits=logits, hidden_states=out.hidden_states, attentions=None)


@dataclass
class LvsearchForPreTrainingOutput(ModelOutput):
    """Output of :class:`LvsearchForPreTraining`: ``logits (B, L)`` = replaced-token scores
    (> 0: predicted replaced), ``loss`` when ``labels`` is given, ``hidden_states``."""

    loss: torch.FloatTensor = None
    logits: torch.FloatTensor = None
    hidden_states: tuple = None
    attentions: tuple = None


class LvsearchDiscriminatorHead(nn.Module):
    """ELECTRA replaced-token-detection head: ``dense`` (H -> H), GELU, ``dense_prediction`` (H -> 1)."""

    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dense_prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden):
        return self.dense_prediction(F.gelu(self.dense(hidden))).squeeze(-1)


class LvsearchForPreTraining(LvsearchPreTrainedModel):
    """ELECTRA discriminator (``AutoModelForPreTraining``): encoder + replaced-token-detection
    head (Clark et al. 2020). ``labels (B, L)``: 1 = replaced, 0 = original; the loss is the
    binary cross-entropy over real (unmasked) tokens."""

    def __init__(self, config):
        super().__init__(config)
        self.lvsearch = LvsearchModel(config)
        self.discriminator_predictions = LvsearchDiscriminatorHead(config)
        self.post_init()

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, position_ids=None,
                inputs_embeds=None, labels=None, output_attentions=None, output_hidden_states=None,
                return_dict=None, **kwargs):
        return_dict = return_dict if return_dict is not None else getattr(self.config, "return_dict", True)
        out = self.lvsearch(input_ids, attention_mask, inputs_embeds=inputs_embeds,
                            output_hidden_states=output_hidden_states, return_dict=True)
        logits = self.discriminator_predictions(out.last_hidden_state)
        loss = None
        if labels is not None:
            real = torch.ones_like(logits, dtype=torch.bool) if attention_mask is None else attention_mask != 0
            loss = BCEWithLogitsLoss()(logits[real].float(), labels.to(logits.device)[real].float())
        if not return_dict:
            rest = (logits,) + ((out.hidden_states,) if out.hidden_states is not None else ())
            return ((loss,) + rest) if loss is not None else rest
        return LvsearchForPreTrainingOutput(loss=loss, logits=logits, hidden_states=out.hidden_states)


__all__ = ["LvsearchModel", "LvsearchForMaskedLM", "LvsearchForSequenceClassification",
           "LvsearchForTokenClassification", "LvsearchForPreTraining", "LvsearchPreTrainedModel"]
