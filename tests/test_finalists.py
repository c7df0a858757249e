"""Finalist pruning in retrain (successive halving with M4 extrapolation) on the real corpus:
the prefix property it relies on, a whole job (decisions, compute, continuation, comparison),
an interrupted job, bad input. Tiny models, tens of steps.

The pure halving rule on synthetic crossing curves (extrapolation keeps the late winner that
current-loss ranking drops) is tested in test_scaling.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from _shared import run_cli
from safetensors.torch import load_file

import lvsearch.scaling
import lvsearch.train.loop
from lvsearch.arch import Arch
from lvsearch.errors import LvsearchError
from lvsearch.io import check_same_settings
from lvsearch.modeldir import load_model
from lvsearch.scaling.finalists import STATE, FinalistOptions, run_finalists
from lvsearch.scaling.halving import halving_rounds, halving_rungs
from lvsearch.train.checkpoint import latest_step
from lvsearch.train.retrain import retrain

TINY = [
    "num_slots=4", "model.hidden=64", "model.embedding=32", "model.ff_inner=128", "model.heads=2",
    "train.seq_len=32", "train.batch_size=16", "train.log_every=1", "train.lr=3e-3", "train.warmup_steps=2",
    "train.eval_every=2", "train.checkpoint_every=0", "objective=mlm", "eval.dev_sequences=64", "eval.batch_size=64",
]
TOPK = ["sfsf", "ssff", "scsf", "cfcf", "ffss"]


def sets(*extra: str) -> list[str]:
    return [x for s in [*TINY, *extra] for x in ("--set", s)]


def write_topk(path: Path, keys=TOPK) -> Path:
    """A top-k file in the format 'lvsearch evolve' writes (best first)."""
    entries = [{"key": k, "fitness": 0.1 - i / 100, "loss": 7.0 + i / 10, "params": 1000, "flops": 1.0,
                "targets": 10, "rejected": None} for i, k in enumerate(keys)]
    path.write_text(json.dumps({"strategy": "evolution", "iteration": 3, "topk": entries}))
    return path


def test_rungs_follow_successive_halving():
    assert [halving_rounds(n, 2) for n in (2, 3, 4, 5, 8, 9)] == [1, 2, 2, 3, 3, 4]
    assert halving_rounds(9, 3) == 2
    assert halving_rungs(600, 4, 2) == [150, 300]
    assert halving_rungs(270, 9, 3) == [30, 90]
    with pytest.raises(LvsearchError, match="not divisible by eta"):
        halving_rungs(300, 5, 2)


@pytest.mark.parametrize("schedule", ["linear", "wsd"])
def test_stop_at_is_an_exact_prefix_of_the_full_run(prepared_corpus: Path, tmp_path: Path, schedule: str):
    over = TINY + ["train.steps=12", f"train.schedule={schedule}"]
    full = retrain("bert", "retrain-quickstart", prepared_corpus, tmp_path / "full", overrides=over, show_progress=False)
    part = tmp_path / "part"
    s = retrain("bert", "retrain-quickstart", prepared_corpus, part, overrides=over, show_progress=False, stop_at=4)
    assert (s["steps"], s["target_steps"], s["tokens"]) == (4, 12, 4 * 16 * 32)
    assert load_model(part / "model").arch == Arch.sequential("sfsf")  # a usable model dir at the stop
    lr = {r["step"]: r["lr"] for r in map(json.loads, (tmp_path / "full" / "metrics.jsonl").read_text().splitlines()) if "lr" in r}
    part_lr = {r["step"]: r["lr"] for r in map(json.loads, (part / "metrics.jsonl").read_text().splitlines()) if "lr" in r}
    assert part_lr == {k: lr[k] for k in (1, 2, 3, 4)}  # the full budget's schedule, not one ending at 4
    assert retrain(None, None, prepared_corpus, part, resume=True, show_progress=False, stop_at=8)["steps"] == 8
    assert retrain(None, None, prepared_corpus, part, resume=True, show_progress=False)["steps"] == 12
    a = load_file(str(tmp_path / "full" / "model" / "model.safetensors"))
    b = load_file(str(part / "model" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (tmp_path / "full" / "curve.jsonl").read_text() == (part / "curve.jsonl").read_text()
    assert full["final_eval"]["dev_mlm"] == json.loads((part / "summary.json").read_text())["final_eval"]["dev_mlm"]
    with pytest.raises(LvsearchError, match="stop_at"):
        retrain(None, None, prepared_corpus, part, resume=True, show_progress=False, stop_at=13)


def test_finalist_job_prunes_continues_and_compares(prepared_corpus: Path, tmp_path: Path, capsys):
    topk = write_topk(tmp_path / "topk.json")
    out = tmp_path / "job"
    cmd = ["retrain", "--arch", str(topk), "--finalists", "4", "--budget", "32", "--pruning", "extrapolate",
           "--config", "retrain-quickstart",
           "--data", str(prepared_corpus), "--out", str(out), *sets()]
    code, text = run_cli(capsys, *cmd)
    assert code == 0, text
    state = json.loads((out / STATE).read_text())
    names = [f["name"] for f in state["settings"]["finalists"]]
    assert names == ["01-sfsf", "02-ssff", "03-scsf", "04-cfcf"]  # the first K, best first
    assert state["rungs_steps"] == [8, 16] and state["status"] == "done"
    r1, r2 = state["rounds"]
    # round 1: 3 evaluations after the 2 warm-up steps (steps 4, 6, 8) < 4 -> current-loss fallback
    assert r1["decision"]["fallback"] and "at least 4" in r1["decision"]["fallback"]
    assert len(r1["decision"]["kept"]) == 2 and len(r1["decision"]["cut"]) == 2
    assert "fallback" in text and "round 1" in text
    # round 2: 7 points -> M4 predictions at the full budget with bootstrap intervals
    assert r2["decision"]["fallback"] is None and sorted(r2["alive"]) == sorted(r1["decision"]["kept"])
    for e in r2["decision"]["candidates"].values():
        assert e["scored_by"] == "M4" and e["n_points"] == 7 and e["lo"] <= e["score"] <= e["hi"]
        assert e["score"] < e["last_loss"]  # still improving at 16 of 32 steps
    final = state["final"]
    survivors = final["survivors"]
    expected = 4 * 8 + len(r2["alive"]) * 8 + len(survivors) * 16
    assert final["compute_steps"] == expected and final["compute_fraction"] == expected / (4 * 32)
    for n in names:
        steps = latest_step(out / "finalists" / n)
        assert steps == final["steps_trained"][n]
        assert steps == (32 if n in survivors else 16 if n in r2["alive"] else 8)
        assert json.loads((out / "finalists" / n / "config.json").read_text())["format"] == "lvsearch.retrain-run/v1"
    best = json.loads((out / "best.json").read_text())
    assert best["meta"]["finalist"] == final["pick"] == state["best"]["name"]
    assert load_model(best["meta"]["model_dir"]).arch == Arch.from_dict(best)

    # the same command again: nothing is retrained, the decisions stay
    stamps = {n: (out / "finalists" / n / "curve.jsonl").stat().st_mtime_ns for n in names}
    code, text = run_cli(capsys, *cmd)
    assert code == 0, text
    assert {n: (out / "finalists" / n / "curve.jsonl").stat().st_mtime_ns for n in names} == stamps
    assert json.loads((out / STATE).read_text())["rounds"] == state["rounds"]

    # other settings are refused; --compare-full continues the cut finalists and compares
    code, text = run_cli(capsys, *[("64" if a == "32" else a) for a in cmd])
    assert code == 2 and "other settings" in text and "budget_steps: 32 → 64" in text
    code, text = run_cli(capsys, *cmd, "--compare-full")
    assert code == 0, text
    state = json.loads((out / STATE).read_text())
    c = state["comparison"]
    assert all(latest_step(out / "finalists" / n) == 32 for n in names)
    assert c["replay_matches_live"] is True
    assert c["rules"]["extrapolate"]["pick"] == final["pick"]
    assert c["rules"]["extrapolate"]["compute_fraction"] == pytest.approx(final["compute_fraction"])
    assert c["rules"]["current-loss"]["compute_fraction"] == pytest.approx(0.5)  # 4*8 + 2*8 + 1*16 of 128
    losses = c["train_all"]["final_losses"]
    assert c["train_all"]["pick"] == min(losses, key=losses.get)
    for r in c["rules"].values():
        assert r["agrees"] == (r["pick"] == c["train_all"]["pick"]) and r["regret"] >= 0
    assert "train all" in text and "agrees" in text


def test_interrupted_job_continues_without_redoing_rounds(prepared_corpus: Path, tmp_path: Path, monkeypatch):
    real, calls = lvsearch.scaling.halving_step, []

    def flaky(*args, **kwargs):
        calls.append(sorted(args[0]))
        if len(calls) == 2:
            raise KeyboardInterrupt  # the job dies after round 1 was recorded
        return real(*args, **kwargs)

    monkeypatch.setattr(lvsearch.scaling, "halving_step", flaky)
    opts = FinalistOptions(finalists=3, budget=16, pruning="current-loss")
    job = dict(overrides=TINY, show_progress=False)
    out = tmp_path / "job"
    with pytest.raises(KeyboardInterrupt):
        run_finalists("bert,sandwich,random:1", "retrain-quickstart", prepared_corpus, out, opts, **job)
    first = json.loads((out / STATE).read_text())
    assert len(first["rounds"]) == 1 and first["final"] is None
    state = run_finalists("bert,sandwich,random:1", "retrain-quickstart", prepared_corpus, out, opts, **job)
    assert len(calls) == 3 and calls[2] == sorted(first["rounds"][0]["decision"]["kept"])  # round 1 not redone
    assert state["rounds"][0] == first["rounds"][0] and len(state["rounds"]) == 2
    assert state["final"]["compute_steps"] == 3 * 4 + 2 * 4 + 1 * 8


def test_bad_input_is_one_clear_error(prepared_corpus: Path, tmp_path: Path, capsys):
    topk = write_topk(tmp_path / "topk.json")
    base = ["retrain", "--config", "retrain-quickstart", "--data", str(prepared_corpus), *sets()]

    def err(*args: str, out: str = "x") -> str:
        code, text = run_cli(capsys, *base, "--out", str(tmp_path / out), *args)
        assert code == 2 and "Traceback" not in text, text
        assert not (tmp_path / out).exists() or out == "used"
        return text

    assert "at least 2 finalists" in err("--arch", str(topk), "--finalists", "1", "--budget", "32")
    assert "holds 5 architecture(s)" in err("--arch", str(topk), "--finalists", "6", "--budget", "64")
    assert "--eta 1 must be" in err("--arch", str(topk), "--finalists", "4", "--budget", "32", "--eta", "1")
    assert "not divisible by eta^rounds = 2^2 = 4" in err("--arch", str(topk), "--finalists", "4", "--budget", "30")
    text = err("--arch", str(topk), "--finalists", "4", "--budget", "36", "--set", "train.eval_every=5")
    assert "not a multiple of train.eval_every" in text and "eval_every=3" in text
    assert "only apply to finalist pruning" in err("--arch", "bert", "--budget", "32")
    assert "same architecture" in err("--arch", "bert,sandwich,bert", "--finalists", "3", "--budget", "32")
    assert "--finalists needs --arch" in err("--finalists", "2")
    (tmp_path / "odd.json").write_text(json.dumps({"foo": 1}))
    assert "neither a topk.json" in err("--arch", str(tmp_path / "odd.json"), "--finalists", "2", "--budget", "32")
    write_topk(tmp_path / "bad.json", ["sfsf", "sxsf"])
    assert "top-k entry 2" in err("--arch", str(tmp_path / "bad.json"), "--finalists", "2", "--budget", "32")
    write_topk(tmp_path / "long.json", ["sfsfsf", "ssffss"])
    assert "slots" in err("--arch", str(tmp_path / "long.json"), "--finalists", "2", "--budget", "32")
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "notes.txt").write_text("mine")
    assert "holds no finalist job" in err("--arch", "bert,sandwich", "--finalists", "2", "--budget", "32", out="used")
    assert (tmp_path / "used" / "notes.txt").read_text() == "mine"


def test_warmup_longer_than_first_rung_falls_back_to_current_loss(prepared_corpus: Path, tmp_path: Path):
    """Seen in a --minutes 2 quickstart: the first rung ended inside the warm-up, so no curve
    point survived the warm-up filter and the job crashed. It must rank by current loss (the
    documented fallback) on the last evaluation instead."""
    # budget 16, 3 finalists: rungs at 4 and 8 steps, both inside the 8-step warm-up
    opts = FinalistOptions(finalists=3, budget=16, pruning="extrapolate")
    state = run_finalists("bert,sandwich,random:1", "retrain-quickstart", prepared_corpus, tmp_path / "job", opts,
                          overrides=[*TINY, "train.warmup_steps=8"], show_progress=False)
    first = state["rounds"][0]["decision"]
    assert first["fallback"] and all(c["scored_by"].startswith("current") for c in first["candidates"].values())
    assert state["status"] == "done" and state["final"]["pick"]


# ----------------------------------------------------------------------------------------
# Warmup-stable-decay: cool-down probes, rungs in the stable phase
# ----------------------------------------------------------------------------------------


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_cooldown_probe_equals_a_fresh_wsd_run_and_leaves_the_run_alone(prepared_corpus: Path, tmp_path: Path):
    from lvsearch.train.cooldown import cooldown_probe

    wsd = [*TINY, "train.schedule=wsd", "train.decay_fraction=0.2"]
    run = tmp_path / "run"
    retrain("random:1", "retrain-quickstart", prepared_corpus, run, overrides=[*wsd, "train.steps=40"],
            show_progress=False, stop_at=8)
    before = _files(run)
    probe = cooldown_probe(run, 8, 4)
    assert _files(run) == before and not list(tmp_path.glob(".cooldown-*"))  # nothing written, branch removed
    # a fresh 12-step wsd run whose cool-down is the last 4 steps: the same learning rates
    # (warm-up 2, constant to step 8, then linear to 0) and batches, so the same dev loss
    fresh = retrain("random:1", "retrain-quickstart", prepared_corpus, tmp_path / "fresh",
                    overrides=[*TINY, "train.schedule=wsd", f"train.decay_fraction={4 / 12}", "train.steps=12"],
                    show_progress=False)
    assert probe["cooled_loss"] == fresh["final_eval"]["curve"]["loss"]
    _, ys = lvsearch.train.loop.read_curve(run, up_to_step=8, after_step=7)
    assert probe["stable_loss"] == ys[0] and probe["drop"] == pytest.approx(ys[0] - probe["cooled_loss"])
    assert (probe["at_step"], probe["decay_steps"], probe["end_step"]) == (8, 4, 12)
    with pytest.raises(LvsearchError, match="latest checkpoint is not at step 6"):
        cooldown_probe(run, 6, 4)
    lin = tmp_path / "lin"
    retrain("bert", "retrain-quickstart", prepared_corpus, lin, overrides=[*TINY, "train.steps=8"], show_progress=False)
    with pytest.raises(LvsearchError, match="needs train.schedule wsd"):
        cooldown_probe(lin, 8, 2)


def test_wsd_finalist_job_probes_every_rung_and_scores_its_predictions(prepared_corpus: Path, tmp_path: Path):
    wsd = [*TINY, "train.schedule=wsd", "train.decay_fraction=0.2"]
    opts = FinalistOptions(finalists=4, budget=40, compare_full=True, pruning="extrapolate")
    out = tmp_path / "job"
    spec = "bert,sandwich,random:1,random:2"
    state = run_finalists(spec, "retrain-quickstart", prepared_corpus, out, opts, overrides=wsd, show_progress=False)
    assert state["rungs_steps"] == [10, 20]
    probe_steps = 0
    for r, d in zip(state["rounds"], (2, 5)):  # 0.2 / 0.8 of 10 -> 2 (round half to even), of 20 -> 5
        assert r["predicted_at_steps"] == 32 and sorted(r["probes"]) == sorted(r["alive"])
        assert all(p["decay_steps"] == d and p["at_step"] == r["budget_steps"] for p in r["probes"].values())
        probe_steps += d * len(r["alive"])
        dec = r["decision"]
        if not dec["fallback"]:  # predicted final = M4 at the cool-down's start minus the measured drop
            for n, e in dec["candidates"].items():
                assert e["offset"] == -r["probes"][n]["drop"] and e["score"] == pytest.approx(e["extrapolated"] + e["offset"])
    assert state["final"]["probe_steps"] == probe_steps
    assert state["final"]["compute_fraction"] == pytest.approx((state["final"]["compute_steps"] + probe_steps) / 160)
    pred = state["comparison"]["predictions"]
    scored = [r for r in state["rounds"] if not r["decision"]["fallback"]]
    assert pred["n"] == sum(len(r["alive"]) for r in scored)
    finals = state["comparison"]["train_all"]["final_losses"]
    for c in pred["cases"]:
        assert c["final"] == finals[c["name"]] and c["error"] == pytest.approx(c["predicted"] - c["final"])
    assert state["comparison"]["replay_matches_live"] is True
    # the probes are cached: a re-run probes nothing and changes nothing
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("cooldown_probes.json")}
    assert len(stamps) == 4
    again = run_finalists(spec, "retrain-quickstart", prepared_corpus, out, opts, overrides=wsd, show_progress=False)
    assert again["rounds"] == state["rounds"] and {p: p.stat().st_mtime_ns for p in stamps} == stamps
    # a rung inside the cool-down is refused before anything is trained
    with pytest.raises(LvsearchError, match="stable phase"):
        run_finalists(spec, "retrain-quickstart", prepared_corpus, tmp_path / "bad", opts,
                      overrides=[*TINY, "train.schedule=wsd", "train.decay_fraction=0.6"], show_progress=False)
    assert not (tmp_path / "bad" / "finalists").exists()


def test_resume_refusal_names_each_differing_setting():
    """The one "resumed with other settings" refusal (quickstart, the finalist job): short values
    are shown recorded → wanted, long ones (a recipe section) by key only; equal settings pass."""
    old = {"budget_steps": 32, "config": {"train": {"lr": 1e-3, "steps": 100, "warmup_steps": 10, "x": 1}}, "seed": 0}
    check_same_settings("out", "a finalist job", old, dict(old), fix="f")
    new = {**old, "budget_steps": 64, "config": {"train": {**old["config"]["train"], "lr": 2e-3}}, "eta": 2}
    with pytest.raises(LvsearchError) as e:
        check_same_settings("job", "a finalist job", old, new, fix="pass --overwrite")
    assert str(e.value).startswith("--out job holds a finalist job with other settings "
                                   "(budget_steps: 32 → 64, config, eta: None → 2)")
    assert e.value.fix == "pass --overwrite"
    sets = ["model.hidden=32", "model.embedding=16", "train.seq_len=32"]
    with pytest.raises(LvsearchError, match=r"\(overrides: −train\.seq_len=32 \+train\.seq_len=64\)"):
        check_same_settings("job", "a faster run", {"overrides": sets}, {"overrides": sets[:2] + ["train.seq_len=64"]},
                            fix="f")


def test_a_damaged_job_state_is_one_clear_error(prepared_corpus: Path, tmp_path: Path, capsys):
    """finalists.json of the right format with a field of the wrong type or a finished job
    without its pick: one message naming the file and the field (it was a KeyError traceback)."""
    from lvsearch.scaling.finalists import FORMAT

    base = ["retrain", "--config", "retrain-quickstart", "--data", str(prepared_corpus), *sets(),
            "--arch", "bert,sandwich", "--finalists", "2", "--budget", "32"]
    good_round = {"round": 1, "alive": ["01-a", "02-b"], "budget_steps": 16,
                  "decision": {"kept": ["01-a"], "ranking": ["01-a", "02-b"], "candidates": {}}}
    for name, state, field in (
            ("rounds", {"rounds": [{**good_round, "budget_steps": "16"}]}, "field rounds.0.budget_steps"),
            ("kept", {"rounds": [{**good_round, "decision": {"kept": "01-a"}}]}, "field rounds.0.decision.kept"),
            ("done", {"rounds": [good_round], "status": "done", "final": None}, "status 'done' needs 'final', 'best'")):
        out = tmp_path / name
        out.mkdir()
        text = json.dumps({"format": FORMAT, "settings": {"finalists": []}, "rungs_steps": [16], "final": None,
                           "comparison": None, **state})
        (out / STATE).write_text(text)
        code, printed = run_cli(capsys, *base, "--out", str(out))
        assert code == 2 and "Traceback" not in printed, printed
        assert f"finalist job state {out / STATE} is malformed: {field}" in " ".join(printed.split()), printed
        assert (out / STATE).read_text() == text and sorted(p.name for p in out.iterdir()) == [STATE]
