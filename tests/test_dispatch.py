"""Dispatch of independent jobs through submitit (lvsearch/dispatch.py): a finalist job with
``--executor local --max-parallel 2`` equals the default in-process run byte for byte, a job
killed mid-run is reported with its log while the other jobs finish, a re-run resumes it
exactly, and a job preempted (SIGUSR2, what Slurm sends) is requeued by submitit's
checkpoint hook and resumes from its checkpoint to the same weights. Tiny models."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lvsearch.dispatch import DispatchError, DispatchOptions, Job, run_jobs
from lvsearch.scaling.finalists import FinalistOptions, advance_finalist, run_finalists

REPO = Path(__file__).resolve().parents[1]
TINY = [
    "num_slots=4", "model.hidden=64", "model.embedding=32", "model.ff_inner=128", "model.heads=2",
    "train.seq_len=32", "train.batch_size=16", "train.log_every=1", "train.lr=3e-3", "train.warmup_steps=2",
    "train.eval_every=2", "train.checkpoint_every=2", "objective=mlm", "eval.dev_sequences=64", "eval.batch_size=64",
]
LOCAL2 = DispatchOptions(executor="local", max_parallel=2)


def weights(run: Path) -> str:
    return hashlib.sha256((run / "model" / "model.safetensors").read_bytes()).hexdigest()


def outcome(out: Path) -> dict:
    """Decisions, pick and every finalist's weights of a finalist job in ``out``."""
    state = json.loads((out / "finalists.json").read_text())
    rounds = [(r["alive"], r["decision"]["kept"], r["decision"]["ranking"],
               {n: c["last_loss"] for n, c in r["decision"]["candidates"].items()}) for r in state["rounds"]]
    return {"rounds": rounds, "final": {k: state["final"][k] for k in ("pick", "final_loss", "steps_trained")},
            "weights": {p.name: weights(p) for p in sorted((out / "finalists").iterdir())}}


def cli(*argv: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "LVSEARCH_QUIET": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "lvsearch", *argv], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=600)


def test_local_finalists_equal_sequential_and_a_killed_job_resumes(prepared_corpus: Path, tmp_path: Path):
    spec, opts = "bert,sandwich", FinalistOptions(finalists=2, budget=8)
    ref = tmp_path / "seq"
    run_finalists(spec, "retrain-quickstart", prepared_corpus, ref, opts, overrides=TINY, show_progress=False)
    want = outcome(ref)
    assert not (ref / "dispatch").exists()  # the default runs in this process

    base = ["retrain", "--arch", spec, "--finalists", "2", "--budget", "8", "--config", "retrain-quickstart",
            "--data", str(prepared_corpus), *[x for s in TINY for x in ("--set", s)],
            "--executor", "local", "--max-parallel", "2"]
    par = tmp_path / "local"
    proc = cli(*base, "--out", str(par))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert outcome(par) == want  # same picks, byte-identical weights
    assert sorted(p.name for p in (par / "dispatch").iterdir()) == ["to-step-4", "to-step-8"]

    # every job of round 1 is SIGKILLed after step 3 (checkpoint at 2): both are reported,
    # each with its log, the round is not recorded; the same command again resumes them exactly
    killed = tmp_path / "killed"
    proc = cli(*base, "--out", str(killed), env_extra={"LVSEARCH_KILL_AT": "step:3"})
    text = proc.stdout + proc.stderr
    assert proc.returncode == 2 and "Traceback" not in text, text[-3000:]
    assert "2 of 2 dispatched job(s) failed" in text
    logs = [line.split("log: ", 1)[1].split(" (output", 1)[0] for line in text.splitlines() if "log: " in line]
    assert len(logs) == 2 and all(Path(p).is_file() for p in logs), text
    assert json.loads((killed / "finalists.json").read_text())["rounds"] == []
    proc = cli(*base, "--out", str(killed))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert outcome(killed) == want


def test_preempted_job_is_requeued_and_resumes_exactly(prepared_corpus: Path, tmp_path: Path, monkeypatch):
    """SIGUSR2 at step 5 (checkpoint at 4): submitit calls the job's checkpoint(), requeues it,
    and the second attempt resumes from step 4 to the weights of an uninterrupted run."""
    args = {"arch_file": "bert", "recipe": "retrain-quickstart", "overrides": TINY, "data_dir": str(prepared_corpus),
            "budget": 8, "target": 8, "device": "cpu"}
    advance_finalist(run=str(tmp_path / "ref"), **args)  # at 1 torch thread (conftest)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the job too, whatever the caller's (results depend on threads)
    monkeypatch.setenv("LVSEARCH_KILL_AT", "step:5")
    monkeypatch.setenv("LVSEARCH_KILL_SIGNAL", "USR2")
    got = run_jobs([Job("bert", advance_finalist, {"run": str(tmp_path / "pre"), **args})], LOCAL2, tmp_path / "sub")
    assert got == {"bert": 8}
    assert weights(tmp_path / "pre") == weights(tmp_path / "ref")
    log = "".join(p.read_text() for p in sorted((tmp_path / "sub").glob("*_log.*")))
    assert "this job is preempted" in log and "Requeued job" in log, log[-2000:]
    assert log.count("Loading pickle") == 2  # two attempts of one job
    # the second attempt resumed from the checkpoint of step 4 (did not start over)
    assert json.loads((tmp_path / "pre" / "summary.json").read_text())["resumed_from"] == 4


def test_a_job_slurm_restarted_counts_as_a_retry(monkeypatch):
    """``scontrol requeue`` (or a preemption with PreemptMode=REQUEUE) reruns the first
    submission unchanged with SLURM_RESTART_COUNT set: its on_requeue arguments apply and an
    injected fault no longer does (tests/test_slurm.py does this on a real Slurm)."""
    from lvsearch.dispatch import _Call

    monkeypatch.setenv("LVSEARCH_KILL_AT", "never-reached")
    call = _Call(dict, {"resume": False, "x": 1}, {"resume": True}, None)
    monkeypatch.delenv("SLURM_RESTART_COUNT", raising=False)
    assert call() == {"resume": False, "x": 1} and os.environ["LVSEARCH_KILL_AT"] == "never-reached"
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    assert call() == {"resume": True, "x": 1} and "LVSEARCH_KILL_AT" not in os.environ


def test_failed_job_is_reported_with_its_log_and_the_others_finish(tmp_path: Path):
    jobs = [Job("bad", json.loads, {"s": "{not json"}), Job("good", json.dumps, {"obj": [1, 2]})]
    with pytest.raises(DispatchError) as e:
        run_jobs(jobs, LOCAL2, tmp_path / "sub")
    assert e.value.results == {"good": "[1, 2]"}
    assert list(e.value.failures) == ["bad"]
    err, log = e.value.failures["bad"]
    assert "JSONDecodeError" in err or "Expecting property name" in err
    assert Path(log.split(" (output")[0]).is_file()
    assert "1 of 2 dispatched job(s) failed; the others finished" in str(e.value) and log in str(e.value)
    # inline: in this process, the first failure propagates as it always did
    with pytest.raises(json.JSONDecodeError):
        run_jobs(jobs, DispatchOptions(), tmp_path / "unused")
    assert not (tmp_path / "unused").exists()


def test_slurm_options_reach_submitit(tmp_path: Path, monkeypatch):
    """The --slurm-* options become submitit's Slurm parameters (sbatch lines); no cluster needed."""
    import argparse
    import shutil

    from lvsearch.dispatch import add_dispatch_arguments, make_executor, options_from_args

    p = argparse.ArgumentParser()
    add_dispatch_arguments(p)
    argv = ["--executor", "slurm", "--max-parallel", "3", "--slurm-partition", "gpu", "--slurm-time", "90",
            "--slurm-gpus-per-job", "1", "--slurm-cpus-per-job", "4", "--slurm-extra", "account=abc",
            "--slurm-extra", "qos=low"]
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    opts = options_from_args(p.parse_args(argv))
    assert opts.slurm_extra == {"account": "abc", "qos": "low"}
    ex = make_executor(opts, tmp_path)
    text = ex._executor._make_submission_file_text("python -m x", "uid")  # the sbatch script submitit writes
    for line in ("--partition=gpu", "--time=90", "--gpus-per-node=1", "--cpus-per-task=4", "--account=abc",
                 "--qos=low", "--nodes=1", "--ntasks-per-node=1"):
        assert f"#SBATCH {line}" in text, text
    ex._executor.parameters["map_count"] = 5  # what submitit sets when it submits a batch of 5 as one array
    assert "#SBATCH --array=0-4%3" in ex._executor._make_submission_file_text("python -m x", "uid")


def test_max_parallel_without_a_pool_is_refused_and_the_help_reads_whole():
    """``--executor inline --max-parallel N`` ignored N silently; and a benchmark's --executor
    help put its --jobs note in the middle of the sentence ("...seed; local or slurm replaces
    the --jobs thread pool run: inline")."""
    import argparse

    from lvsearch.dispatch import add_dispatch_arguments, options_from_args
    from lvsearch.errors import LvsearchError

    p = argparse.ArgumentParser()
    add_dispatch_arguments(p, "the runs", inline="the --jobs pool")
    with pytest.raises(LvsearchError, match="--max-parallel 3 only applies to --executor local or slurm") as e:
        options_from_args(p.parse_args(["--max-parallel", "3"]))
    assert "--executor local" in e.value.fix
    assert options_from_args(p.parse_args(["--executor", "local", "--max-parallel", "3"])).max_parallel == 3
    text = " ".join(p.format_help().split())
    assert "where the runs run: inline (default: the --jobs pool), local" in text
