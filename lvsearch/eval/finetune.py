"""Fine-tuning on sentence / sentence-pair classification and regression tasks (:func:`finetune_task`).

Tasks are read by :mod:`lvsearch.eval.tasks` (:func:`~lvsearch.eval.tasks.load_task`: a TSV folder or
a Hugging Face dataset); results are scored by :mod:`lvsearch.eval.finetune_metrics`.

Model: the pretrained Encoder, then dropout (0.1) and one linear layer on the ``[CLS]`` hidden
state — no pooler (lvsearch pretraining has no next-sentence objective that would train one).
The Encoder has no segment (token type) embeddings, so the two texts of a pair are told apart
only by the ``[SEP]`` between them. Optimiser: AdamW, linear warm-up over the first 10% of
steps then linear decay to 0, gradient clipping at 1.0, and optional layer-wise learning-rate
decay (LLRD; ELECTRA, Clark et al. 2020, appendix A "Fine-tuning details"): slot ``n`` of ``N``
trains with ``lr · d^(N−n)``, the embeddings with ``lr · d^N`` (the lowest), the classifier, the
ELC mixing logits and the output stage with ``lr``. Defaults were measured on lvsearch's own
encoders (docs/results.md, "Fine-tuning defaults"): lr ``1e-3 · 128 / hidden``
(:func:`default_lr`; ELECTRA's inverse-width scaling at a higher level), LLRD off (``d = 1``),
batch 32, 3 epochs, warm-up 10%, weight decay 0. ELECTRA-small's lr 3e-4 with LLRD 0.8 per
*slot* (0.8^12 = 0.07 at the embeddings of a 12-slot stack) left the train loss of these
encoders at ln 2.

A seed whose training loss did not fall (:func:`loss_did_not_fall`: last-epoch mean ≥ 0.98 ×
the loss of the best constant prediction) is marked ``failed`` with the reason and left out of
the aggregate; reports show a task whose every seed failed as :data:`FAILED_TEXT`.

Imbalanced classes (measured in docs/results.md, "Fine-tuning on imbalanced tasks"):
``class_weight`` ``auto`` (default) weights the cross-entropy by ``n / (K · n_k)`` (scikit-learn's
"balanced" weights) when the training labels are imbalanced (:func:`~lvsearch.eval.finetune_metrics.is_imbalanced`)
and not otherwise, so balanced tasks train exactly as before; ``balanced`` always, ``none`` never.
``sampler`` ``balanced`` instead draws each epoch's examples with replacement with probability
∝ ``1 / n_k`` (every class equally often); ``shuffle`` (default) is a permutation. A small
training set gets at least ``min_steps`` optimiser steps (:data:`MIN_STEPS`): the epoch count is
raised to ``ceil(min_steps / steps per epoch)``, at most :data:`MIN_STEPS_MAX_EPOCHS`, when
``epochs`` would give fewer; the warm-up and decay schedule spans the steps actually taken.

Each seed fine-tunes a fresh copy; the epoch with the best dev score is selected (not the last)
and evaluated on test: accuracy on balanced classification tasks, macro F1 on imbalanced ones
(binary included), Pearson for regression (:func:`primary_metric`, the same metric that the
floor verdict uses). Dev is scored after every epoch, or after every ``ceil(epochs / MAX_DEV_EVALS)``-th
epoch and the last when there are more than :data:`MAX_DEV_EVALS` epochs. Classification results
also carry per-class precision / recall / F1 (``dev_per_class``, ``test_per_class`` per seed,
``per_class`` over seeds) and the classes a seed never predicts. Results per seed and mean / std
(sample, ddof = 1) / median over seeds.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from lvsearch.errors import LvsearchError
from lvsearch.eval.finetune_metrics import (IMBALANCE_RATIO, class_metrics, is_imbalanced, metric_label, never_predicted,
                                            per_class_summary, primary_metric, seed_summary, task_metrics)
from lvsearch.eval.tasks import Example, TaskData

# --------------------------------------------------------------------------- training
LR_BASE = 1e-3
"""Default peak learning rate at :data:`LR_REF_WIDTH` (see :func:`default_lr`)."""
LR_REF_WIDTH = 128
"""Hidden width at which :data:`LR_BASE` was measured (the quickstart / retrain-quickstart width)."""
LOSS_FELL_FRACTION = 0.98
"""A seed fails when its last-epoch mean train loss is ≥ this fraction of the constant-prediction loss."""
FAILED_TEXT = "failed (loss did not fall)"
"""How reports show a task whose every fine-tuning seed failed (see :func:`loss_did_not_fall`)."""
MIN_STEPS = 300
"""Default least number of optimiser steps per seed (``FinetuneConfig.min_steps``; 0 = epochs
only): 3 epochs of a 1,500-example task are 141 steps at batch 32, which left the smallest class
unlearned; measured in docs/results.md, "Fine-tuning on imbalanced tasks"."""
MIN_STEPS_MAX_EPOCHS = 10
"""``min_steps`` raises the epoch count to at most this many (a 32-example set is not run for 300
epochs); ``--epochs`` itself is never lowered."""
MAX_DEV_EVALS = 10
"""At most about this many dev evaluations per seed: with more epochs, dev is scored every
``ceil(epochs / MAX_DEV_EVALS)``-th epoch and after the last."""
#: ``FinetuneConfig.class_weight`` values: ``auto`` = ``balanced`` on imbalanced training labels, else ``none``.
CLASS_WEIGHTS = ("auto", "balanced", "none")
#: ``FinetuneConfig.sampler`` values: ``shuffle`` = a permutation per epoch; ``balanced`` = classes drawn equally often.
SAMPLERS = ("shuffle", "balanced")


def default_lr(hidden: int) -> float:
    """Default peak fine-tuning learning rate for an encoder of width ``hidden``:
    ``LR_BASE · LR_REF_WIDTH / hidden`` (1e-3 at hidden 128, 5e-4 at 256, 1.7e-4 at 768).

    The inverse-width scaling is ELECTRA's own (3e-4 small / 1e-4 base at hidden 256 / 768,
    Clark et al. 2020, appendix A); the level was measured on lvsearch's CPU-budget encoders
    (docs/results.md, "Fine-tuning defaults"), which are far less pretrained than ELECTRA's and
    need a larger step. Raises LvsearchError for ``hidden < 1``.
    """
    if hidden < 1:
        raise LvsearchError(f"hidden width must be ≥ 1, got {hidden}", fix="pass the encoder's dims.hidden")
    return LR_BASE * LR_REF_WIDTH / hidden


def constant_loss(task_kind: str, labels: Sequence, num_outputs: int, class_weights: Sequence[float] | None = None,
                  balanced_sampler: bool = False) -> float:
    """Training loss of the best constant prediction, the level a run that learned nothing stays at.

    Classification: the entropy (nats) of the label frequencies in ``labels`` (ln 2 = 0.693 for
    two balanced classes; a class with no example contributes 0). Regression: the population
    variance of ``labels`` (the MSE of always predicting their mean). ``num_outputs`` is the
    number of classes (unused for regression). With ``class_weights`` (the weighted mean
    cross-entropy) or ``balanced_sampler`` (every present class drawn equally often) the
    frequencies are those the loss sees: ``n_k`` (1 per present class when balanced-sampled)
    times ``w_k``, normalised; ``balanced`` weights thus give ln K. Raises LvsearchError for an
    empty ``labels``.
    """
    if not labels:
        raise LvsearchError("no training labels to compute the constant-prediction loss", fix="add training examples")
    n = len(labels)
    if task_kind == "regression":
        mean = sum(labels) / n
        return sum((y - mean) ** 2 for y in labels) / n
    counts = [0.0] * num_outputs
    for y in labels:
        counts[y] += 1
    if balanced_sampler:
        counts = [1.0 if c else 0.0 for c in counts]
    if class_weights is not None:
        counts = [c * w for c, w in zip(counts, class_weights)]
    total = sum(counts)
    return -sum(c / total * math.log(c / total) for c in counts if c)


def balanced_class_weights(labels: Sequence[int], num_outputs: int) -> list[float]:
    """scikit-learn's "balanced" class weights ``n / (K · n_k)`` over the ``K`` classes present in
    ``labels`` (an absent class gets 1.0; it never occurs in the loss)."""
    counts = [0] * num_outputs
    for y in labels:
        counts[y] += 1
    present = sum(1 for c in counts if c)
    return [len(labels) / (present * c) if c else 1.0 for c in counts]


def loss_did_not_fall(loss_per_epoch: Sequence[float], baseline: float) -> str | None:
    """The failure reason when a fine-tuning run's training loss did not fall, else None.

    Rule: the mean train loss (nats for classification, MSE for regression; with dropout on) of
    the last epoch is ≥ :data:`LOSS_FELL_FRACTION` (0.98) × ``baseline``, the loss of the best
    constant prediction (:func:`constant_loss`). Such a run fitted its own training set no better
    than the class prior, so its dev/test score is the prior's (chance), not the encoder's.
    Raises LvsearchError for an empty ``loss_per_epoch``.
    """
    if not loss_per_epoch:
        raise LvsearchError("no train loss recorded", fix="fine-tune for at least one epoch")
    last = loss_per_epoch[-1]
    if not math.isfinite(last):
        return f"training loss did not fall: last-epoch mean train loss is {last}"
    if last >= LOSS_FELL_FRACTION * baseline:
        return (f"training loss did not fall: last-epoch mean train loss {last:.4f} ≥ {LOSS_FELL_FRACTION} × "
                f"{baseline:.4f}, the loss of the best constant prediction")
    return None


#: How the classifier reads the encoder: ``cls`` = the hidden state at position 0 ([CLS]);
#: ``mean`` = the mean of the hidden states over the non-padding positions.
POOLINGS = ("cls", "mean")


@dataclass
class FinetuneConfig:
    """Fine-tuning settings; defaults measured on lvsearch's encoders (docs/results.md,
    "Fine-tuning defaults"). ``lr=None`` means :func:`default_lr` of the encoder's width."""

    epochs: int = 3
    lr: float | None = None
    batch_size: int = 32
    max_len: int = 128
    seeds: Sequence[int] = (0, 1, 2)
    train_limit: int | None = None
    layer_decay: float = 1.0
    warmup_fraction: float = 0.1
    weight_decay: float = 0.0
    dropout: float = 0.1
    grad_clip: float = 1.0
    eval_batch_size: int = 128
    train_limit_seed: int = 0
    eval_limit: int | None = None
    pooling: str = "cls"
    class_weight: str = "auto"
    sampler: str = "shuffle"
    min_steps: int = MIN_STEPS

    def check(self) -> None:
        """Raises LvsearchError for out-of-range values."""
        for name in ("epochs", "batch_size", "max_len", "eval_batch_size"):
            if getattr(self, name) < 1:
                raise LvsearchError(f"--{name.replace('_', '-')} must be ≥ 1", fix="pass a positive integer")
        if self.lr is not None and not self.lr > 0:
            raise LvsearchError(f"--lr must be positive, got {self.lr}", fix="e.g. --lr 3e-4")
        if not 0 < self.layer_decay <= 1:
            raise LvsearchError(f"--layer-decay must be in (0, 1], got {self.layer_decay}", fix="e.g. 0.8 (1 = off)")
        if self.train_limit is not None and self.train_limit < 1:
            raise LvsearchError("--train-limit must be ≥ 1", fix="e.g. --train-limit 1000")
        if self.eval_limit is not None and self.eval_limit < 1:
            raise LvsearchError("--eval-limit must be ≥ 1", fix="e.g. --eval-limit 500")
        if not self.seeds:
            raise LvsearchError("no fine-tuning seeds", fix="e.g. --seeds 3")
        if self.pooling not in POOLINGS:
            raise LvsearchError(f"unknown --pooling {self.pooling!r}", fix=f"use one of {', '.join(POOLINGS)}")
        if self.class_weight not in CLASS_WEIGHTS:
            raise LvsearchError(f"unknown --class-weight {self.class_weight!r}", fix=f"use one of {', '.join(CLASS_WEIGHTS)}")
        if self.sampler not in SAMPLERS:
            raise LvsearchError(f"unknown --sampler {self.sampler!r}", fix=f"use one of {', '.join(SAMPLERS)}")
        if self.min_steps < 0:
            raise LvsearchError("--min-steps must be ≥ 0", fix="e.g. --min-steps 600 (0 = epochs only)")


def layerwise_param_groups(model, lr: float, decay: float, weight_decay: float = 0.0) -> list[dict]:
    """AdamW parameter groups with layer-wise LR decay for a :class:`SequenceClassifier`.

    Slot ``n`` of ``N``: ``lr · decay^(N−n)``; embeddings: ``lr · decay^N``; everything else
    trainable (classifier, ELC mixing logits, output mixing, final norm): ``lr``. The MLM head
    is frozen (not used by the classifier). ``weight_decay`` applies to matrices only.
    Each group has a ``depth`` entry (0 = top).
    """
    n_slots = model.encoder.num_slots
    groups: dict[tuple[int, bool], list] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if name.startswith("encoder.embeddings."):
            depth = n_slots
        elif name.startswith("encoder.slots."):
            depth = n_slots - int(name.split(".")[2])
        else:
            depth = 0
        decayed = weight_decay > 0 and p.ndim >= 2
        groups.setdefault((depth, decayed), []).append(p)
    return [
        {"params": ps, "lr": lr * decay**depth, "weight_decay": weight_decay if dec else 0.0, "depth": depth}
        for (depth, dec), ps in sorted(groups.items())
    ]


def _make_classifier(encoder, num_outputs: int, dropout: float, pooling: str = "cls"):
    import torch
    from torch import nn

    class SequenceClassifier(nn.Module):
        """Encoder + dropout + linear on the pooled hidden state (``pooling``: ``cls`` =
        position 0, ``mean`` = mean over the attention mask's positions).

        ``forward(input_ids (B, L), attention_mask (B, L) bool) -> (B, num_outputs)``.
        """

        def __init__(self):
            super().__init__()
            self.encoder = encoder
            self.dropout = nn.Dropout(dropout)
            self.head = nn.Linear(encoder.dims.hidden, num_outputs)
            nn.init.normal_(self.head.weight, std=0.02)
            nn.init.zeros_(self.head.bias)
            for p in encoder.mlm_head.parameters():
                p.requires_grad_(False)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            h = self.encoder(input_ids, attention_mask)  # (B, L, H)
            if pooling == "mean":
                m = attention_mask.to(h.dtype)[:, :, None]
                pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)
            else:
                pooled = h[:, 0]
            return self.head(self.dropout(pooled))

    return SequenceClassifier()


def _encode(tokenizer, examples: list[Example], max_len: int) -> list[list[int]]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(tokenizer.to_str())  # private copy: truncation settings are mutable state
    tok.no_padding()
    tok.enable_truncation(max_length=max_len, strategy="longest_first")
    if examples and examples[0].b is not None:
        enc = tok.encode_batch([(e.a, e.b or "") for e in examples])
    else:
        enc = tok.encode_batch([e.a for e in examples])
    return [e.ids for e in enc]


def _collate(seqs: list[list[int]], pad_id: int):
    import torch

    L = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), L), pad_id, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    mask = torch.arange(L)[None, :] < torch.tensor([len(s) for s in seqs])[:, None]  # (B, L) bool
    return ids, mask


def _predict(model, seqs: list[list[int]], pad_id: int, batch_size: int, regression: bool, device: str) -> list:
    import torch

    model.eval()
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    out: list = [None] * len(seqs)
    with torch.inference_mode():
        for k in range(0, len(order), batch_size):
            idx = order[k : k + batch_size]
            ids, mask = _collate([seqs[i] for i in idx], pad_id)
            logits = model(ids.to(device), mask.to(device)).float().cpu()
            preds = logits[:, 0].tolist() if regression else logits.argmax(-1).tolist()
            for i, p in zip(idx, preds):
                out[i] = p
    return out

def training_examples(task: TaskData, cfg: FinetuneConfig) -> list[Example]:
    """The training examples a fine-tuning run (and its floor) uses: all of ``train``, or with
    ``cfg.train_limit`` a sample of that many (torch ``randperm`` seeded ``cfg.train_limit_seed``,
    kept in file order), the same for every seed."""
    import torch

    train = task.splits["train"]
    if cfg.train_limit is not None and cfg.train_limit < len(train):
        g = torch.Generator().manual_seed(cfg.train_limit_seed)
        keep = sorted(torch.randperm(len(train), generator=g)[: cfg.train_limit].tolist())
        train = [train[i] for i in keep]
    return train


def eval_examples(task: TaskData, cfg: FinetuneConfig) -> dict[str, list[Example]]:
    """``{"dev": …, "test": …}`` (test when present): the first ``cfg.eval_limit`` of each (all by default)."""
    return {s: task.splits[s][: cfg.eval_limit] for s in ("dev", "test") if s in task.splits}



@dataclass
class _Prepared:
    """What every seed of one :func:`finetune_task` call shares, derived once from the task and settings."""

    lr: float  # peak learning rate used
    pad_id: int
    max_len: int  # tokens per example (cfg.max_len capped by the encoder's)
    train: list[Example]
    evals: dict[str, list[Example]]  # "dev" (and "test")
    enc: dict[str, list[list[int]]]  # token ids per split ("train", "dev", "test")
    y_train: list
    regression: bool
    select: str  # the dev metric that selects the epoch
    epochs: int  # epochs run: cfg.epochs, raised to reach cfg.min_steps
    total: int  # optimiser steps per seed
    warmup: int  # warm-up steps
    baseline: float  # loss of the best constant prediction (as the loss sees the labels)
    class_weights: list[float] | None  # cross-entropy weights per class, None = unweighted
    sample_probs: list[float] | None  # per-example draw probabilities (balanced sampler), None = permutation

    def dev_epochs(self) -> list[int]:
        """The 1-based epochs after which dev is scored (every epoch up to :data:`MAX_DEV_EVALS`)."""
        every = math.ceil(self.epochs / MAX_DEV_EVALS)
        return sorted({e for e in range(every, self.epochs + 1, every)} | {self.epochs})

    def lr_mult(self, step: int) -> float:
        """Linear warm-up then linear decay to 0; ``step`` counts finished optimiser steps."""
        if step < self.warmup:
            return (step + 1) / self.warmup
        return max(0.0, (self.total - step) / max(1, self.total - self.warmup))


def _prepare(encoder, tokenizer, task: TaskData, cfg: FinetuneConfig) -> _Prepared:
    """Check ``cfg``, pick the examples, tokenise them, and fix the rate, schedule and baseline."""
    from lvsearch.data.tokenizer import SpecialIds

    cfg.check()
    lr = cfg.lr if cfg.lr is not None else default_lr(encoder.dims.hidden)
    pad_id = SpecialIds.of(tokenizer).pad
    max_len = min(cfg.max_len, encoder.dims.max_len)
    train = training_examples(task, cfg)
    evals = eval_examples(task, cfg)
    enc = {"train": _encode(tokenizer, train, max_len)}
    for s, exs in evals.items():
        enc[s] = _encode(tokenizer, exs, max_len)
    y_train = [e.label for e in train]
    regression = task.kind == "regression"
    select = primary_metric(task.kind, y_train if not regression else None, task.num_outputs)
    per_epoch = math.ceil(len(train) / cfg.batch_size)
    epochs = max(cfg.epochs, min(math.ceil(cfg.min_steps / per_epoch), MIN_STEPS_MAX_EPOCHS))
    total = per_epoch * epochs
    weights = probs = None
    if not regression:
        if cfg.class_weight == "balanced" or (cfg.class_weight == "auto" and is_imbalanced(y_train, task.num_outputs)):
            weights = balanced_class_weights(y_train, task.num_outputs)
        if cfg.sampler == "balanced":
            per_class = balanced_class_weights(y_train, task.num_outputs)
            probs = [per_class[y] / len(y_train) for y in y_train]
    baseline = constant_loss(task.kind, y_train, task.num_outputs, weights, probs is not None)
    return _Prepared(lr=lr, pad_id=pad_id, max_len=max_len, train=train, evals=evals, enc=enc, y_train=y_train,
                     regression=regression, select=select, epochs=epochs, total=total,
                     warmup=int(cfg.warmup_fraction * total), baseline=baseline, class_weights=weights,
                     sample_probs=probs)


class _StepCounter:
    """Counts optimiser steps over all seeds and reports each to ``progress(what, done, total)``."""

    def __init__(self, progress: Callable[[str, int, int], None] | None, total: int):
        self.progress, self.total, self.done = progress, total, 0

    def step(self, what: str) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(what, self.done, self.total)


def _train_epoch(model, opt, sched, groups, cfg: FinetuneConfig, prep: _Prepared, gen, device: str,
                 on_step: Callable[[], None]) -> float:
    """One epoch over ``prep.train`` in the order of ``gen``; returns the mean train loss."""
    import torch
    import torch.nn.functional as F

    model.train()
    if prep.sample_probs is not None:  # balanced sampler: len(train) draws with replacement, classes equally likely
        perm = torch.multinomial(torch.tensor(prep.sample_probs, dtype=torch.float64), len(prep.train),
                                 replacement=True, generator=gen).tolist()
    else:
        perm = torch.randperm(len(prep.train), generator=gen).tolist()
    weight = None if prep.class_weights is None else torch.tensor(prep.class_weights, dtype=torch.float32, device=device)
    losses = []
    for k in range(0, len(perm), cfg.batch_size):
        idx = perm[k : k + cfg.batch_size]
        ids, mask = _collate([prep.enc["train"][i] for i in idx], prep.pad_id)
        out = model(ids.to(device), mask.to(device))
        if prep.regression:
            loss = F.mse_loss(out[:, 0].float(), torch.tensor([prep.y_train[i] for i in idx], dtype=torch.float32, device=device))
        else:
            loss = F.cross_entropy(out.float(), torch.tensor([prep.y_train[i] for i in idx], dtype=torch.long, device=device),
                                   weight=weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.grad_clip:
            torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], cfg.grad_clip)
        opt.step()
        sched.step()
        losses.append(loss.item())
        on_step()
    return statistics.fmean(losses)


def _train_seed(encoder, task: TaskData, cfg: FinetuneConfig, prep: _Prepared, seed: int, device: str,
                counter: _StepCounter) -> dict:
    """Fine-tune a fresh copy of ``encoder`` with ``seed``, keep the epoch with the best dev score,
    evaluate it on test; returns the seed's ``per_seed`` row."""
    import copy

    import torch

    t0 = time.perf_counter()
    torch.manual_seed(seed)
    model = _make_classifier(copy.deepcopy(encoder), task.num_outputs, cfg.dropout, cfg.pooling).to(device)
    groups = layerwise_param_groups(model, prep.lr, cfg.layer_decay, cfg.weight_decay)
    opt = torch.optim.AdamW(groups, lr=prep.lr, betas=(0.9, 0.999), eps=1e-6)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, prep.lr_mult)
    gen = torch.Generator().manual_seed(seed)
    best_score, best_epoch, best_state, best_dev, best_dev_pc = -math.inf, -1, None, None, None
    dev_curve, loss_curve = [], []
    what = f"{task.name} seed {seed}"
    dev_y = [e.label for e in prep.evals["dev"]]
    scored = prep.dev_epochs()
    for epoch in range(1, prep.epochs + 1):
        loss_curve.append(_train_epoch(model, opt, sched, groups, cfg, prep, gen, device, lambda: counter.step(what)))
        if epoch not in scored:
            continue
        dev_pred = _predict(model, prep.enc["dev"], prep.pad_id, cfg.eval_batch_size, prep.regression, device)
        dev_m = task_metrics(task, dev_y, dev_pred)
        dev_curve.append(dev_m)
        score = dev_m[prep.select] if dev_m[prep.select] is not None else -math.inf
        if score > best_score or best_state is None:  # ties: the earlier epoch
            best_score, best_epoch, best_dev = score, epoch, dev_m
            best_dev_pc = class_metrics(task, dev_y, dev_pred)
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    test_m, test_predictions, test_pc = None, None, None
    if "test" in prep.enc and task.test_labeled:
        test_pred = _predict(model, prep.enc["test"], prep.pad_id, cfg.eval_batch_size, prep.regression, device)
        test_y = [e.label for e in prep.evals["test"]]
        test_m, test_pc = task_metrics(task, test_y, test_pred), class_metrics(task, test_y, test_pred)
        test_predictions = [float(v) if prep.regression else int(v) for v in test_pred]
    failure = loss_did_not_fall(loss_curve, prep.baseline)
    row = {
        "seed": seed, "status": "failed" if failure else "ok", "failure": failure,
        "best_epoch": best_epoch, "dev": best_dev, "test": test_m, "test_predictions": test_predictions,
        "dev_per_epoch": dev_curve, "train_loss_per_epoch": loss_curve,
        "seconds": time.perf_counter() - t0,
    }
    if len(scored) != prep.epochs:
        row["dev_epochs"] = scored  # the epoch of each dev_per_epoch entry
    if not prep.regression:
        row["dev_per_class"], row["test_per_class"] = best_dev_pc, test_pc
        row["never_predicted"] = never_predicted(test_pc or best_dev_pc, task.label_names)
    return row


def _aggregate(runs: list[dict], metric_names: list[str], with_test: bool) -> dict:
    """``dev`` (and ``test``) → metric → :func:`~lvsearch.eval.finetune_metrics.seed_summary` over ``runs``."""
    agg = {"dev": {m: seed_summary([r["dev"][m] for r in runs]) for m in metric_names}}
    if with_test:
        agg["test"] = {m: seed_summary([r["test"][m] for r in runs]) for m in metric_names}
    return agg


def _per_class(task: TaskData, runs: list[dict], with_test: bool) -> dict | None:
    """``dev`` (and ``test``) → class name → per-class summary over ``runs``
    (:func:`~lvsearch.eval.finetune_metrics.per_class_summary`); None for regression."""
    if task.kind == "regression":
        return None
    splits = ("dev", "test") if with_test else ("dev",)
    return {s: per_class_summary([r.get(f"{s}_per_class") for r in runs], task.label_names) for s in splits}


def _result(encoder, task: TaskData, cfg: FinetuneConfig, prep: _Prepared, per_seed: list[dict]) -> dict:
    """The JSON-ready result of :func:`finetune_task` from its ``per_seed`` rows."""
    from lvsearch.eval.metrics import BACKEND

    metric_names = list(per_seed[0]["dev"])
    learned = [r for r in per_seed if r["status"] == "ok"]
    with_test = task.test_labeled and "test" in prep.enc
    regression, select, lr = prep.regression, prep.select, prep.lr
    return {
        "task": task.name, "source": task.source, "kind": task.kind, "label_names": task.label_names,
        "columns": task.columns, "select_metric": select, "metrics_backend": BACKEND,
        "select_rule": "dev pearson (regression)" if regression else (
            "dev accuracy (balanced training labels)" if select == "accuracy" else
            f"dev {metric_label(select, task.num_outputs, task.label_names)}: the training labels are imbalanced "
            f"(largest class > {IMBALANCE_RATIO:g}/K), where accuracy rewards the majority class; the floor verdict uses "
            "the same metric"),
        "metric_labels": {m: metric_label(m, None if regression else task.num_outputs, task.label_names)
                          for m in per_seed[0]["dev"]},
        "sizes": {"train_used": len(prep.train), **{f"{s}_used": len(v) for s, v in prep.evals.items()},
                  **{s: len(v) for s, v in task.splits.items()}},
        "test_labeled": task.test_labeled,
        "status": "failed" if not learned else "done",
        "failed_seeds": [r["seed"] for r in per_seed if r["status"] == "failed"],
        "failure_rule": f"a seed fails when its last-epoch mean train loss is ≥ {LOSS_FELL_FRACTION} × the loss of the "
                        "best constant prediction (label entropy in nats; label variance for regression); failed seeds "
                        "are left out of 'aggregate' (all seeds: 'aggregate_all_seeds')",
        "constant_loss": prep.baseline,
        "settings": {
            "epochs": cfg.epochs, "epochs_run": prep.epochs, "steps": prep.total, "min_steps": cfg.min_steps,
            "epochs_rule": f"max(--epochs {cfg.epochs}, min(ceil(--min-steps {cfg.min_steps} / "
                           f"{math.ceil(len(prep.train) / cfg.batch_size)} steps per epoch), {MIN_STEPS_MAX_EPOCHS}))",
            "class_weight": cfg.class_weight, "class_weights": prep.class_weights, "sampler": cfg.sampler,
            "lr": lr,
            "lr_rule": "--lr" if cfg.lr is not None else f"default {LR_BASE:g} × {LR_REF_WIDTH} / hidden "
                                                          f"(hidden {encoder.dims.hidden})",
            "batch_size": cfg.batch_size, "max_len": prep.max_len,
            "seeds": list(cfg.seeds), "train_limit": cfg.train_limit, "train_limit_sample": "seeded random sample (seed "
            f"{cfg.train_limit_seed}), same for every fine-tuning seed" if cfg.train_limit else None,
            "layer_decay": cfg.layer_decay, "warmup_fraction": cfg.warmup_fraction, "weight_decay": cfg.weight_decay,
            "eval_limit": cfg.eval_limit, "eval_limit_sample": f"first {cfg.eval_limit} of dev and test" if cfg.eval_limit else None,
            "dropout": cfg.dropout, "grad_clip": cfg.grad_clip, "pooling": cfg.pooling,
            "classifier": "dropout + linear on " + ("[CLS]" if cfg.pooling == "cls" else "the mean hidden state")
                          + " (no pooler)",
        },
        "per_seed": per_seed,
        "aggregate": _aggregate(learned, metric_names, with_test),
        "aggregate_all_seeds": _aggregate(per_seed, metric_names, with_test),
        "per_class": _per_class(task, learned, with_test),
        "train_class_counts": None if regression else [sum(1 for y in prep.y_train if y == k)
                                                       for k in range(task.num_outputs)],
    }


def finetune_task(
    encoder,
    tokenizer,
    task: TaskData,
    cfg: FinetuneConfig,
    *,
    device: str = "cpu",
    progress: Callable[[str, int, int], None] | None = None,
) -> dict:
    """Fine-tune a copy of ``encoder`` on ``task`` once per seed; select on dev, report test.

    Args:
        encoder: pretrained :class:`~lvsearch.model.Encoder` (not modified; deep-copied per seed).
        tokenizer: the model's ``tokenizers.Tokenizer``.
        task: a loaded :class:`TaskData`.
        cfg: :class:`FinetuneConfig`.
        progress: ``progress(what, done_steps, total_steps)`` after each optimiser step.

    Returns:
        JSON-ready dict: task info, settings (``lr`` is the peak rate used, ``lr_rule`` where it
        came from), ``per_seed`` (seed, ``status`` ``"ok"``/``"failed"`` and ``failure`` reason
        (:func:`loss_did_not_fall`), best_epoch, dev and test metrics at the selected epoch, dev
        metric per scored epoch (``dev_epochs`` lists them when not every epoch was scored), mean
        train loss per epoch, seconds; classification: ``dev_per_class``/``test_per_class``
        (:func:`~lvsearch.eval.finetune_metrics.class_metrics` at the selected epoch) and
        ``never_predicted`` (class names with test examples the seed never predicts)), ``status``
        (``"failed"`` when every seed failed, else ``"done"``), ``failed_seeds``, ``constant_loss``,
        ``aggregate`` (``dev``/``test`` → metric → mean/std/median/n over the seeds that did not
        fail; n = 0 and None values when all failed; ``std`` None with a single seed: unmeasured,
        not 0), ``aggregate_all_seeds`` (the same over every seed), ``per_class`` (``dev``/``test`` →
        class name → precision/recall/F1 summaries, support, ``never_predicted_seeds``; None for
        regression) and ``train_class_counts``.

    Raises:
        LvsearchError: ``cfg`` out of range (:meth:`FinetuneConfig.check`).
    """
    prep = _prepare(encoder, tokenizer, task, cfg)
    counter = _StepCounter(progress, prep.total * len(cfg.seeds))
    per_seed = [_train_seed(encoder, task, cfg, prep, seed, device, counter) for seed in cfg.seeds]
    return _result(encoder, task, cfg, prep, per_seed)


__all__ = [
    "FinetuneConfig", "layerwise_param_groups", "finetune_task", "training_examples", "eval_examples", "default_lr",
    "constant_loss", "loss_did_not_fall", "LR_BASE", "LR_REF_WIDTH", "LOSS_FELL_FRACTION", "FAILED_TEXT", "POOLINGS",
    "MIN_STEPS", "MIN_STEPS_MAX_EPOCHS", "MAX_DEV_EVALS", "CLASS_WEIGHTS", "SAMPLERS", "balanced_class_weights",
]
