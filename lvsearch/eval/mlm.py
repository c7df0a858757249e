"""MLM dev metrics of a model on a prepared corpus: the number the architecture search optimises.

The dev batch is :func:`lvsearch.data.loader.fixed_dev_set` (a seeded sample of packed dev
sequences masked once with a seeded generator, standard BERT masking — 15%, 80/10/10, Devlin
et al. 2019 §3.1 — whatever masking the model trained with), so the same arguments give the
same masks in every process and for every model.

* ``accuracy`` = fraction of predicted positions (label ≠ −100) whose arg-max token equals the
  original token (LV-BERT's search fitness, Yu et al. 2021 §3.3).
* ``loss`` = mean cross-entropy (nats per predicted token) over all predicted positions of the
  whole dev set (token-weighted, not a mean of per-batch means).
"""

from __future__ import annotations

from pathlib import Path

from lvsearch.errors import LvsearchError


def check_tokenizer(model_sha256: str, data, model_folder: str | Path | None = None) -> None:
    """Raise when the model's tokenizer differs from the prepared data's.

    Raises:
        LvsearchError: sha256 of the model's tokenizer differs from ``data.tokenizer_sha256``.
    """
    if model_sha256 != data.tokenizer_sha256:
        where = f"model {model_folder}" if model_folder else "the model"
        raise LvsearchError(
            f"{where} was trained with a different tokenizer than the prepared data {data.folder} "
            f"(tokenizer sha256 {model_sha256[:12]}… vs {data.tokenizer_sha256[:12]}…)",
            fix="pass --data pointing at the prepared dataset the model was trained on (same tokenizer.json)",
        )


def mlm_dev_metrics(
    model,
    data,
    *,
    num_sequences: int | None = 256,
    seq_len: int | None = None,
    seed: int = 1234,
    batch_size: int = 32,
    device: str = "cpu",
    dev=None,
) -> dict:
    """MLM accuracy and loss of ``model`` on the fixed masked dev set of ``data``.

    Args:
        model: an :class:`~lvsearch.model.Encoder` (its MLM head is used; set to eval mode).
        data: :class:`~lvsearch.data.shards.PreparedData`.
        num_sequences, seq_len, seed: passed to :func:`~lvsearch.data.loader.fixed_dev_set`
            (seq_len default: the dataset's).
        batch_size: sequences per forward pass (does not change the result beyond float
            rounding).
        dev: an already built :class:`~lvsearch.data.loader.DevSet` to score instead of
            building one (it must be ``fixed_dev_set(data, num_sequences=..., seq_len=...,
            seed=...)`` with these arguments, so that the recorded settings describe it; the
            caller scores the reference floors on the same object).

    Returns:
        ``{"accuracy", "loss", "predicted_tokens", "sequences", "seq_len", "seed",
        "per_target_correct"}``; the last is one character per masked target, ``"1"`` when the
        argmax prediction is the true token, in the fixed dev set's order — the same targets
        for every model of the same data, so two models can be compared pair by pair
        (paired bootstrap, :mod:`lvsearch.quickstart`).

    Raises:
        LvsearchError: ``seq_len`` exceeds the model's ``max_len``; the dev split is too small.
    """
    import torch
    import torch.nn.functional as F

    from lvsearch.data.loader import fixed_dev_set
    from lvsearch.data.masking import IGNORE_INDEX

    L = dev.input_ids.shape[1] if dev is not None else (seq_len or data.seq_len)
    if L > model.dims.max_len:
        raise LvsearchError(f"dev sequence length {L} exceeds the model's max_len {model.dims.max_len}",
                            fix=f"pass --dev-seq-len ≤ {model.dims.max_len}")
    if dev is None:
        dev = fixed_dev_set(data, num_sequences=num_sequences, seq_len=L, seed=seed)
    model.eval()
    loss_sum = 0.0
    correct = total = 0
    outcomes: list[str] = []
    with torch.inference_mode():
        for ids, labels in dev.batches(batch_size):
            ids, labels = ids.to(device), labels.to(device)
            hidden = model(ids, model.padding_mask(ids))  # (B, L, H)
            sel = labels != IGNORE_INDEX
            logits = model.mlm_logits(hidden[sel]).float()  # (P, V)
            target = labels[sel]
            loss_sum += float(F.cross_entropy(logits, target, reduction="sum"))
            hit = logits.argmax(-1) == target
            correct += int(hit.sum())
            total += int(sel.sum())
            outcomes.append("".join("1" if h else "0" for h in hit.tolist()))
    if total == 0:
        raise LvsearchError(f"the dev set of {data.folder} has no masked tokens", fix="prepare more dev text")
    return {
        "accuracy": correct / total,
        "loss": loss_sum / total,
        "predicted_tokens": total,
        "sequences": len(dev),
        "seq_len": L,
        "seed": seed,
        "per_target_correct": "".join(outcomes),
    }


__all__ = ["check_tokenizer", "mlm_dev_metrics"]
