"""``--executor slurm`` against a real Slurm controller (the single-node one ``.ci/slurm-up``
starts as root; docs/cluster.md, "Tested on a real Slurm"): finalists and rank-check job
arrays give the inline run's picks and byte-identical weights; a job requeued mid-run with
``scontrol requeue`` resumes from its checkpoint to the same bytes; a job cancelled with
``scancel`` is reported with its log while the others finish, and its checkpoint stays for a
re-run. Tiny models; jobs run at one torch thread like the inline references.

Skipped, with the reason, where no Slurm answers (no ``sbatch``, no controller, no idle node,
no accounting for submitit's ``sacct`` polls). ``.ci/run`` sets ``LVSEARCH_REQUIRE_SLURM=1``
after ``.ci/slurm-up`` succeeded (then an unreachable Slurm fails these tests instead), or
``LVSEARCH_SLURM_DOWN`` to what the script said when it failed (added to the skip reason)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from test_dispatch import TINY, cli, outcome, weights
from test_search import TINY as SUPERNET_TINY

from lvsearch.dispatch import DispatchError, DispatchOptions, Job, run_jobs
from lvsearch.scaling.finalists import FinalistOptions, advance_finalist, run_finalists
from lvsearch.train.checkpoint import latest_step

SLURM = DispatchOptions(executor="slurm")


def _slurm_missing() -> str | None:
    """Why no Slurm job can run here, or None when one can."""
    if shutil.which("sbatch") is None:
        return "sbatch is not on PATH (no Slurm here; .ci/slurm-up starts a single-node one as root)"
    checks = [(["scontrol", "ping"], "UP", "no Slurm controller answers `scontrol ping`"),
              (["sinfo", "-h", "-o", "%T"], None, "no node is up (`sinfo`)"),
              (["sacct", "-n", "-X", "-S", "now-1minutes"], None, "no Slurm accounting (`sacct`, which submitit polls)")]
    for cmd, want, why in checks:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{why}: {e}"
        out = proc.stdout + proc.stderr
        if proc.returncode != 0 or (want and want not in out):
            return f"{why}: {' '.join(out.split())[:200]}"
        if cmd[0] == "sinfo" and not any(s.rstrip("*") in ("idle", "mixed", "allocated", "completing")
                                         for s in proc.stdout.split()):
            return f"{why}: node states {proc.stdout.split()}"
    return None


_MISSING = _slurm_missing()
_REQUIRED = os.environ.get("LVSEARCH_REQUIRE_SLURM") == "1"
_WHY_DOWN = os.environ.get("LVSEARCH_SLURM_DOWN")  # what .ci/slurm-up said when it failed (.ci/run)
pytestmark = pytest.mark.skipif(_MISSING is not None and not _REQUIRED, reason=f"no Slurm reachable: {_MISSING}"
                                + (f"; .ci/slurm-up: {_WHY_DOWN}" if _WHY_DOWN else ""))


@pytest.fixture(scope="session", autouse=True)  # before the (session) data fixtures
def _slurm_is_up():
    if _MISSING is not None:  # only reached with LVSEARCH_REQUIRE_SLURM=1
        pytest.fail(f".ci/slurm-up started Slurm (LVSEARCH_REQUIRE_SLURM=1) but {_MISSING}")


def _wait(what: str, check, timeout: float = 300.0):
    end = time.monotonic() + timeout
    while not (got := check()):
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.5)
    return got


def test_finalists_through_slurm_equal_inline(prepared_corpus: Path, tmp_path: Path):
    spec = "bert,sandwich"
    ref = tmp_path / "inline"
    run_finalists(spec, "retrain-quickstart", prepared_corpus, ref, FinalistOptions(finalists=2, budget=8),
                  overrides=TINY, show_progress=False)
    out = tmp_path / "slurm"
    proc = cli("retrain", "--arch", spec, "--finalists", "2", "--budget", "8", "--config", "retrain-quickstart",
               "--data", str(prepared_corpus), *[x for s in TINY for x in ("--set", s)], "--out", str(out),
               "--executor", "slurm", "--max-parallel", "2", "--slurm-partition", "ci", "--slurm-time", "10")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert outcome(out) == outcome(ref)  # same decisions and pick, byte-identical weights
    assert sorted(p.name for p in (out / "dispatch").iterdir()) == ["to-step-4", "to-step-8"]
    # per round one Slurm job array (one job: a plain job), a log per finalist alive
    # (ARRAY_INDEX_TASK_log.out; a plain job's JOB_TASK_log.out)
    for rung, want in (("to-step-4", ["0_0_log.out", "1_0_log.out"]), ("to-step-8", ["0_log.out"])):
        names = sorted(p.name for p in (out / "dispatch" / rung).glob("*_log.out"))
        assert len({n.split("_")[0] for n in names}) == 1 and [n.split("_", 1)[1] for n in names] == want, names


def test_rank_check_through_slurm_equals_inline(prepared_corpus: Path, tmp_path: Path):
    from lvsearch.train.supernet import train_supernet

    sn = tmp_path / "sn"
    train_supernet("quickstart", prepared_corpus, sn, overrides=SUPERNET_TINY, show_progress=False)
    base = ["rank-check", "--supernet", str(sn), "--archs", "3", "--steps", "3", "--pool", "6",
            "--dev-sequences", "16"]
    got = {}
    for name, extra in (("inline", []), ("slurm", ["--executor", "slurm", "--max-parallel", "2"])):
        proc = cli(*base, "--out", str(tmp_path / name), *extra)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
        rc = tmp_path / name
        got[name] = (json.loads((rc / "rank_check.json").read_text())["archs"],
                     {str(p.relative_to(rc)): hashlib.sha256(p.read_bytes()).hexdigest()
                      for p in sorted((rc / "standalone").rglob("*.safetensors"))})
    assert got["slurm"] == got["inline"] and got["inline"][1]
    assert len(list((tmp_path / "slurm" / "dispatch").glob("*_log.out"))) == 3


def test_requeued_job_resumes_exactly_and_a_cancelled_one_is_reported(prepared_corpus: Path, tmp_path: Path,
                                                                      monkeypatch):
    """Two finalist trainings hang after step 5 (checkpoint at 4). ``scontrol requeue`` of the
    first: Slurm kills it (SIGTERM, which submitit ignores, then SIGKILL) and restarts the same
    submission; that attempt resumes from step 4 to the uninterrupted run's bytes. ``scancel``
    of the second: reported with its log after the first ends; its checkpoint stays and the
    same job again continues it to the same bytes."""
    args = {"arch_file": "bert", "recipe": "retrain-quickstart", "overrides": TINY, "data_dir": str(prepared_corpus),
            "budget": 8, "target": 8, "device": "cpu"}
    advance_finalist(run=str(tmp_path / "ref"), **args)  # at 1 torch thread (conftest)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the jobs too (results depend on threads)
    monkeypatch.setenv("LVSEARCH_KILL_AT", "step:5")
    monkeypatch.setenv("LVSEARCH_KILL_SIGNAL", "HANG")
    sub = tmp_path / "sub"
    jobs = [Job(name, advance_finalist, {"run": str(tmp_path / name), **args}) for name in ("requeued", "cancelled")]
    caught: dict = {}

    def drive():
        try:
            caught["results"] = run_jobs(jobs, SLURM, sub)
        except Exception as e:  # noqa: BLE001 - inspected below
            caught["error"] = e

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()

    def hung() -> list[Path] | None:
        logs = sorted(sub.glob("*_log.err"))
        return logs if len(logs) == 2 and all("hanging at step:5" in p.read_text() for p in logs) else None

    logs = _wait("both jobs to hang after step 5", hung)
    array = logs[0].name.split("_")[0]  # ARRAY_INDEX_TASK_log.err; index i is jobs[i]
    assert [p.name for p in logs] == [f"{array}_{i}_0_log.err" for i in range(2)]
    assert all(latest_step(tmp_path / j.name) == 4 for j in jobs)
    kept = {p: p.stat().st_mtime_ns for p in (tmp_path / "cancelled").rglob("*") if p.is_file()}
    subprocess.run(["scontrol", "requeue", f"{array}_0"], check=True, timeout=30)
    subprocess.run(["scancel", f"{array}_1"], check=True, timeout=30)
    driver.join(timeout=400)
    assert not driver.is_alive(), "run_jobs did not return"

    err = caught.get("error")
    assert isinstance(err, DispatchError), caught
    assert err.results == {"requeued": 8}
    assert weights(tmp_path / "requeued") == weights(tmp_path / "ref")
    assert json.loads((tmp_path / "requeued" / "summary.json").read_text())["resumed_from"] == 4
    # one hang, then Slurm's kill and a second start of the same submission
    assert logs[0].read_text().count("hanging at step:5") == 1 and "DUE TO JOB REQUEUE" in logs[0].read_text()
    assert logs[0].with_name(f"{array}_0_0_log.out").read_text().count("Starting with JobEnvironment") == 2

    assert list(err.failures) == ["cancelled"]
    why, log = err.failures["cancelled"]
    assert "CANCELLED" in why, why
    assert Path(log.split(" (output")[0]) == logs[1] and log in str(err)
    assert "1 of 2 dispatched job(s) failed; the others finished" in str(err)
    # partial results stay: the cancelled training's checkpoint of step 4, untouched
    assert latest_step(tmp_path / "cancelled") == 4
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "cancelled").rglob("*") if p.is_file()} == kept
    # the same job again (no fault) continues it from step 4 to the same bytes
    monkeypatch.delenv("LVSEARCH_KILL_AT")
    assert run_jobs(jobs[1:], SLURM, tmp_path / "sub2") == {"cancelled": 8}
    assert weights(tmp_path / "cancelled") == weights(tmp_path / "ref")
    assert json.loads((tmp_path / "cancelled" / "summary.json").read_text())["resumed_from"] == 4
