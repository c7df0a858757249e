"""Benchmark: fine-tuning on imbalanced tasks (issue 60): macro F1 and the smallest class's F1 of
:func:`lvsearch.eval.finetune.finetune_task` under named settings, against the bag-of-words floor
(:func:`lvsearch.eval.finetune_floor.finetune_floor`) on the same rows. Not a test.

Two tasks are built from ``../shared/data`` into ``--work`` (seeded, disjoint splits, the same
class shares in train, dev and test):

* ``polarity_rare``: sentence_polarity with the positive class cut to 2% of each split (train
  1,470 + 30, dev 980 + 20, test 1,960 + 40; train from train.tsv, dev and test from the
  remaining train rows and dev.tsv/test.tsv pooled).
* ``source6``: a 6-class "which corpus is this line from" task over the pretraining sources
  (movie_reviews, brown, abc_news, shakespeare, webtext, switchboard), 1,500 train rows of
  which switchboard holds 19 (1.3%, the issue's 19 of 1,500); dev 1,000 and test 2,000 rows in
  the same shares. The lines come from ``corpora/train``, which the encoder was pretrained on
  (without labels); the floor never saw them.

Settings (``--settings``, any of :data:`SETTINGS`): ``before`` = the defaults before issue 60
(unweighted loss, shuffled epochs, 3 epochs, no minimum step count); ``default`` = today's
:class:`~lvsearch.eval.finetune.FinetuneConfig` defaults; the others switch one thing at a time.
Every setting selects each seed's epoch on dev by the task's selection metric (macro F1 here).
Per setting and task: per-seed test macro F1 and smallest-class F1, the seeds that never
predict the smallest class, the mean, and the paired-bootstrap interval of model − floor; the
floor's own macro F1 comes with its 95% percentile-bootstrap interval over test examples.
Writes ``benchmarks/results/finetune_imbalance.json`` (or ``--name``) after every setting.

Usage: ``python benchmarks/finetune_imbalance.py --model RUN/model [--work DIR] [--settings before default]``
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from _common import machine, result_path, run_main, shared_data_dir, write_result

#: name -> FinetuneConfig overrides (on top of the current defaults).
SETTINGS = {
    "before": {"class_weight": "none", "sampler": "shuffle", "min_steps": 0},
    "default": {},
    "steps_only": {"class_weight": "none", "sampler": "shuffle"},
    "weighted_only": {"class_weight": "balanced", "min_steps": 0},
    "weighted_steps": {"class_weight": "balanced"},
    "sampler_steps": {"class_weight": "none", "sampler": "balanced"},
}
SOURCES6 = {"movie_reviews": 520, "brown": 400, "abc_news": 280, "shakespeare": 160, "webtext": 121, "switchboard": 19}
EVAL_SIZES = {"dev": 1000, "test": 2000}
RARE_SHARE = 0.02


def _write(folder: Path, rows: dict[str, list[tuple[str, str]]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for split, exs in rows.items():
        text = "sentence\tlabel\n" + "".join(f"{a}\t{y}\n" for a, y in exs)
        (folder / f"{split}.tsv").write_text(text, encoding="utf-8")
    return folder


def build_polarity_rare(data: Path, out: Path, seed: int = 0) -> Path:
    """sentence_polarity with label 1 cut to :data:`RARE_SHARE` of every split (see the module docstring)."""
    rng = random.Random(seed)
    src = data / "tasks" / "sentence_polarity"
    pool: dict[str, list[str]] = {"0": [], "1": []}
    train_pool: dict[str, list[str]] = {"0": [], "1": []}
    for split in ("train", "dev", "test"):
        for line in (src / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[1:]:
            text, y = line.rsplit("\t", 1)
            (train_pool if split == "train" else pool)[y].append(text)
    for y in ("0", "1"):
        rng.shuffle(train_pool[y])
    sizes = {"train": 1500, **EVAL_SIZES}
    rows = {}
    rare = {s: max(1, round(RARE_SHARE * n)) for s, n in sizes.items()}
    rows["train"] = [(t, "0") for t in train_pool["0"][: sizes["train"] - rare["train"]]] + \
                    [(t, "1") for t in train_pool["1"][: rare["train"]]]
    for y in ("0", "1"):  # what train did not take joins the dev/test pool
        pool[y] += train_pool[y][(sizes["train"] - rare["train"]) if y == "0" else rare["train"]:]
        rng.shuffle(pool[y])
    k = {"0": 0, "1": 0}
    for split in ("dev", "test"):
        take = {"0": sizes[split] - rare[split], "1": rare[split]}
        rows[split] = [(t, y) for y in ("0", "1") for t in pool[y][k[y]: k[y] + take[y]]]
        for y in take:
            k[y] += take[y]
    for split in rows:
        rng.shuffle(rows[split])
    return _write(out / "polarity_rare", rows)


def build_source6(data: Path, out: Path, seed: int = 0) -> Path:
    """The 6-class source task (see the module docstring): lines of 5–30 words, distinct, one tab-free line each."""
    rng = random.Random(seed)
    train_n = sum(SOURCES6.values())
    rows: dict[str, list[tuple[str, str]]] = {"train": [], "dev": [], "test": []}
    for name, n in SOURCES6.items():
        lines = sorted({ln.strip() for ln in (data / "corpora" / "train" / f"{name}.train").read_text(encoding="utf-8")
                        .splitlines() if 5 <= len(ln.split()) <= 30 and "\t" not in ln})
        rng.shuffle(lines)
        take = {"train": n, **{s: round(m * n / train_n) for s, m in EVAL_SIZES.items()}}
        start = 0
        for split, m in take.items():
            rows[split] += [(t, name) for t in lines[start: start + m]]
            start += m
        if start > len(lines):
            raise SystemExit(f"{name}: only {len(lines)} usable lines for {start}")
    for split in rows:
        rng.shuffle(rows[split])
    return _write(out / "source6", rows)


BUILDERS = {"polarity_rare": build_polarity_rare, "source6": build_source6}


def floor_interval(task, floor: dict, *, resamples: int = 2000, seed: int = 0) -> list[float]:
    """95% percentile-bootstrap interval of the floor's test macro F1 over test examples."""
    import numpy as np
    from sklearn.metrics import f1_score

    y = np.asarray([e.label for e in task.splits["test"]])
    p = np.asarray(floor["test_predictions"])
    rng = np.random.default_rng(seed)
    labels = list(range(task.num_outputs))
    vals = [f1_score(y[i], p[i], labels=labels, average="macro", zero_division=0)
            for i in (rng.integers(0, len(y), len(y)) for _ in range(resamples))]
    return [float(v) for v in np.quantile(vals, [0.025, 0.975])]


def summarise(task, res: dict, floor: dict, smallest: int) -> dict:
    """One setting's numbers on one task."""
    import statistics

    from lvsearch.eval.finetune_floor import finetune_vs_floor

    seeds = res["per_seed"]
    macro = [r["test"]["macro_f1"] for r in seeds]
    small = [r["test_per_class"]["f1"][smallest] for r in seeds]
    vs = finetune_vs_floor(task, res, floor)
    return {"status": res["status"], "macro_f1_per_seed": macro, "macro_f1_mean": statistics.fmean(macro),
            "accuracy_per_seed": [r["test"]["accuracy"] for r in seeds],
            "smallest_f1_per_seed": small, "smallest_f1_mean": statistics.fmean(small),
            "smallest_never_predicted_seeds": [r["seed"] for r in seeds if not r["test_per_class"]["predicted"][smallest]],
            "best_epochs": [r["best_epoch"] for r in seeds], "epochs_run": res["settings"]["epochs_run"],
            "steps": res["settings"]["steps"], "class_weights": res["settings"]["class_weights"],
            "failed_seeds": res["failed_seeds"], "seconds": sum(r["seconds"] for r in seeds),
            "vs_floor": vs}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="model directory (e.g. RUN/model of 'lvsearch retrain')")
    ap.add_argument("--work", help="folder for the built task folders (default: a temporary folder)")
    ap.add_argument("--tasks", nargs="+", choices=sorted(BUILDERS), default=["source6", "polarity_rare"])
    ap.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=["before", "default"])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--name", default="finetune_imbalance", help="result name under benchmarks/results")
    args = ap.parse_args()
    path = result_path(args.name, own=lambda d: str(d.get("what", "")).startswith("imbalanced fine-tuning"))

    import torch

    torch.set_num_threads(1)
    from lvsearch.eval.finetune import FinetuneConfig, finetune_task
    from lvsearch.eval.finetune_floor import finetune_floor
    from lvsearch.eval.finetune_metrics import class_metrics
    from lvsearch.eval.tasks import load_task
    from lvsearch.modeldir import load_model

    data = shared_data_dir()
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="finetune-imbalance-"))
    m = load_model(args.model, device="cpu")
    defaults = FinetuneConfig()
    out = {"what": "imbalanced fine-tuning before / after issue 60 (benchmarks/finetune_imbalance.py)",
           "machine": machine(), "model": str(Path(args.model).resolve()),
           "command": "python benchmarks/finetune_imbalance.py --model MODEL " + " ".join(
               [f"--tasks {' '.join(args.tasks)}", f"--settings {' '.join(args.settings)}", f"--seeds {args.seeds}"]),
           "defaults": {k: getattr(defaults, k) for k in ("epochs", "batch_size", "class_weight", "sampler", "min_steps")},
           "settings": {k: SETTINGS[k] for k in args.settings}, "tasks": {}}
    for tname in args.tasks:
        task = load_task(str(BUILDERS[tname](data, work)))
        cfg0 = FinetuneConfig(seeds=tuple(range(args.seeds)))
        counts = [sum(1 for e in task.splits["train"] if e.label == k) for k in range(task.num_outputs)]
        smallest = counts.index(min(counts))
        t0 = time.perf_counter()
        floor = finetune_floor(task, cfg0)
        fpc = class_metrics(task, [e.label for e in task.splits["test"]], floor["test_predictions"])
        entry = {"label_names": task.label_names, "train_class_counts": counts,
                 "test_class_counts": fpc["support"], "smallest_class": task.label_names[smallest],
                 "floor": {"C": floor["C"], "select_metric": floor["select_metric"],
                           "macro_f1": floor["test"]["macro_f1"], "macro_f1_95": floor_interval(task, floor),
                           "accuracy": floor["test"]["accuracy"], "smallest_f1": fpc["f1"][smallest],
                           "per_class_f1": fpc["f1"], "seconds": time.perf_counter() - t0},
                 "runs": {}}
        out["tasks"][tname] = entry
        print(tname, "floor", entry["floor"], flush=True)
        for sname in args.settings:
            cfg = FinetuneConfig(**{**cfg0.__dict__, **SETTINGS[sname]})
            res = finetune_task(m.encoder, m.tokenizer, task, cfg)
            entry["runs"][sname] = summarise(task, res, floor, smallest)
            r = entry["runs"][sname]
            print(tname, sname, f"macro F1 {r['macro_f1_per_seed']} smallest F1 {r['smallest_f1_per_seed']} "
                  f"never {r['smallest_never_predicted_seeds']} epochs {r['epochs_run']} {r['seconds']:.0f}s", flush=True)
            write_result(args.name, out, path)  # after every setting: a partial run survives
    print(write_result(args.name, out, path))


if __name__ == "__main__":
    run_main(main)
