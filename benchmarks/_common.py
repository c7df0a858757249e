"""Helpers shared by the benchmark scripts: locating ../shared/data, machine facts, JSON output."""

from __future__ import annotations

import os
import platform
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
sys.path.insert(0, str(REPO))


def shared_data_dir() -> Path:
    """``$LVSEARCH_SHARED_DATA`` or ``<repo>/../shared/data``; exits with a reason when absent."""
    env = os.environ.get("LVSEARCH_SHARED_DATA")
    path = Path(env) if env else REPO.parent / "shared" / "data"
    if not path.is_dir():
        raise SystemExit(f"benchmark needs the real data folder: {path} is absent (set LVSEARCH_SHARED_DATA)")
    return path


def machine() -> dict:
    """Facts that make a timing interpretable."""
    import torch

    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
    }


def run_lvsearch(args: list[str], log: Path, threads: int) -> None:
    """Run ``python -m lvsearch ARGS`` (what a user would type) with ``threads`` torch threads,
    appending its output to ``log``; raises ``RuntimeError`` naming the log on a non-zero exit."""
    import subprocess

    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), NO_COLOR="1")
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as fh:
        fh.write(f"\n$ lvsearch {' '.join(args)}\n")
        fh.flush()
        rc = subprocess.call([sys.executable, "-m", "lvsearch", *args], stdout=fh, stderr=subprocess.STDOUT, env=env)
    if rc != 0:
        raise RuntimeError(f"lvsearch {args[0]} failed (exit {rc}); see {log}")


#: Half-width of the equal-size band the search benchmarks hold architectures to (± 5%).
BAND = 0.05


def bert_band(loaded, band: float = BAND) -> tuple[int, int, int]:
    """``(bert's parameter count, low, high)``: ``bert``'s count on a loaded supernet's dims
    (``load_supernet``) and the ± ``band`` interval around it, as ``evolve --min/--max-params``
    take it."""
    from lvsearch.arch import Arch

    ref = loaded.supernet.num_params(Arch.sequential("sf" * (loaded.space.num_slots // 2)))
    return ref, int(ref * (1 - band)), int(ref * (1 + band))


#: Uniform draws tried per requested architecture before :func:`draw_in_band` gives up (the band
#: may hold too few distinct architectures of the space).
DRAWS_PER_ARCH = 1000


def draw_in_band(space, count, lo: int, hi: int, n: int, *, first_seed: int = 0, seen=(),
                 option: str = "--random", also: str = "") -> list[tuple[int, object]]:
    """``n`` distinct architectures drawn uniformly inside a parameter band: ``space.sample(
    random.Random(seed))`` for seed = ``first_seed``, ``first_seed`` + 1, ..., keeping a draw
    when ``lo <= count(arch) <= hi`` (parameters) and its key is neither in ``seen`` (keys of
    architectures listed already) nor drawn before. Returns ``[(seed, Arch), ...]`` in seed
    order; the same arguments give the same draws.

    Raises:
        LvsearchError: ``DRAWS_PER_ARCH * n`` draws gave fewer than ``n`` (the band holds too
            few distinct architectures of the space); the message names ``option``, its fix
            says how many were found (and ``also``, another way out, when given).
    """
    import random

    from lvsearch.errors import LvsearchError

    from lvsearch import ui

    keys, out = set(seen), []
    tries = DRAWS_PER_ARCH * n
    lines = ui.phase_lines()  # a long draw (a large n) prints a [progress] line every 30 s
    task = lines.add_task(f"{option}: drawing in the band", total=n, info="") if lines else None
    for seed in range(first_seed, first_seed + tries):
        if len(out) == n:
            break
        a = space.sample(random.Random(seed))
        if a.key not in keys and lo <= count(a) <= hi:
            keys.add(a.key)
            out.append((seed, a))
        if lines:  # every draw: a band rarely hit still reports
            lines.update(task, completed=len(out), info=f"{seed - first_seed + 1:,} draws")
    if len(out) < n:
        raise LvsearchError(f"{option} {n}: {tries:,} draws of {space.name} gave only {len(out)} distinct "
                            f"architectures inside the band [{lo:,}, {hi:,}] parameters (besides those listed "
                            "already)", fix=f"pass a smaller {option} (these draws found {len(out)}){also}")
    return out


def run_main(main) -> None:
    """Run a benchmark's ``main()`` as the CLI runs a verb: a
    :class:`~lvsearch.errors.LvsearchError` (bad input) is one message ``<script>: error: ...``
    on stderr and exit status 2, no traceback (``LVSEARCH_DEBUG=1`` shows it)."""
    from lvsearch.errors import LvsearchError
    from lvsearch.ui import escape_invisible

    try:
        main()
    except LvsearchError as e:
        if os.environ.get("LVSEARCH_DEBUG"):
            raise
        print(f"{Path(sys.argv[0]).name}: error: {escape_invisible(str(e))}", file=sys.stderr)
        raise SystemExit(2) from None


def result_path(name: str, *, own, option: str = "--name") -> Path:
    """``benchmarks/results/<name>.json``, checked before anything is computed: ``name`` must be
    a plain file name (no folder, no leading dot), and an existing file there must be this
    benchmark's own output (``own(parsed JSON)`` true), which a re-run may replace.

    Raises:
        LvsearchError: a name with a folder part, or an existing file that is not this
            benchmark's output (another benchmark's result, or not JSON): nothing is overwritten.
    """
    import json

    from lvsearch.errors import LvsearchError

    if not name or name != Path(name).name or name.startswith(".") or name.endswith(".json"):
        raise LvsearchError(f"{option} {name!r} is not a result name (a plain file name under {RESULTS}, "
                            "without .json)", fix=f"pass {option} NAME (a file name: letters, digits, _ or -)")
    path = RESULTS / f"{name}.json"
    if path.exists():
        try:
            mine = bool(own(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, AttributeError, TypeError):
            mine = False
        if not mine:
            raise LvsearchError(f"{option} {name}: {path} exists and is not this benchmark's output; it would be "
                                "overwritten", fix=f"pass another {option}")
    return path


#: An absolute POSIX path inside a string: a ``/`` that starts the string or follows a space, a
#: quote, a bracket, ``=``, ``:`` or ``,``, then at least one path component.
ABSOLUTE_PATH = re.compile(r"(?:(?<=^)|(?<=[\s'\"(\[=:,]))/(?:[\w.+@~-]+/?)+")

#: Absolute paths a result may keep: installed tools (``/usr/local/cuda/bin/nvcc``, a compiler
#: under ``/opt``) and ``gpu_check.sh``'s default kernel cache are facts about a machine's
#: software, not where this project's runs or data lived.
MACHINE_PATHS_KEPT = ("/usr/", "/opt/", "/tmp/lvsearch-kernels")


def machine_paths(text: str) -> list[str]:
    """The absolute paths in ``text`` that a committed result must not hold (all but
    :data:`MACHINE_PATHS_KEPT`)."""
    return [m for m in ABSOLUTE_PATH.findall(text) if not m.startswith(MACHINE_PATHS_KEPT)]


def portable_paths(obj):
    """``obj`` (JSON data) with every absolute path in its strings written relative to the repo
    (``os.path.relpath``: ``../shared/data/blimp`` for the data root beside it, ``../runs/SNE``
    for a work folder): committed results carry no machine's layout, and the rewrite is
    one-to-one, so two paths that differed still differ. Dict keys are rewritten too; the
    paths of :data:`MACHINE_PATHS_KEPT` stay as they are."""
    if isinstance(obj, str):
        return ABSOLUTE_PATH.sub(lambda m: m.group(0) if m.group(0).startswith(MACHINE_PATHS_KEPT)
                                 else os.path.relpath(m.group(0), REPO), obj)
    if isinstance(obj, dict):
        return {portable_paths(k): portable_paths(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [portable_paths(v) for v in obj]
    return obj


def write_result(name: str, result: dict, path: Path | None = None) -> Path:
    """Write ``benchmarks/results/<name>.json`` (or ``path``) atomically, with
    :func:`portable_paths`, and return its path."""
    from lvsearch.io import atomic_write_json

    path = path or RESULTS / f"{name}.json"
    atomic_write_json(path, portable_paths(result))
    return path


#: Python code that prints this process's peak resident memory (VmHWM, MiB) on exit, as
#: ``PEAK_RSS_MIB <value>`` on stderr. VmHWM belongs to the address space that execve creates,
#: so, unlike ``ru_maxrss``, it does not inherit the peak of the parent that spawned the child.
REPORT_PEAK_RSS = (
    "import atexit, sys\n"
    "def _peak():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            print('PEAK_RSS_MIB', int(line.split()[1]) / 1024, file=sys.stderr)\n"
    "atexit.register(_peak)\n"
)


def parse_peak_rss(stderr: str) -> float:
    """The value printed by :data:`REPORT_PEAK_RSS` (MiB)."""
    return float(stderr.rsplit("PEAK_RSS_MIB", 1)[1].split()[0])


def prepared_data(given: str | None, tmp: str, vocab_size: int | None = None) -> str:
    """``given`` (a prepared dataset), or the shared corpus prepared into ``tmp`` (with the
    tokenizer's default vocabulary, or ``vocab_size`` pieces)."""
    if given is not None:
        return given
    from lvsearch.data.prepare import prepare

    out = f"{tmp}/corpus"
    from lvsearch.data.prepare import PrepareSettings

    settings = PrepareSettings(vocab_size=vocab_size) if vocab_size else None
    prepare([str(shared_data_dir() / "corpora")], out, settings, show_progress=False)
    return out


# ----------------------------------------------------------------------------------------
# --executor (lvsearch/dispatch.py) for the scripts that run many trainings
# ----------------------------------------------------------------------------------------


def add_dispatch(p, what: str) -> None:
    """``--executor``, ``--max-parallel`` and ``--slurm-*`` (lvsearch.dispatch) on a benchmark
    script; ``inline`` (the default) keeps the script's own ``--jobs`` thread pool."""
    from lvsearch.dispatch import add_dispatch_arguments

    add_dispatch_arguments(p, what, inline="this script's --jobs thread pool, which local or slurm replaces")


def dispatch_options(args):
    """The parsed dispatch options. For ``local``/``slurm`` the jobs, functions of this script
    pickled by submitit, must import ``_common`` and lvsearch in their own process: this folder
    and the repository are put on ``PYTHONPATH``, which the jobs inherit.

    Raises:
        LvsearchError: a bad combination (:func:`lvsearch.dispatch.options_from_args`); under
            :func:`run_main` one message and exit status 2.
    """
    from lvsearch.dispatch import options_from_args

    opts = options_from_args(args)
    if not opts.inline:
        here = str(Path(__file__).resolve().parent)
        os.environ["PYTHONPATH"] = os.pathsep.join([here, str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    return opts


def dispatch_stage(opts, jobs: list, folder: Path, failures: dict) -> dict:
    """Run one stage of independent jobs (``lvsearch.dispatch.Job``) with ``opts``, printing
    each result; failed jobs are added to ``failures`` (name -> (error, log)) and the others'
    results returned (every job of the stage runs to its end)."""
    from lvsearch.dispatch import DispatchError, run_jobs

    try:
        results = run_jobs(jobs, opts, folder, ui_label="job")
    except DispatchError as e:
        results = e.results
        failures.update(e.failures)
    for value in results.values():
        print(value, flush=True)
    return results


def exit_on_failures(failures: dict, total: int) -> None:
    """Exit non-zero listing every failed job with its log (after every stage has run)."""
    if failures:
        from lvsearch.dispatch import DispatchError

        raise SystemExit(str(DispatchError(failures, {}, total)))


def best_at_passes(history: list[dict], marks: list[int]) -> list[float | None]:
    """A search's best-so-far curve at equal compute: for each n in ``marks`` (dev-sequence
    passes), the best complete fitness among the evaluations made within the first n passes
    (the running sum of each ``history.jsonl`` entry's ``sequences``; partial, i.e. raced-out,
    and rejected entries do not count). None at a mark before any complete evaluation."""
    out, best, spent, i = [], None, 0, 0
    for n in marks:
        while i < len(history) and spent + history[i]["sequences"] <= n:
            r = history[i]
            spent += r["sequences"]
            if r.get("fitness") is not None and not r.get("partial") and not r.get("rejected"):
                best = r["fitness"] if best is None else max(best, r["fitness"])
            i += 1
        out.append(best)
    return out


def history_points(folder: Path):
    """``(n, 2)`` numpy array of (fitness, predicted latency ms) of every complete candidate a
    search scored (its ``history.jsonl``; partial, i.e. raced-out, entries left out)."""
    import json

    import numpy as np

    rows = [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines() if line.strip()]
    return np.array([(r["fitness"], r["latency_ms"]) for r in rows
                     if r.get("fitness") is not None and not r.get("partial")], dtype=float).reshape(-1, 2)


def pareto_front(p):
    """The non-dominated rows of an ``(n, 2)`` array of (fitness, latency) — fitness maximised,
    latency minimised — ordered by increasing latency."""
    import numpy as np

    keep = [i for i, (f, t) in enumerate(p)
            if not np.any((p[:, 0] >= f) & (p[:, 1] <= t) & ((p[:, 0] > f) | (p[:, 1] < t)))]
    q = p[keep]
    return q[np.argsort(q[:, 1], kind="stable")]


def paired_rows(pa: dict, pb: dict, seeds: list[str], curve: str, unit: str, marks: list) -> list[dict]:
    """Per mark, the paired difference a − b of two searches' ``curve`` (``pa[seed][curve]``,
    one value per mark, None where a search has none yet) over ``seeds``: the mean, its Student-t
    95% interval over seeds (:func:`lvsearch.stats.t_interval`; None under 2 seeds) and how many
    seeds a leads; ``unit`` names the mark in each row."""
    import numpy as np

    from lvsearch.stats import t_interval

    rows = []
    for i, n in enumerate(marks):
        d = [pa[s][curve][i] - pb[s][curve][i] for s in seeds
             if pa[s][curve][i] is not None and pb[s][curve][i] is not None]
        ci = t_interval(d)
        rows.append({unit: n, "seeds": len(d), "mean_difference": float(np.mean(d)) if d else None,
                     "t_95": list(ci) if ci is not None else None, "ahead": sum(x > 0 for x in d)})
    return rows


# ----------------------------------------------------------------------------------------
# The Hugging Face peer (learning_efficiency.py, mfu.py)
# ----------------------------------------------------------------------------------------


def hf_mlm_peer(cfg, data, layers: int):
    """HF ``BertForMaskedLM`` at a retrain recipe's width (hidden, heads, FF inner size) with
    ``layers`` layers (one per SA+FF pair of ``bert``), HF defaults otherwise (post-LN, dropout
    0.1, absolute positions, no embedding projection), seeded by ``cfg.train.seed``.

    Returns ``(module, forward, params)``: ``module(input_ids, labels)`` returns the loop's sums
    (``loss_sum``, ``count``, ``correct``) at the targets; ``forward(ids, labels)`` the logits and
    gold ids at the targets. HF's head scores every position; the loss reads the targets only."""
    import torch

    from transformers import BertConfig, BertForMaskedLM

    from lvsearch.data.masking import IGNORE_INDEX

    dims = cfg.model_settings().dims(data.vocab_size, data.special_ids.pad, cfg.train.seq_len)
    hf_cfg = BertConfig(vocab_size=data.vocab_size, hidden_size=dims.hidden, num_hidden_layers=layers,
                        num_attention_heads=dims.heads, intermediate_size=dims.ff_inner,
                        max_position_embeddings=max(512, cfg.train.seq_len), pad_token_id=data.special_ids.pad)
    torch.manual_seed(cfg.train.seed)
    model = BertForMaskedLM(hf_cfg)

    class Peer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, labels):
            logits = self.model(input_ids=input_ids).logits
            sel = labels != IGNORE_INDEX
            lg, gold = logits[sel].float(), labels[sel]
            return {"loss_sum": torch.nn.functional.cross_entropy(lg, gold, reduction="sum"),
                    "count": sel.sum().detach(), "correct": (lg.argmax(-1) == gold).sum().detach()}

    def forward(ids, labels):
        sel = labels != IGNORE_INDEX
        return model(input_ids=ids).logits[sel].float(), labels[sel]

    return Peer(), forward, sum(p.numel() for p in model.parameters())


def hf_bert_flops_per_token(hidden: int, ff_inner: int, layers: int, vocab_size: int, seq_len: int) -> float:
    """Forward matmul FLOPs per token of HF ``BertForMaskedLM`` (1 multiply-add = 2 FLOPs),
    counted as :func:`lvsearch.model.encoder.flops_per_token` counts: per layer ``8 H^2``
    (Q, K, V, output) ``+ 4 L H`` (scores, weighted values) ``+ 4 H I`` (FF); the head at every
    position (HF scores all of them): transform ``2 H^2`` + decoder ``2 H V``."""
    H = hidden
    return float(layers * (8 * H * H + 4 * seq_len * H + 4 * H * ff_inner) + 2 * H * H + 2 * H * vocab_size)
