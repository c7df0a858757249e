"""Experiment tracking (lvsearch/tracking.py): what TensorBoard, MLflow and wandb hold equals the
run's JSON-lines files, also after a kill and ``--resume``; the JSON-lines files and weights do
not change with ``--log-to``."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from lvsearch import tracking
from lvsearch.errors import LvsearchError
from test_reliability import RT_SETS, SEARCH_ARGS, SN_SETS, _metrics_lines, _sets, _weights_digest, cli

RETRAIN = ["retrain", "--arch", "random:3", "--config", "retrain-quickstart"]


def tb_scalars(run: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series of ``RUN/tracking/tensorboard`` as TensorBoard shows it (purged
    points dropped): ``tag -> [(step, value)]`` in step order."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / tracking.TRACKING_DIR / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def mlflow_series(run: Path, key: str) -> list[tuple[int, float]]:
    from mlflow.tracking import MlflowClient

    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=(run / tracking.TRACKING_DIR / "mlruns").resolve().as_uri())
    run_id = (run / tracking.TRACKING_DIR / "mlflow_run_id").read_text().strip()
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def assert_series_equal(got: list[tuple[int, float]], want: list[tuple[int, float]], what: str) -> None:
    steps = [s for s, _ in got]
    assert len(steps) == len(set(steps)), f"{what}: duplicate steps {steps}"
    assert [s for s, _ in got] == [s for s, _ in want], f"{what}: steps {steps} vs {[s for s, _ in want]}"
    for (s, g), (_, w) in zip(got, want):
        assert g == pytest.approx(w, rel=1e-6, abs=1e-7), f"{what} at step {s}: {g} vs {w}"  # TensorBoard stores float32


# ------------------------------------------------------------------ units
def test_parse_log_to_and_flatten():
    assert tracking.parse_log_to("tensorboard, MLflow,tensorboard") == ("tensorboard", "mlflow")
    assert tracking.parse_log_to("none") == () == tracking.parse_log_to("")
    with pytest.raises(LvsearchError, match="unknown tracker 'tensorbored'"):
        tracking.parse_log_to("tensorbored")
    flat = tracking.flatten({"loss": 2.5, "eval": {"acc": 0.3, "ok": True, "nan": float("nan"), "arch": "sfc"},
                             "keys": [1, 2], "n": 4})
    assert flat == {"loss": 2.5, "eval/acc": 0.3, "eval/ok": 1.0, "n": 4.0}


def test_no_tracker_means_no_folder_and_no_calls(tmp_path: Path, monkeypatch):
    monkeypatch.delenv(tracking.ENV, raising=False)
    tracking.log(tmp_path, 1, {"loss": 1.0})
    tracking.start_at(tmp_path, 1)
    assert tracking.for_run(tmp_path) is None and not (tmp_path / tracking.TRACKING_DIR).exists()


def test_a_missing_tracker_library_is_one_message(prepared_corpus: Path, tmp_path: Path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(LvsearchError, match="pip install wandb"):
        with tracking.enabled(("tensorboard", "wandb")):
            pass
    assert tracking.ENV not in os.environ


# ------------------------------------------------------------------ training, with a kill
def test_retrain_series_equal_the_jsonl_files_after_kill_and_resume(prepared_corpus: Path, tmp_path: Path):
    """The target of the tracking issue: TensorBoard (and MLflow's file store) show the same loss
    values as metrics.jsonl and the same dev values as curve.jsonl, each step once, for an
    uninterrupted run and for one killed after step 9 (its checkpoint at 8) and resumed; the
    JSON-lines files and weights equal those of a run without --log-to."""
    pytest.importorskip("tensorboard")
    mlflow = pytest.importorskip("mlflow")
    del mlflow
    base = [*RETRAIN, "--data", str(prepared_corpus), *_sets(RT_SETS)]
    plain, ref, killed = tmp_path / "plain", tmp_path / "ref", tmp_path / "killed"
    assert cli(*base, "--out", str(plain)).returncode == 0
    proc = cli(*base, "--out", str(ref), "--log-to", "tensorboard,mlflow")
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = cli(*base, "--out", str(killed), "--log-to", "tensorboard,mlflow", kill_at="step:9")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    proc = cli("retrain", "--data", str(prepared_corpus), "--out", str(killed), "--resume", "--log-to", "tensorboard,mlflow")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("metrics.jsonl", "curve.jsonl"):  # wall-clock fields aside
        assert _metrics_lines(ref, name) == _metrics_lines(plain, name) == _metrics_lines(killed, name), name
    assert _weights_digest(ref) == _weights_digest(plain) == _weights_digest(killed)
    for run in (ref, killed):
        train = [r for r in jsonl(run / "metrics.jsonl") if "loss" in r]
        curve = jsonl(run / "curve.jsonl")
        series = tb_scalars(run)
        assert_series_equal(series["train/loss"], [(r["step"], r["loss"]) for r in train], f"{run.name} train/loss")
        assert_series_equal(series["train/lr"], [(r["step"], r["lr"]) for r in train], f"{run.name} train/lr")
        assert_series_equal(series["dev/curve/loss"], [(r["step"], r["loss"]) for r in curve], f"{run.name} dev loss")
        summary = json.loads((run / "summary.json").read_text())
        floor = summary["floors"]["neighbour-count"]["accuracy"]
        assert series["floors/neighbour-count/accuracy"] == [(summary["steps"], pytest.approx(floor, rel=1e-6))]
        assert_series_equal(mlflow_series(run, "train.loss"), [(r["step"], r["loss"]) for r in train],
                            f"{run.name} mlflow train.loss")


def test_supernet_hparams_and_wandb_offline_keep_one_run_across_a_resume(prepared_corpus: Path, tmp_path: Path,
                                                                          monkeypatch):
    """wandb offline: the killed and the resumed process write to one run id (no second run in
    the project); TensorBoard holds the resolved config as hyperparameters."""
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "sn"
    base = ["train-supernet", "--config", "quickstart", "--data", str(prepared_corpus), *_sets(SN_SETS)]
    proc = cli(*base, "--out", str(run), "--log-to", "wandb,tensorboard", kill_at="step:9")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    proc = cli("train-supernet", "--data", str(prepared_corpus), "--out", str(run), "--resume", "--log-to", "wandb,tensorboard")
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id = (run / tracking.TRACKING_DIR / "wandb_id").read_text().strip()
    offline = sorted((run / tracking.TRACKING_DIR / "wandb").glob("offline-run-*"))
    assert len(offline) == 2 and all(p.name.endswith(f"-{run_id}") for p in offline)
    assert b"train/loss" in offline[-1].joinpath(f"run-{run_id}.wandb").read_bytes()  # the resumed process's
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / tracking.TRACKING_DIR / "tensorboard"))
    acc.Reload()
    assert "config" in acc.Tags()["tensors"] or "config/text_summary" in acc.Tags()["tensors"]
    train = [r for r in jsonl(run / "metrics.jsonl") if "loss" in r]
    assert_series_equal(tb_scalars(run)["train/loss"], [(r["step"], r["loss"]) for r in train], "supernet train/loss")


# ------------------------------------------------------------------ search and evaluation
def test_evolve_logs_one_point_per_iteration_and_the_noise_verdict(prepared_corpus: Path, tmp_path: Path):
    pytest.importorskip("tensorboard")
    sn, search = tmp_path / "sn", tmp_path / "search"
    proc = cli("train-supernet", "--config", "quickstart", "--data", str(prepared_corpus), *_sets(SN_SETS), "--out", str(sn))
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = cli("evolve", "--supernet", str(sn), "--out", str(search), *SEARCH_ARGS, "--log-to", "tensorboard",
               kill_at="search-save:1")
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    proc = cli("evolve", "--supernet", str(sn), "--out", str(search), "--resume", "--log-to", "tensorboard")
    assert proc.returncode == 0, proc.stderr[-3000:]
    curve = json.loads((search / "state.json").read_text())["curve"]
    series = tb_scalars(search)
    assert_series_equal(series["search/best"], [(c["iteration"], c["best"]) for c in curve], "search/best")
    assert_series_equal(series["search/passes"], [(c["iteration"], c["passes"]) for c in curve], "search/passes")
    assert [s for s, _ in series["search/median"]] == [c["iteration"] for c in curve]
    noise = json.loads((search / "noise.json").read_text())
    numeric = {k: v for k, v in noise.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    assert numeric and all(f"noise/{k}" in series for k in numeric)


def test_evaluate_logs_the_report_numbers(prepared_corpus: Path, tmp_path: Path):
    pytest.importorskip("tensorboard")
    run = tmp_path / "rt"
    proc = cli(*RETRAIN, "--data", str(prepared_corpus), *_sets(RT_SETS), "--out", str(run))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "eval" / "rt.json"
    proc = cli("evaluate", "--model", str(run / "model"), "--no-blimp", "--out", str(out), "--log-to", "tensorboard",
               "--mlm-data", str(prepared_corpus), "--dev-sequences", "32")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    series = tb_scalars(out.parent)
    assert series["rt/mlm/accuracy"] == [(0, pytest.approx(report["mlm"]["accuracy"], rel=1e-6))]
    assert not any(tag.startswith("rt/timings") for tag in series)
