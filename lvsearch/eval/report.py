"""Comparison tables and α heatmaps of evaluation reports (``lvsearch report``).

One implementation of the comparison table, :func:`comparison_table`, feeds three outputs:
the terminal table of ``lvsearch evaluate --compare``, the Markdown file ``lvsearch evaluate``
writes next to its JSON report (one column), and ``report.md`` of ``lvsearch report`` (one
column per model). Reports are the JSON files written by ``lvsearch evaluate``
(format ``lvsearch.eval-report/v1``); see :mod:`lvsearch.eval.job`. Each table has the
reference floors of :mod:`lvsearch.eval.floors` under the MLM rows, and a model that does not
beat its neighbour-count floor gets a sentence saying it has not learned past local
co-occurrence (its BLiMP/task differences are not architecture effects).

The α heatmap follows ELC-BERT (Charpentier & Samuel 2023, Figure 1): rows are slots 1..N,
columns are inputs 0..N-1 (0 = embedding output), each cell is α = softmax of the slot's mixing
logits over the inputs it reads (0 for inputs it does not read; every row sums to 1), taken
from ``Encoder.alpha_matrix()`` of the loaded model. A purely sequential architecture gives a
one-hot (shifted identity) matrix; it is drawn all the same.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
import os
from pathlib import Path
from typing import Sequence

from lvsearch.errors import LvsearchError
from lvsearch.io import check_writable_folder, folder_kind
from lvsearch.lock import holds_output

REPORT_FORMAT = "lvsearch.eval-report/v1"
DEFAULT_REPORT_NAME = "results.json"
REPORT_MD = "report.md"
_EVALUATE_FIRST = "run 'lvsearch evaluate --model MODEL_DIR' first (it writes MODEL_DIR/results.json)"


def _fmt(v, digits: int = 4) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def summary_rows(report: dict) -> list[tuple[str, str]]:
    """``(metric, value)`` rows of one report: BLiMP (mean over paradigms and pairs, pairs /
    ties, per phenomenon, sentences/s), fine-tuning (``TASK SPLIT METRIC`` → mean ± sample std
    (median, n) over the seeds whose training loss fell, ``± unmeasured (1 seed)`` with one seed; test when labeled, else dev; a task whose
    every seed failed shows :data:`~lvsearch.eval.finetune.FAILED_TEXT`; multi-class and imbalanced tasks add
    ``TASK SPLIT F1 of class C (n=support)`` rows with precision, recall and the seeds that never
    predict the class), MLM dev accuracy / loss (nats) and the
    reference floors on the same dev targets (``MLM floor · unigram``, ``MLM floor ·
    neighbour-count (N tokens)`` with N the training tokens the model saw, and whether the model
    beats the neighbour-count floor). Stages that were skipped or not applicable, and floors that
    are unavailable, give one row with their status and reason."""
    rows: list[tuple[str, str]] = []
    blimp = report.get("blimp") or {}
    if blimp.get("status") == "done":
        rows.append(("BLiMP mean over paradigms", _fmt(blimp["mean_over_paradigms"])))
        rows.append(("BLiMP mean over pairs", _fmt(blimp["mean_over_pairs"])))
        rows.append(("BLiMP pairs / ties", f"{blimp['pairs']} / {blimp['ties']}"))
        for term, r in blimp["phenomena"].items():
            rows.append((f"  {term}", _fmt(r["accuracy"])))
        if blimp.get("metric"):
            rows.append(("BLiMP metric", f"{blimp['metric']} ({blimp.get('precision')})"))
        bf = blimp.get("floor") or {}
        if bf.get("status") == "done":
            rows.append((f"BLiMP floor · {bf['order']}-gram Kneser-Ney ({bf['tokens_seen']:,} tokens)",
                         _fmt(bf["mean_over_paradigms"])))
            if bf.get("vs_floor"):
                rows.append(("BLiMP − floor", _ci(bf["vs_floor"])))
        elif bf:
            rows.append(("BLiMP floor", f"{bf.get('status')}: {bf.get('reason')}"))
        sps = blimp.get("sentences_per_second")
        rows.append(("BLiMP sentences/s", "—" if sps is None else f"{sps:.0f}"))
    elif blimp:
        rows.append(("BLiMP", f"{blimp.get('status')}: {blimp.get('reason')}"))
    from lvsearch.eval.finetune import FAILED_TEXT

    for name, ft in (report.get("finetune") or {}).items():
        split = "test" if "test" in ft["aggregate"] else "dev"
        n_failed, n_seeds = len(ft.get("failed_seeds") or []), len(ft.get("per_seed") or [])
        multi = len(ft.get("label_names") or []) > 2
        for metric, s in ft["aggregate"][split].items():
            label = (ft.get("metric_labels") or {}).get(metric, metric)
            if metric == "f1" and multi and "macro_f1" in ft["aggregate"][split]:
                continue  # the multi-class f1 is the macro F1 row
            if ft.get("status") == "failed":
                rows.append((f"{name} {split} {label}", FAILED_TEXT))
                continue
            if s["mean"] is None:
                continue
            note = f"; {n_failed} of {n_seeds} seeds {FAILED_TEXT}" if n_failed else ""
            spread = f" ± {s['std']:.4f}" if s.get("std") is not None else " ± unmeasured (1 seed)"
            rows.append((f"{name} {split} {label}",
                         f"{s['mean']:.4f}{spread} (median {s['median']:.4f}, n={s['n']}{note})"))
        rows += _class_rows(name, split, ft)
        fl = ft.get("floor") or {}
        if fl.get("status") == "done" and fl.get(split):
            m = ft.get("select_metric")
            rows.append((f"{name} {split} {m} floor · bag of words (C={fl['C']:g})", _fmt(fl[split].get(m))))
            if ft.get("vs_floor"):
                rows.append((f"{name} {split} {m} − floor", _ci(ft["vs_floor"])))
    mlm = report.get("mlm") or {}
    if mlm.get("status") == "done":
        rows.append(("MLM dev accuracy", _fmt(mlm["accuracy"])))
        rows.append(("MLM dev loss", _fmt(mlm["loss"])))
        rows += floor_rows(mlm)
    elif mlm:
        rows.append(("MLM", f"{mlm.get('status')}: {mlm.get('reason')}"))
    return rows


def _class_rows(name: str, split: str, ft: dict) -> list[tuple[str, str]]:
    """One row per class (F1 mean ± std, precision, recall, and the seeds that never predict it)
    of a multi-class or imbalanced task's ``per_class`` entry (none for binary balanced tasks,
    regression, failed tasks and reports written before per-class metrics existed)."""
    per = (ft.get("per_class") or {}).get(split)
    if not per or ft.get("status") == "failed" or (len(per) <= 2 and ft.get("select_metric") == "accuracy"):
        return []
    rows = []
    for cls, v in per.items():
        f1, p, r = v["f1"], v["precision"], v["recall"]
        if f1["mean"] is None:
            continue
        spread = f" ± {f1['std']:.4f}" if f1.get("std") is not None else ""
        never = f"; never predicted in {v['never_predicted_seeds']} of {f1['n']} seeds" if v["never_predicted_seeds"] else ""
        rows.append((f"{name} {split} F1 of class {cls} (n={v['support']})",
                     f"{f1['mean']:.4f}{spread} (precision {p['mean']:.4f}, recall {r['mean']:.4f}{never})"))
    return rows


def floor_rows(mlm: dict) -> list[tuple[str, str]]:
    """Rows of the reference floors of one report's ``mlm`` entry (none for reports written
    before floors existed)."""
    from lvsearch.eval.floors import NOT_PAST_FLOOR

    floors = mlm.get("floors")
    if not isinstance(floors, dict):
        return []
    if floors.get("status") != "done":
        return [("MLM floors", f"{floors.get('status')}: {floors.get('reason')}")]
    rows = [("MLM floor · unigram", _fmt(floors["unigram"]["accuracy"])),
            (f"MLM floor · neighbour-count ({floors['tokens_seen']:,} tokens)", _fmt(floors["neighbour-count"]["accuracy"]))]
    beats = floors.get("beats_floor")
    if floors.get("vs_floor"):
        rows.append(("MLM − neighbour-count floor", _ci(floors["vs_floor"])))
    if beats is not None:
        rows.append(("MLM beats neighbour-count floor", "yes" if beats else f"no: {NOT_PAST_FLOOR}"))
    return rows


def _ci(v: dict) -> str:
    lo, hi = v["ci"]
    return f"{v['difference']:+.4f} (95% CI [{lo:+.4f}, {hi:+.4f}])"


def _verdict(v: dict | None) -> str:
    """``beats its floor`` (interval above 0), ``is below its floor`` (interval below 0) or
    ``does not beat its floor (within noise of it)``, with the difference and its interval."""
    if not v:
        return "unmeasured"
    if v["beats"]:
        return f"beats its floor, {_ci(v)}"
    if v["ci"][1] < 0:
        return f"is below its floor, {_ci(v)}"
    return f"does not beat its floor (within noise of it), {_ci(v)}"


def verdicts(report: dict) -> list[tuple[str, str]]:
    """``(what, verdict)`` per floor of one report: MLM (neighbour-count), BLiMP (n-gram) and
    each fine-tuning task (bag of words), each "beats", "is below" or "does not beat its floor (within
    noise of it)" with model −
    floor and its paired-bootstrap 95% interval (beats = the interval lies above 0), or why
    there is no verdict."""
    out = []
    floors = (report.get("mlm") or {}).get("floors") or {}
    if floors.get("status") == "done":
        out.append(("MLM (neighbour-count floor)", _verdict(floors.get("vs_floor"))))
    elif floors:
        out.append(("MLM (neighbour-count floor)", f"no verdict: {floors.get('reason')}"))
    bf = (report.get("blimp") or {}).get("floor") or {}
    if bf.get("status") == "done":
        out.append((f"BLiMP ({bf.get('order')}-gram Kneser-Ney floor)", _verdict(bf.get("vs_floor"))))
    elif bf:
        out.append(("BLiMP (n-gram floor)", f"no verdict: {bf.get('reason')}"))
    from lvsearch.eval.finetune import FAILED_TEXT

    for name, ft in (report.get("finetune") or {}).items():
        if not ft.get("floor"):
            continue
        label = f"{name} test {ft.get('select_metric')} (bag-of-words floor)"
        if ft.get("status") == "failed":
            out.append((label, f"does not beat its floor: {FAILED_TEXT}"))
        else:
            out.append((label, _verdict(ft.get("vs_floor"))))
    return out


def verdict_lines(reports: Sequence[dict], names: Sequence[str]) -> list[str]:
    """Markdown lines leading every report: for each model, its :func:`verdicts` (empty when no
    report holds floors)."""
    per = [(n, verdicts(r)) for r, n in zip(reports, names)]
    if not any(v for _, v in per):
        return []
    lines = ["## Verdict against the floors", ""]
    for name, vs in per:
        lines.append(f"- **{name}**: " + "; ".join(f"{w} {v}" for w, v in vs) if vs else f"- **{name}**: no floors")
    return lines + [""]


def floor_notes(reports: Sequence[dict], names: Sequence[str]) -> list[str]:
    """One sentence per model that does not beat its neighbour-count floor: it has not learned
    past local co-occurrence, so its BLiMP/task differences are not architecture effects."""
    from lvsearch.eval.floors import NOT_ARCH_EFFECT, NOT_PAST_FLOOR

    notes = []
    for report, name in zip(reports, names):
        mlm = report.get("mlm") or {}
        floors = mlm.get("floors") or {}
        if floors.get("status") == "done" and floors.get("beats_floor") is False:
            notes.append(f"{name} {NOT_PAST_FLOOR}: its MLM dev accuracy {mlm['accuracy']:.4f} is not above the "
                         f"neighbour-count floor {floors['neighbour-count']['accuracy']:.4f} at the "
                         f"{floors['tokens_seen']:,} training tokens it saw, so {NOT_ARCH_EFFECT}.")
    return notes


def arch_compact(report: dict) -> str:
    """Compact op string of the report's model (``"sfsf"``, variants as suffixes ``"s(h2)f"``),
    with ``+mixing`` when some slot
    reads several inputs (the full inputs are in the α heatmap and the JSON)."""
    from lvsearch.arch import Arch

    config = report["model"]["config"]
    if is_hf_report(report) and not config.get("arch"):
        return f"hf {config['hf']['model_type']}"
    arch = Arch.from_dict(config["arch"])
    return arch.compact if arch.is_sequential else f"{arch.compact} +mixing"


def is_hf_report(report: dict) -> bool:
    """Whether the report is of a Hugging Face model (``lvsearch evaluate --model hf:...``)."""
    return report["model"]["config"].get("source") == "hf"


def comparison_table(reports: Sequence[dict]) -> list[tuple[str, list[str]]]:
    """Rows ``(metric, [value per report])``: parameters, objective, arch, then the union of
    :func:`summary_rows` in first-seen order; a metric missing from a report shows as ``—``."""
    per = [dict(summary_rows(r)) for r in reports]
    keys: list[str] = []
    for r in reports:
        for k, _ in summary_rows(r):
            if k not in keys:
                keys.append(k)
    rows: list[tuple[str, list[str]]] = [
        ("parameters", [f"{r['model']['num_params']:,}" for r in reports]),
        ("objective", [r["model"]["config"]["objective"] for r in reports]),
        ("arch", [arch_compact(r) for r in reports]),
    ]
    rows += [(k, [d.get(k, "—") for d in per]) for k in keys]
    return rows


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip() or " "


def markdown_table(reports: Sequence[dict], names: Sequence[str]) -> str:
    """A GitHub-flavoured Markdown table of :func:`comparison_table`, one column per report,
    headed by ``names`` (``|`` in cells is escaped)."""
    lines = ["| metric | " + " | ".join(_md_cell(n) for n in names) + " |",
             "|---|" + "---:|" * len(names)]
    for metric, values in comparison_table(reports):
        label = metric.strip()
        if metric.startswith("  "):  # a BLiMP phenomenon
            label = f"BLiMP · {label}"
        lines.append(f"| {_md_cell(label)} | " + " | ".join(_md_cell(v) for v in values) + " |")
    return "\n".join(lines) + "\n"


def single_report_markdown(report: dict) -> str:
    """The Markdown file ``lvsearch evaluate`` writes beside its JSON report."""
    m = report["model"]
    head = (f"# Evaluation of {m['name']}\n\n"
            f"Model folder: `{m['folder']}` · {m['num_params']:,} parameters · objective "
            f"{m['config']['objective']} · lvsearch {report.get('lvsearch_version', '?')}\n\n")
    notes = floor_notes([report], [m["name"]])
    verdict = "\n".join(verdict_lines([report], [m["name"]]))
    return head + (verdict + "\n" if verdict else "") + markdown_table([report], [m["name"]]) + "".join(f"\n{n}\n" for n in notes)


def check_report(report, path: Path) -> dict:
    """Check a parsed report against :class:`lvsearch.eval.schema.EvalReport` (every field the
    tables read, with its type) and its architecture, and return it.

    Raises:
        LvsearchError: not an ``lvsearch.eval-report/v1`` object, or a field the tables read
            is missing or of the wrong type (the message names it), or its ``model.config.arch``
            is not a valid architecture.
    """
    from lvsearch.eval.schema import EvalReport
    from lvsearch.io import check_fields

    fix = ("regenerate it with 'lvsearch evaluate --model MODEL_DIR' (it writes MODEL_DIR/results.json; "
           "--out FILE for another file), or pass another report")
    if not isinstance(report, dict) or report.get("format") != REPORT_FORMAT:
        raise LvsearchError(f"{path} is not an lvsearch evaluation report (format {REPORT_FORMAT!r} expected)", fix=fix)
    check_fields(report, EvalReport, path, what="evaluation report", fix=fix)
    try:
        arch_compact(report)
    except LvsearchError as e:
        raise LvsearchError(f"evaluation report {path} is malformed: {str(e).splitlines()[0]}", fix=fix) from None
    except (KeyError, TypeError) as e:  # a Hugging Face model's config.hf
        detail = f"missing key {e}" if isinstance(e, KeyError) else "unexpected structure"
        raise LvsearchError(f"evaluation report {path} is malformed (model.config: {detail})", fix=fix) from None
    return report


def read_report(path: str | Path) -> dict:
    """Read and check one report JSON. Raises LvsearchError (missing, not JSON, malformed)."""
    from lvsearch.io import read_json

    path = Path(path)
    return check_report(read_json(path, what="evaluation report",
                                  regenerate=f"lvsearch evaluate --model MODEL --out {path} --overwrite"), path)


@dataclass
class ReportSource:
    """One column of ``lvsearch report``: its label, report path, report and model folder."""

    label: str
    report_path: Path
    report: dict
    model_dir: Path | None  # None for a Hugging Face model (no α)


def resolve_sources(arg: str) -> list[ReportSource]:
    """The columns ``arg`` stands for: one (:func:`resolve_source`), or for a quickstart's
    folders, whose reports are in ``OUT/eval/`` (:func:`lvsearch.quickstart.files.quickstart_reports`),
    one per run of the quickstart folder ``OUT``, or the one of an arm's run ``OUT/retrain/NAME``,
    each labelled with its run name.

    Raises:
        LvsearchError: as :func:`resolve_source`; a quickstart run whose report is not written
            yet (the fix: finish the quickstart).
    """
    p = Path(arg)
    if p.is_dir() and not any((f / DEFAULT_REPORT_NAME).is_file() for f in (p, p / "model")):
        from lvsearch.quickstart.files import quickstart_reports

        found = quickstart_reports(p)
        if found is not None:
            missing = [str(path) for _, path in found if not path.is_file()]
            if missing:
                raise LvsearchError(f"quickstart folder {p}: no evaluation report yet at {', '.join(missing)}",
                                    fix="finish the quickstart: re-run the same 'lvsearch quickstart' command (its "
                                        "evaluate stage writes them)")
            return [_file_source(path, label=name) for name, path in found]
    return [resolve_source(arg)]


def resolve_source(arg: str) -> ReportSource:
    """Find the report of a retrain run folder (``RUN/model/results.json``), a model
    directory (``MODEL/results.json``) or a report JSON file, and the model directory whose
    weights give α (a JSON file's recorded ``model.folder``, else the file's own folder).

    Raises:
        LvsearchError: the path does not exist, holds no report (says to run ``lvsearch
            evaluate``), the report is malformed, or its model directory is gone.
    """
    p = Path(arg)
    if not p.exists():
        raise LvsearchError(f"{p} not found", fix="pass a retrain run folder, a model directory or a results.json")
    if p.is_dir():
        for folder, label in ((p, p.name), (p / "model", p.name)):
            if (folder / DEFAULT_REPORT_NAME).is_file():
                report_path, model_dir = folder / DEFAULT_REPORT_NAME, folder
                break
        else:
            kind = "model directory" if (p / "config.json").is_file() else \
                "retrain run folder" if (p / "model" / "config.json").is_file() else "folder"
            raise LvsearchError(f"{kind} {p} has no evaluation report ({DEFAULT_REPORT_NAME} in it or in its model/)",
                                fix=_EVALUATE_FIRST)
        if label == "model" and p.resolve().parent.name:  # RUN/model given directly: name it after RUN
            label = p.resolve().parent.name
        report = read_report(report_path)
        if is_hf_report(report):
            model_dir = None
        else:
            _check_report_is_of(report, report_path, model_dir)
    else:
        return _file_source(p)
    return ReportSource(label=label, report_path=report_path, report=report, model_dir=model_dir)


def _check_report_is_of(report: dict, report_path: Path, model_dir: Path) -> None:
    """The report found in a model folder must be that model's: its recorded model config (the
    architecture and widths) equals the folder's ``config.json``. A report written there for
    another model (``evaluate --model A --out B/model/results.json``) would be shown under B's
    name with A's numbers.

    Raises:
        LvsearchError: naming both models and the command that evaluates the folder's own.
    """
    from lvsearch.io import read_json

    recorded = (report.get("model") or {}).get("config")
    config_path = model_dir / "config.json"
    if not isinstance(recorded, dict) or not config_path.is_file():
        return
    if read_json(config_path, what="model config") != recorded:
        raise LvsearchError(f"{report_path} is the evaluation of another model ({report['model'].get('folder')}), "
                            f"not of {model_dir}: its recorded model config differs from {config_path}",
                            fix=f"evaluate this model into its own folder: lvsearch evaluate --model {model_dir} "
                                "--overwrite")


def report_label(path: str | Path, report: dict) -> str:
    """The column name of the report JSON ``path`` (``report``, its content): the file's stem,
    or for a model directory's default ``results.json`` the model folder's name, or the run's
    name where that folder is ``RUN/model``."""
    p = Path(path)
    if p.name != DEFAULT_REPORT_NAME:
        return p.stem
    folder = Path((report.get("model") or {}).get("folder") or p.parent)
    if is_hf_report(report):
        return folder.name
    model_dir = folder if (folder / "config.json").is_file() else p.parent
    return (model_dir.resolve().parent.name or model_dir.name) if model_dir.name == "model" else model_dir.name


def unique_labels(labels: list[str]) -> list[str]:
    """``labels`` with repeats numbered (``bert``, ``bert#2``), so every column has its own name."""
    seen: dict[str, int] = {}
    out = []
    for lab in labels:
        seen[lab] = seen.get(lab, 0) + 1
        out.append(lab if seen[lab] == 1 else f"{lab}#{seen[lab]}")
    return out


def _file_source(p: Path, label: str | None = None) -> ReportSource:
    """The column of the report JSON file ``p`` (see :func:`resolve_source`), labelled ``label``
    or after the file."""
    if p.suffix.lower() != ".json":  # a user's notes.txt: not a report (and not to be written over)
        raise LvsearchError(f"{p} is not an evaluation report (a .json file written by 'lvsearch evaluate --out')",
                            fix="pass a retrain run folder, a model directory, a report JSON or a quickstart folder")
    report = read_report(p)
    if is_hf_report(report):
        return ReportSource(label=label or report_label(p, report), report_path=p, report=report, model_dir=None)
    recorded = Path(report["model"]["folder"])
    model_dir = recorded if (recorded / "config.json").is_file() else p.parent
    if not (model_dir / "config.json").is_file():
        raise LvsearchError(f"the model directory of report {p} ({recorded}) is gone; the α heatmap needs its weights",
                            fix="pass the model directory or run folder instead, or restore the model")
    return ReportSource(label=label or report_label(p, report), report_path=p, report=report, model_dir=model_dir)


def heatmap_name(label: str) -> str:
    """File name of a model's α heatmap: ``alpha_<label>.png`` (unsafe characters → ``_``)."""
    return "alpha_" + (re.sub(r"[^A-Za-z0-9._-]+", "_", label).strip("._") or "model") + ".png"


def plot_alpha(alpha, ops: Sequence[str], title: str, path: str | Path) -> None:
    """Draw α as an ELC-BERT Figure 1 style heatmap PNG (matplotlib, Agg backend).

    Args:
        alpha: ``(N, N)`` array-like; row ``n-1`` = slot ``n``, column ``i`` = input ``i``.
        ops: the N slots' op codes with their variant suffixes (``"SA"``, ``"FF(i0.5)"``, ...,
            :meth:`Arch.slot_code`), used as row labels.
        title: figure title (the arch's compact string).
        path: output PNG, written atomically.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from lvsearch.io import save_figure

    a = np.asarray(alpha, dtype=float)
    n = a.shape[0]
    size = min(2.0 + 0.35 * n, 12.0)
    fig, ax = plt.subplots(figsize=(size + 1.2, size))
    cmap = matplotlib.colormaps["viridis"].copy()
    cmap.set_bad("#f2f2f2")  # inputs the slot does not read (α exactly 0) vs a learned α ≈ 0
    im = ax.imshow(np.ma.masked_where(a == 0, a), cmap=cmap, vmin=0.0, vmax=1.0, aspect="equal")
    ax.set_xticks(range(n))
    ax.set_xticklabels([str(i) for i in range(n)], fontsize=7)
    ax.set_yticks(range(n))
    ax.set_yticklabels([f"{i + 1} {op}" for i, op in enumerate(ops)], fontsize=7)
    ax.set_xlabel("input (0 = embeddings, i = output of slot i)")
    ax.set_ylabel("slot")
    ax.set_title(title, fontsize=9)
    if n <= 12:
        for r in range(n):
            for c in range(n):
                if a[r, c] > 0:
                    ax.text(c, r, f"{a[r, c]:.2f}", ha="center", va="center", fontsize=6,
                            color="black" if a[r, c] > 0.6 else "white")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="α")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)


def _alpha_section(label: str, arch, alpha) -> list[str]:
    """Markdown lines listing the α of every slot that mixes several inputs."""
    lines = []
    for n, inputs in enumerate(arch.inputs, start=1):
        if len(inputs) > 1:
            parts = ", ".join(f"h{i} {float(alpha[n - 1, i]):.3f}" for i in inputs)
            lines.append(f"- {label}, slot {n} ({arch.label(n)}): {parts}")
    return lines


@holds_output("out")
def write_report(sources: Sequence[str], out: str | Path, *, overwrite: bool = False) -> dict:
    """``lvsearch report``: ``OUT/report.md`` (one column per model) and one α heatmap PNG per
    model (``OUT/alpha_<label>.png``).

    Args:
        sources: run folders, model directories, report JSON files, a quickstart folder or one of
            its arms' retrain runs (see :func:`resolve_sources`).
        out: output folder (created).
        overwrite: replace files of a previous report in ``out``.

    Returns:
        ``{"markdown": Path, "heatmaps": {label: Path}, "labels": [...]}``.

    Raises:
        LvsearchError: see :func:`resolve_source`; ``out`` is a file; ``out`` already holds
            ``report.md`` or one of the PNGs and ``overwrite`` is false (checked before any
            model is loaded; nothing is written then).
    """
    from lvsearch.io import atomic_write_bytes
    from lvsearch.modeldir import load_model

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise LvsearchError(f"--out {out} is a file", fix="pass a folder (default: ./report)")
    # a quickstart's own report.md, a model folder, a dataset, a run, or a folder inside one
    for folder in (Path(os.path.abspath(out)), *Path(os.path.abspath(out)).parents):
        kind = folder_kind(folder)
        if kind is not None:
            where = "" if folder == Path(os.path.abspath(out)) else f" (inside {folder})"
            raise LvsearchError(f"--out {out} is in a folder that holds {kind}{where}; the side-by-side report "
                                "writes report.md and PNGs there (refused with or without --overwrite)",
                                fix="pass an --out outside lvsearch's run, model and data folders (default: ./report)")
    check_writable_folder(out)
    resolved = [r for s in sources for r in resolve_sources(s)]
    labels = unique_labels([s.label for s in resolved])
    targets = [out / REPORT_MD] + [out / heatmap_name(lab) for lab in labels]
    if len({t.name for t in targets}) != len(targets):
        raise LvsearchError("two models would get the same heatmap file name", fix="rename one of the folders")
    existing = [t.name for t in targets if t.exists()]
    if existing and not overwrite:
        raise LvsearchError(f"--out {out} already holds {', '.join(existing)}", fix="pass --overwrite to replace them, or another --out")

    heatmaps: dict[str, Path] = {}
    alpha_lines: list[str] = []
    hf_lines: list[str] = []
    for src, lab in zip(resolved, labels):
        if src.model_dir is None:
            hf_lines.append(f"- {lab}: a Hugging Face model ({arch_compact(src.report)}): no α heatmap")
            continue
        loaded = load_model(src.model_dir)
        alpha = loaded.encoder.alpha_matrix()
        title = f"{lab}: {loaded.arch.compact}"
        path = out / heatmap_name(lab)
        plot_alpha(alpha.numpy(), [loaded.arch.slot_code(n) for n in range(1, loaded.arch.num_slots + 1)], title, path)
        heatmaps[lab] = path
        alpha_lines += _alpha_section(lab, loaded.arch, alpha)

    md = ["# lvsearch report", "",
          "Models: " + ", ".join(f"**{lab}** (`{s.report_path}`)" for lab, s in zip(labels, resolved)), "",
          *verdict_lines([s.report for s in resolved], labels),
          "## Differences between models" if any(verdicts(s.report) for s in resolved) else "", "",
          markdown_table([s.report for s in resolved], labels)]
    for note in floor_notes([s.report for s in resolved], labels):
        md += [note, ""]
    md += ["## α (ELC-BERT layer mixing)", "",
           "Heatmaps (rows = slots, columns = inputs 0..N-1, α = softmax over each slot's inputs):", ""]
    md += [f"- {lab}: ![{lab}]({p.name})" for lab, p in heatmaps.items()]
    md += ["", "Slots that mix several inputs:" if alpha_lines else "Every slot reads one input (sequential): α is one-hot.", ""]
    md += alpha_lines
    if hf_lines:
        md += ["", *hf_lines]
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out / REPORT_MD, ("\n".join(md).rstrip() + "\n").encode("utf-8"))
    return {"markdown": out / REPORT_MD, "heatmaps": heatmaps, "labels": labels}


def is_eval_report(path: Path) -> bool:
    """Whether ``path`` is an evaluation report this verb wrote (a JSON file of
    :data:`REPORT_FORMAT`): the only file ``evaluate --overwrite`` replaces."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 20)
        return json.loads(head.decode("utf-8")).get("format") == REPORT_FORMAT
    except (OSError, ValueError, AttributeError, UnicodeDecodeError):
        return False


def is_eval_markdown(path: Path) -> bool:
    """Whether ``path`` is the Markdown table an evaluation wrote (it opens with
    ``# Evaluation of``) or sits beside a report this verb wrote."""
    try:
        with open(path, "rb") as fh:
            return fh.read(16).startswith(b"# Evaluation of") or is_eval_report(path.with_suffix(".json"))
    except OSError:
        return False
