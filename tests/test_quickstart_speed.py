"""The quickstart's speed probe and the plan sized for this machine's slowdown, so that
``--minutes`` holds on machines slower or faster than the calibration machine."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest
import torch

from lvsearch.cli import main
from lvsearch.errors import LvsearchError
from lvsearch.quickstart import speed
from lvsearch.quickstart.context import QuickstartSettings, open_context, plan_slowdown
from lvsearch.quickstart.plan import make_plan


def sizes(plan) -> dict:
    d = asdict(plan)
    return {k: v for k, v in d.items() if k not in ("minutes", "slowdown")}


def test_quantized_slowdown():
    assert speed.quantized_slowdown(1.0) == speed.quantized_slowdown(1.15) == speed.quantized_slowdown(0.85) == 1.0
    assert speed.quantized_slowdown(2.7) == pytest.approx(2 ** (11 / 8))  # 2.59: the nearest eighth octave
    assert speed.quantized_slowdown(1.46) == pytest.approx(2 ** 0.5)  # this fp32 machine kind's ratio
    assert speed.quantized_slowdown(2.0) == 2.0 and speed.quantized_slowdown(0.5) == 0.5
    assert speed.quantized_slowdown(1e6) == speed.MAX_SLOWDOWN and speed.quantized_slowdown(1e-6) == 1 / speed.MAX_SLOWDOWN
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            speed.quantized_slowdown(bad)


@pytest.mark.parametrize("minutes,slowdown", [(20, 2.0), (20, 2 ** 1.5), (60, 0.5), (20, 1.0), (5, 1.19)])
def test_a_slower_machine_gets_the_sizes_of_fewer_minutes_and_the_same_budget(minutes, slowdown):
    plan = make_plan(minutes, slowdown=slowdown)
    assert sizes(plan) == sizes(make_plan(minutes / slowdown))
    assert plan.total_minutes() == pytest.approx(minutes)  # the budget the user asked for, on this machine
    assert plan.sized_minutes == pytest.approx(minutes / slowdown)
    if slowdown > 1:
        assert plan.retrain_steps < make_plan(minutes).retrain_steps
    with pytest.raises(LvsearchError, match="--speed must be"):
        make_plan(minutes, slowdown=0.0)


def test_the_probe_times_training_steps_and_leaves_torch_as_it_was():
    threads = torch.get_num_threads()
    before = torch.random.get_rng_state()
    rec = speed.probe_step_seconds(steps=2, warmup=1)
    assert rec["seconds"] > 0 and rec["steps"] == 2 and rec["threads"] == 1
    assert rec["precision"] in ("bf16", "fp32")
    assert torch.get_num_threads() == threads and torch.equal(torch.random.get_rng_state(), before)


def test_plan_slowdown_measures_only_where_the_calibration_applies(monkeypatch):
    default = QuickstartSettings()
    assert plan_slowdown(default, "cpu", "2")["slowdown"] == 2.0
    for bad in ("fast", "0", "-1", "nan", "inf"):
        with pytest.raises(LvsearchError, match="--speed must be auto or a number > 0"):
            plan_slowdown(default, "cpu", bad)
    other = QuickstartSettings(retrain_recipe="retrain-small")
    assert plan_slowdown(other, "cpu", "auto")["reason"].startswith("other recipes")
    monkeypatch.setattr(speed, "REFERENCE_STEP_SECONDS", None)
    rec = plan_slowdown(default, "cpu", "auto")
    assert rec["slowdown"] == 1.0 and "unmeasured" in rec["reason"]
    monkeypatch.setattr(speed, "REFERENCE_STEP_SECONDS", 0.5)
    monkeypatch.setattr(speed, "probe_step_seconds", lambda **kw: {"seconds": 1.35, "steps": 6, "precision": "fp32",
                                                                   "threads": 1, "recipe": "retrain-quickstart"})
    rec = plan_slowdown(default, "cpu", "auto")
    assert rec["ratio"] == pytest.approx(2.7) and rec["slowdown"] == pytest.approx(2 ** (11 / 8)) and rec["reason"] is None
    text = speed.speed_sentence(rec, 20, 20 / rec["slowdown"])
    assert "2.70× slower" in text and "--minutes 7.71" in text and "about 20 min here" in text


def test_a_new_run_records_its_speed_and_a_resumed_run_keeps_its_plan(tmp_path, monkeypatch):
    monkeypatch.setattr(speed, "REFERENCE_STEP_SECONDS", 0.5)
    probe = {"seconds": 1.0, "steps": 6, "precision": "fp32", "threads": 1, "recipe": "retrain-quickstart"}
    monkeypatch.setattr(speed, "probe_step_seconds", lambda **kw: dict(probe))
    settings = QuickstartSettings(blimp=None)
    out = tmp_path / "qs"
    ctx = open_context(out, settings, device="cpu", show_progress=False)
    assert ctx.plan.slowdown == 2.0 and sizes(ctx.plan) == sizes(make_plan(10))
    state = json.loads((out / "quickstart.json").read_text())
    assert state["plan"]["slowdown"] == 2.0 and state["speed"]["probe"]["seconds"] == 1.0
    probe["seconds"] = 0.5  # the machine is faster now: a resumed run keeps the plan it started with
    assert open_context(out, settings, device="cpu", show_progress=False).plan == ctx.plan
    with pytest.raises(LvsearchError, match="planned with slowdown 2"):
        open_context(out, settings, device="cpu", show_progress=False, speed="1")
    # a state file from before the probe: slowdown 1
    del state["plan"]["slowdown"], state["speed"]
    (out / "quickstart.json").write_text(json.dumps(state))
    assert open_context(out, settings, device="cpu", show_progress=False).plan == make_plan(20)


def test_bad_speed_is_one_message(tmp_path, capsys):
    code = main(["quickstart", "--out", str(tmp_path / "o"), "--no-blimp", "--speed", "fast"])
    err = capsys.readouterr().err
    assert code == 2 and "--speed must be auto or a number > 0" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()
