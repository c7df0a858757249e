"""Record a finished ``lvsearch quickstart`` run as JSON, from its own files (no model is run).

Reads ``OUT/quickstart.json`` (plan, per-stage seconds), ``OUT/eval/ARM.json`` (each arm's MLM,
BLiMP and fine-tuning scores with their floor comparisons, as ``lvsearch evaluate`` wrote
them), each arm's ``model.safetensors`` (sha256), ``OUT/search/compare_random.json`` when
present, ``OUT/environment.json`` (the machine kind: CPU model, native bf16 or fp32, threads,
versions), the speed probe's record, and optionally the ``/usr/bin/time -v`` output of the run (wall time, peak RSS).
The differences between arms are the report's own: paired bootstraps over the same MLM dev
targets and the same BLiMP pairs (:func:`lvsearch.stats.mean_difference_interval`).
Writes ``benchmarks/results/quickstart_<NAME>.json``; docs/results.md ("Quickstart") quotes it.

Usage: ``python benchmarks/quickstart_record.py OUT --name NAME [--time-log LOG] [--commit SHA]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from pathlib import Path

from _common import write_result


def _time_log(path: Path) -> dict:
    """Wall time (s) and peak RSS (MiB) from ``/usr/bin/time -v`` output."""
    text = path.read_text(errors="replace")
    out = {}
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", text)
    if m:
        parts = [float(x) for x in m.group(1).split(":")]
        out["wall_seconds"] = sum(v * 60 ** i for i, v in enumerate(reversed(parts)))
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    if m:
        out["peak_rss_mib"] = int(m.group(1)) / 1024
    m = re.search(r'Command being timed: "(.*)"', text)
    if m:
        out["command"] = m.group(1)
    return out


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _arm(report: dict, model: Path) -> dict:
    mlm, blimp = report["mlm"], report.get("blimp") or {}
    entry = {"params": report["model"]["num_params"], "arch": report["model"]["config"]["arch"],
             "sha256": _sha256(model / "model.safetensors"),
             "mlm": {"accuracy": mlm["accuracy"], "loss": mlm["loss"], "targets": mlm["predicted_tokens"],
                     "neighbour_count_floor": mlm["floors"]["neighbour-count"]["accuracy"],
                     "tokens_seen": mlm["floors"]["tokens_seen"], "vs_floor": mlm["floors"]["vs_floor"]}}
    if blimp.get("status") == "done":
        entry["blimp"] = {"mean_over_paradigms": blimp["mean_over_paradigms"], "pairs": blimp["pairs"],
                          "floor": blimp["floor"]["mean_over_paradigms"], "vs_floor": blimp["floor"]["vs_floor"]}
    for task, ft in (report.get("finetune") or {}).items():
        split = "test" if "test" in ft["aggregate"] else "dev"
        entry.setdefault("finetune", {})[task] = {"split": split, "accuracy": ft["aggregate"][split]["accuracy"],
                                                  "floor": ft["floor"], "vs_floor": ft["vs_floor"],
                                                  "settings": ft.get("settings"), "sizes": ft.get("sizes")}
    return entry


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="the quickstart's --out folder (finished)")
    ap.add_argument("--name", required=True, help="result name: writes benchmarks/results/quickstart_NAME.json")
    ap.add_argument("--time-log", type=Path, default=None, help="the run's /usr/bin/time -v output")
    ap.add_argument("--commit", default=None, help="the commit the run used")
    args = ap.parse_args()
    from lvsearch.quickstart.outcomes import blimp_outcomes, mlm_outcomes
    from lvsearch.stats import mean_difference_interval as paired_difference

    state_path = args.out / "quickstart.json"
    if not state_path.is_file():
        raise SystemExit(f"{state_path} is missing: pass the --out folder of a finished quickstart")
    state = json.loads(state_path.read_text())
    stages = state["stages"]
    if stages.get("report", {}).get("status") != "done":
        raise SystemExit(f"{args.out} has not finished (its report stage is not done): re-run the quickstart first")
    arms = state["plan"]["arms"]
    reports = {a: json.loads((args.out / "eval" / f"{a}.json").read_text()) for a in arms}
    result = {"what": "one lvsearch quickstart run, from its own files (benchmarks/quickstart_record.py)",
              "out": str(args.out.resolve()), "commit": args.commit, "settings": state["settings"],
              "plan": state["plan"], "stage_seconds": {k: round(v["seconds"], 1) for k, v in stages.items()},
              "stage_seconds_total": round(sum(v["seconds"] for v in stages.values()), 1),
              "arms": {a: _arm(reports[a], args.out / "retrain" / a / "model") for a in arms}}
    env_path = args.out / "environment.json"  # the machine kind every claim of this record holds on
    if env_path.is_file():
        env = json.loads(env_path.read_text())["started"]
        result["machine"] = {k: env.get(k) for k in ("cpu_model", "cpu_capability", "cpu_native_bf16", "threads",
                                                     "torch", "python", "platform", "gpu")}
        result["machine"]["precision"] = "bf16" if env.get("cpu_native_bf16") or env.get("gpu") else "fp32"
    if "speed" in state:
        result["speed"] = state["speed"]
    if args.time_log is not None:
        result["time"] = _time_log(args.time_log)
    cmp_path = args.out / "search" / "compare_random.json"
    if cmp_path.is_file():
        result["search_picks"] = json.loads(cmp_path.read_text())
    result["search"] = stages["search"]["result"]
    diffs = {}
    for a in arms:
        for b in arms:
            if a == "ea" and b != "ea":
                d = {"mlm": paired_difference(mlm_outcomes(reports[a]), mlm_outcomes(reports[b]))}
                ba, bb = blimp_outcomes(reports[a]), blimp_outcomes(reports[b])
                if ba is not None and bb is not None:
                    d["blimp"] = paired_difference(ba, bb)
                diffs[f"{a} - {b}"] = d
    result["differences"] = diffs
    path = write_result(f"quickstart_{args.name}", result)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
