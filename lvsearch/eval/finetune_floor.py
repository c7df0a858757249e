"""The fine-tuning floor: TF-IDF word 1+2-grams and a linear model fitted on exactly the training
examples fine-tuning uses (:func:`finetune_floor`), and the paired bootstrap of model − floor
over test examples (:func:`finetune_vs_floor`).
"""

from __future__ import annotations

import math

import numpy as np

from lvsearch.errors import LvsearchError
from lvsearch.stats import RESAMPLES

__all__ = ["BOW_C_GRID", "BOW_FLOOR_NAME", "finetune_floor", "finetune_vs_floor"]

# ---------------------------------------------------------------------------------------------
# Fine-tuning floor: bag of words on the same training examples.

#: Inverse regularisation strengths tried for the fine-tuning floor (picked on dev).
BOW_C_GRID = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
BOW_FLOOR_NAME = "tf-idf word 1-2-gram + logistic regression"


def _bow_features(train, others):
    """TF-IDF word uni+bigram features (scikit-learn ``TfidfVectorizer``, fitted on ``train``
    only); a pair task gets one vectoriser per side, side by side."""
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer

    sides = [lambda e: e.a] + ([lambda e: e.b or ""] if any(e.b is not None for e in train) else [])
    out_train, out_other = [], [[] for _ in others]
    for side in sides:
        vec = TfidfVectorizer(ngram_range=(1, 2), lowercase=True, sublinear_tf=True)
        out_train.append(vec.fit_transform([side(e) for e in train]))
        for k, exs in enumerate(others):
            out_other[k].append(vec.transform([side(e) for e in exs]))
    return sparse.hstack(out_train).tocsr(), [sparse.hstack(m).tocsr() for m in out_other]


def finetune_floor(task, cfg, *, c_grid=BOW_C_GRID) -> dict:
    """The fine-tuning floor of ``task``: TF-IDF word uni+bigram features and scikit-learn's
    ``LogisticRegression`` (L2, lbfgs; ``Ridge`` with ``alpha = 1/C`` for regression), fitted on
    exactly the training examples fine-tuning uses (:func:`lvsearch.eval.finetune.training_examples`),
    ``C`` picked on dev by the task's selection metric (:func:`lvsearch.eval.finetune_metrics.primary_metric`;
    ties: the smaller C), test scored once with that C. Dev and test are never fitted on. The
    floor gets the imbalance handling fine-tuning gets: scikit-learn's ``class_weight="balanced"``
    wherever ``cfg.class_weight`` weights the model's loss (``balanced``, or ``auto`` on imbalanced
    training labels), so a weighted model is not judged against an unweighted floor.

    Returns:
        ``{"status": "done", "name", "C", "c_grid", "select_metric", "class_weight", "dev_per_c", "dev",
        "test", "test_predictions", "test_per_class", "train_used"}`` (``test``, ``test_predictions``
        and ``test_per_class`` None without test labels; ``test_per_class`` None for regression).

    Raises:
        LvsearchError: scikit-learn is not installed.
    """
    try:
        from sklearn.linear_model import LogisticRegression, Ridge
    except ImportError:
        raise LvsearchError("the fine-tuning floor needs scikit-learn", fix="pip install scikit-learn") from None
    from lvsearch.eval.finetune import eval_examples, training_examples
    from lvsearch.eval.finetune_metrics import class_metrics, is_imbalanced, primary_metric, task_metrics

    train = training_examples(task, cfg)
    evals = eval_examples(task, cfg)
    has_test = "test" in evals and task.test_labeled
    regression = task.kind == "regression"
    y = [e.label for e in train]
    select = primary_metric(task.kind, None if regression else y, task.num_outputs)
    weighted = not regression and (cfg.class_weight == "balanced" or
                                   (cfg.class_weight == "auto" and is_imbalanced(y, task.num_outputs)))
    others = [evals["dev"]] + ([evals["test"]] if has_test else [])
    Xtr, (Xdev, *rest) = _bow_features(train, others)

    def fit(c: float):
        model = Ridge(alpha=1.0 / c) if regression else LogisticRegression(
            C=c, max_iter=2000, class_weight="balanced" if weighted else None)
        return model.fit(Xtr, y)

    def preds(model, X):
        p = model.predict(X)
        return [float(v) for v in p] if regression else [int(v) for v in p]

    dev_y = [e.label for e in evals["dev"]]
    best = None
    per_c = {}
    for c in c_grid:
        m = fit(c)
        dev_m = task_metrics(task, dev_y, preds(m, Xdev))
        per_c[f"{c:g}"] = dev_m
        score = dev_m[select] if dev_m[select] is not None else -math.inf
        if best is None or score > best[0]:
            best = (score, c, m, dev_m)
    _, c, model, dev_m = best
    test_m = test_p = test_pc = None
    if has_test:
        test_p = preds(model, rest[0])
        test_y = [e.label for e in evals["test"]]
        test_m, test_pc = task_metrics(task, test_y, test_p), class_metrics(task, test_y, test_p)
    return {"status": "done", "name": BOW_FLOOR_NAME, "C": c, "c_grid": list(c_grid), "select_metric": select,
            "class_weight": "balanced" if weighted else None, "dev_per_c": per_c, "dev": dev_m, "test": test_m,
            "test_predictions": test_p, "test_per_class": test_pc, "train_used": len(train)}


def finetune_vs_floor(task, result: dict, floor: dict, *, n_resamples: int = RESAMPLES,
                      level: float = 0.95, seed: int = 0) -> dict | None:
    """Paired bootstrap over test examples of (mean over the model's non-failed seeds of the
    test selection metric) − (the floor's), recomputing both on each resample (percentile
    interval). None when there is no labelled test split, no learned seed, or a seed has no
    recorded test predictions (a report written before they were kept).

    Returns:
        ``{"metric", "model", "floor", "difference", "ci", "level", "resamples", "excludes_zero", "beats"}``.
    """
    from lvsearch.eval.finetune import eval_examples
    from lvsearch.eval.finetune_metrics import task_metrics

    seeds = [r for r in result.get("per_seed", []) if r.get("status") == "ok"]
    if not seeds or floor.get("test_predictions") is None or any(r.get("test_predictions") is None for r in seeds):
        return None
    metric = result["select_metric"]
    y = np.asarray([e.label for e in eval_examples(task, _cfg_of(result))["test"]])
    P = np.asarray([r["test_predictions"] for r in seeds])
    f = np.asarray(floor["test_predictions"])
    if P.shape[1] != len(y) or len(f) != len(y):
        raise LvsearchError("the fine-tuning floor was scored on other test examples than the model")

    def stat(idx) -> tuple[float, float]:
        ms = [task_metrics(task, y[idx].tolist(), p[idx].tolist())[metric] for p in P]
        fl = task_metrics(task, y[idx].tolist(), f[idx].tolist())[metric]
        ms = [0.0 if v is None else v for v in ms]
        return float(np.mean(ms)), 0.0 if fl is None else float(fl)

    rng = np.random.default_rng(seed)
    full = np.arange(len(y))
    m0, f0 = stat(full)
    if metric == "accuracy":  # per-example form, vectorised
        d = (P == y).mean(axis=0) - (f == y)
        diffs = d[rng.integers(0, len(y), size=(n_resamples, len(y)))].mean(axis=1)
    else:
        diffs = np.array([np.subtract(*stat(rng.integers(0, len(y), size=len(y)))) for _ in range(n_resamples)])
    alpha = (1 - level) / 2
    lo, hi = (float(x) for x in np.quantile(diffs, [alpha, 1 - alpha]))
    return {"metric": metric, "model": m0, "floor": f0, "difference": m0 - f0, "ci": [lo, hi], "level": level,
            "resamples": n_resamples, "excludes_zero": bool(lo > 0 or hi < 0), "beats": bool(lo > 0)}


def _cfg_of(result: dict):
    from lvsearch.eval.finetune import FinetuneConfig

    return FinetuneConfig(eval_limit=result.get("settings", {}).get("eval_limit"))
