"""`lvsearch quickstart` end to end on the shared corpus (tiny recipes, tiny budget), killed
mid-stage and resumed; the embedded corpus; bad inputs; the report's statistics."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from lvsearch.cli import main
from lvsearch.quickstart.context import QuickstartSettings
from lvsearch.quickstart.plan import make_plan
from lvsearch.stats import mean_difference_interval

SUPERNET_RECIPE = """\
space: lvbert
num_slots: 4
model: {hidden: 32, embedding: 16, ff_inner: 64, heads: 2, conv_kernel: 3, pre_ln: true, dropout: 0.1}
train: {steps: 10, batch_size: 8, seq_len: 32, lr: 3.0e-3, warmup_steps: 4, log_every: 10,
        eval_every: 0, checkpoint_every: 10, seed: 0}
masking: {probability: 0.15, strategy: token}
eval: {dev_sequences: 16, batch_size: 16, panel: [bert]}
"""
RETRAIN_RECIPE = """\
space: lvbert
num_slots: 4
size: small
model: {hidden: 32, embedding: 16, ff_inner: 64, heads: 2, conv_kernel: 3, pre_ln: true}
objective: mlm
train: {steps: 10, batch_size: 8, seq_len: 32, lr: 3.0e-3, warmup_steps: 4, log_every: 10,
        eval_every: 5, checkpoint_every: 10}
eval: {dev_sequences: 16, batch_size: 16}
"""
MINUTES = "0.2"  # the plan's floors: 40 supernet steps, 48 retrain steps, population 8 × 2


def _recipes(folder: Path) -> tuple[str, str]:
    sn, rt = folder / "tiny-supernet.yaml", folder / "tiny-retrain.yaml"
    sn.write_text(SUPERNET_RECIPE)
    rt.write_text(RETRAIN_RECIPE)
    return str(sn), str(rt)


def _argv(out: Path, recipes: tuple[str, str], data: str | None, extra: list[str]) -> list[str]:
    argv = ["quickstart", "--out", str(out), "--minutes", MINUTES, "--supernet-config", recipes[0],
            "--retrain-config", recipes[1], *extra]
    return argv + (["--data", data] if data else [])


@pytest.fixture(scope="module")
def finished(shared_data: Path, corpora: Path, tmp_path_factory) -> dict:
    """A quickstart on the shared corpus that is SIGKILLed during supernet training, then
    re-run with the same command to completion."""
    folder = tmp_path_factory.mktemp("qs")
    recipes = _recipes(folder)
    out = folder / "run"
    task = shared_data / "tasks" / "sentence_polarity"
    extra = ["--task", str(task), "--blimp", str(shared_data / "blimp")]
    argv = _argv(out, recipes, str(corpora), extra)
    env = dict(os.environ, LVSEARCH_QUIET="1", OMP_NUM_THREADS="1")
    code = "import sys, torch; torch.set_num_threads(1); from lvsearch.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", code, *argv], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    latest = out / "supernet" / "checkpoints" / "latest.json"
    deadline = time.monotonic() + 300
    while not latest.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert killed, f"the quickstart ended before its first supernet checkpoint: {proc.stderr.read()[-2000:]}"
    before = json.loads((out / "quickstart.json").read_text())
    assert before["stages"]["data"]["status"] == "done"
    assert before["stages"]["supernet"].get("status") != "done"
    assert main(argv) == 0
    return {"out": out, "before": before, "argv": argv, "recipes": recipes, "folder": folder}


def test_report_has_every_section_with_numbers(finished):
    out = finished["out"]
    text = (out / "report.md").read_text()
    for section in ("## The arms", "## Differences against `bert`", "## Architectures", "α of the searched model",
                    "## Retraining curves", "## Search: evolution vs random search", "## Supernet rank check",
                    "## Wall time per stage", "## What was cut to fit the budget", "**What one run shows:**",
                    "fitness noise (loss,", "fitness −(mean dev MLM loss) on 32 fixed masked dev sequences"):
        assert section in text, section
    assert "## Finalist pruning" not in text  # only with --finalists
    assert not re.search(r"issue \d", text, re.I)  # the report speaks to its reader, not to the tracker
    arms = make_plan(float(MINUTES)).arms
    assert arms == ("ea", "random-search", "bert")
    for row in ("MLM dev accuracy", "BLiMP mean over paradigms", "sentence_polarity test accuracy", "parameters"):
        line = next(l for l in text.splitlines() if l.startswith(f"| {row}"))
        # a number for each arm (a task score may instead say its fine-tuning failed)
        assert len(re.findall(r"\d\.\d{4}|\d[\d,]{3,}|failed \(loss did not fall\)", line)) >= len(arms), line
    assert re.search(r"Kendall τ = (-?\d\.\d\d|—)", text)
    # dev MLM loss, what the search optimised, beside accuracy: per arm, EA against the other searches, the summary
    assert "| comparison | MLM dev accuracy | BLiMP accuracy | dev MLM loss (nats; no interval) |" in text
    assert re.search(r"\| EA − random-search best \|.*\| \d\.\d{3} vs \d\.\d{3}: [+-]\d\.\d{3} \|", text)
    assert re.search(r"on dev MLM loss \(nats, lower is better.*\) the searched architecture has \d\.\d{3}, ", text)
    # the rank check scores the arms with the search's own fitness (−loss)
    assert json.loads((out / "rank.json").read_text())["fitness"] == "loss"
    # every report leads with the verdicts against the three floors, then the arms
    assert text.index("## Verdict against the floors") < text.index("## The arms")
    verdict = text.split("## Verdict against the floors")[1].split("## The arms")[0]
    assert verdict.count("MLM (neighbour-count floor)") == verdict.count("BLiMP (3-gram Kneser-Ney floor)") >= 3
    assert verdict.count("sentence_polarity test accuracy (bag-of-words floor)") >= 3
    for row in ("BLiMP floor (3-gram Kneser-Ney)", "BLiMP − floor", "sentence_polarity test accuracy floor (bag of words)"):
        line = next(l for l in text.splitlines() if l.startswith(f"| {row}"))
        assert len(re.findall(r"\d\.\d{4}", line)) == 3, line
    # reference floors: rows at the arms' token count, each arm against its floor, the supernet panel
    tokens = make_plan(float(MINUTES)).retrain_steps * 8 * 32
    for row in (f"unigram floor ({tokens:,} training tokens)", f"neighbour-count floor ({tokens:,} training tokens)"):
        line = next(l for l in text.splitlines() if l.startswith(f"| {row}"))
        assert len(re.findall(r"\d\.\d{4}", line)) == 3, line
    line = next(l for l in text.splitlines() if l.startswith("| MLM dev accuracy − neighbour-count floor"))
    assert line.count("→ **") == 3, line
    for verdict in re.findall(r"→ \*\*(ahead|behind|within noise)\*\*([^|]*)", line):
        assert (verdict[0] == "ahead") != ("has not learned past local co-occurrence" in verdict[1]), line
    if "has not learned past local co-occurrence" in line:
        assert "not to be read as architecture effects" in text
    assert "## Supernet panel against the floors" in text and "| `bert` |" in text
    for png in ("architectures.png", "alpha_ea.png", "learning_curves.png", "search_curve.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
        assert f"]({png})" in text


def test_arms_trained_identically(finished):
    out = finished["out"]
    configs = {}
    for arm in ("ea", "random-search", "bert"):
        rc = json.loads((out / "retrain" / arm / "config.json").read_text())
        configs[arm] = (rc["config"], rc["dims"], rc["data"]["tokenizer_sha256"])
        summary = json.loads((out / "retrain" / arm / "summary.json").read_text())
        assert summary["steps"] == make_plan(float(MINUTES)).retrain_steps
    assert not (out / "retrain" / "random-arch").exists() and not (out / "finalists").exists()
    state = json.loads((out / "quickstart.json").read_text())
    assert state["stages"]["finalists"]["result"]["skipped"].startswith("not in the plan")
    first = next(iter(configs.values()))
    assert all(c == first for c in configs.values())  # only the architecture differs
    from lvsearch.quickstart.job import cpu_cores

    if cpu_cores() >= 2:  # bert trained beside the supernet and the search, restarted after the kill
        assert "background" in state["stages"]["retrain"]["result"]["bert"]
        # and was evaluated in the same worker once trained, so the evaluate stage found its report
        assert state["stages"]["evaluate"]["result"]["bert"] == "evaluated in the background, once trained"
        assert "`bert` (whose architecture does not depend on the search) trained in the background" in (
            out / "report.md").read_text()
    archs = {json.loads((out / "retrain" / a / "config.json").read_text())["arch"]["ops"].__repr__()
             for a in configs}
    assert len(archs) >= 2


def test_killed_run_resumed_not_restarted(finished):
    out, before = finished["out"], finished["before"]
    state = json.loads((out / "quickstart.json").read_text())
    assert all(s["status"] == "done" for s in state["stages"].values())
    # data was not prepared again: its stage time is unchanged by the second process
    assert state["stages"]["data"]["seconds"] == before["stages"]["data"]["seconds"]
    summary = json.loads((out / "supernet" / "summary.json").read_text())
    assert summary["resumed_from"] > 0  # continued from the checkpoint written before the kill
    # a third run finds everything done and rewrites nothing (it rewrote report.md and
    # quickstart.json); it prints where the report is and its verdicts
    files = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(out.rglob("*")) if p.is_file()}
    t0 = time.perf_counter()
    assert main(finished["argv"]) == 0
    assert time.perf_counter() - t0 < 60
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(out.rglob("*")) if p.is_file()} == files


FLOAT = r"([+\-−]?\d+\.\d+)"


def _num(x: str) -> float:
    return float(x.replace("−", "-"))


def floor_words_follow_intervals(text: str) -> int:
    """Check every floor sentence of a report or console text against its interval: "below"
    only when the interval's upper end is below 0, "within noise of" only when it holds 0.
    Returns how many sentences were checked."""
    checked = 0
    for word, lo, hi, verdict in re.findall(r": (below|within noise of|above) it \(\S+ \[" + FLOAT + ", " + FLOAT
                                            + r"\] → \*\*(ahead|behind|within noise)\*\*\)", text):
        lo, hi = _num(lo), _num(hi)  # printed to 4 decimals: an end that rounds to 0 may be either side
        assert word == {"behind": "below", "within noise": "within noise of", "ahead": "above"}[verdict], (word, verdict)
        assert {"behind": hi <= 0, "within noise": lo <= 0 <= hi, "ahead": lo >= 0}[verdict], (lo, hi, verdict)
        checked += 1
    for word, lo, hi in re.findall(r"(beats its floor|is below its floor|within noise of it\)), \S+ \(95% CI \["
                                   + FLOAT + ", " + FLOAT + r"\]\)", text):
        lo, hi = _num(lo), _num(hi)
        assert {"b": lo >= 0, "i": hi <= 0, "w": lo <= 0 <= hi}[word[0]], (word, lo, hi)
        checked += 1
    return checked


def test_floor_sentences_follow_their_intervals(finished, capsys):
    """Every "below"/"within noise of" about a floor in the report and on the console agrees
    with its interval (an arm whose interval holds 0 was once called "below the floor")."""
    report = (finished["out"] / "report.md").read_text()
    capsys.readouterr()
    assert main(finished["argv"]) == 0
    console = " ".join("".join(capsys.readouterr()).split())
    assert floor_words_follow_intervals(report) >= 3 and floor_words_follow_intervals(console) >= 3
    line = next(l for l in report.splitlines() if l.startswith("| MLM dev accuracy − neighbour-count floor"))
    ea = re.findall(r"→ \*\*(ahead|behind|within noise)\*\*", line)[0]  # the EA arm's column comes first
    summary = next(l for l in report.splitlines() if l.startswith("**Summary:**"))
    assert ("(below the neighbour-count floor)" in summary) == (ea == "behind")
    assert ("(within noise of the neighbour-count floor)" in summary) == (ea == "within noise")
    # the checker itself fails on the old wording
    with pytest.raises(AssertionError):
        floor_words_follow_intervals("ea: below it (+0.0112 [−0.0030, +0.0257] → **within noise**)")


def test_console_ends_with_the_verdicts_and_the_report_has_a_legend(finished, capsys):
    """After the quickstart the console printed only ``quickstart done: …/report.md``;
    the c/s/f letters had no legend in the report."""
    capsys.readouterr()
    assert main(finished["argv"]) == 0
    text = " ".join("".join(capsys.readouterr()).split())
    assert "already finished" in text and str(finished["out"] / "report.md") in text
    for arm in ("ea", "random-search", "bert"):
        assert f"- {arm}: MLM (neighbour-count floor)" in text, arm
    assert "Summary:" in text
    report = (finished["out"] / "report.md").read_text()
    assert "`s` = self-attention (SA), `f` = feed-forward (FF), `c` = dynamic convolution (DC)" in report


def test_missing_blimp_folder_is_named_and_bad_arguments_come_first(tmp_path, monkeypatch, capsys):
    """With the default BLiMP folder absent, the report said "skipped: --no-blimp"
    (never passed), and the BLiMP warning printed before an argument error."""
    import lvsearch.eval.job as eval_job
    from lvsearch.quickstart.arms import evaluate_options
    from lvsearch.quickstart.context import Context

    missing = tmp_path / "no-blimp-here"
    monkeypatch.setattr(eval_job, "default_blimp_dir", lambda: missing)
    assert main(["quickstart", "--out", str(tmp_path / "o"), "--data", str(tmp_path / "nodata")]) == 2
    err = capsys.readouterr().err
    assert "--data" in err and "BLiMP skipped" not in err, err
    ctx = Context(tmp_path, QuickstartSettings(blimp=None), make_plan(float(MINUTES)), {})
    opts = evaluate_options(ctx, tmp_path / "m", tmp_path / "r.json")
    assert opts.no_blimp and "BLiMP folder not found at" in opts.no_blimp_reason and str(missing) in opts.no_blimp_reason


def test_other_settings_on_same_out_refused(finished, capsys):
    out = finished["out"]
    argv = list(finished["argv"])
    argv[argv.index("--minutes") + 1] = "0.3"
    snapshot = (out / "quickstart.json").read_bytes()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "holds a quickstart with other settings" in err and "minutes" in err and "Traceback" not in err
    assert (out / "quickstart.json").read_bytes() == snapshot


def test_embedded_corpus_without_data(tmp_path, shared_data):
    recipes = _recipes(tmp_path)
    out = tmp_path / "run"
    assert main(_argv(out, recipes, None, ["--no-blimp"])) == 0
    manifest = json.loads((out / "data" / "manifest.json").read_text())
    assert "builtin:python-docs" in json.dumps(manifest["sources"])
    text = (out / "report.md").read_text()
    assert "builtin:python-docs" in text and "## The arms" in text


#: The quickstart's own stage files damaged: the file, its new content, what the message says.
DAMAGED_STAGE_FILES = [
    ("search/best.json", {}, "search/best.json is malformed: field ops is missing"),
    ("search/best.json", [], "search/best.json is malformed: input should be a valid dictionary"),
    ("search/best.json", {"ops": "sfsf", "meta": "x"}, "search/best.json is malformed: field meta: input should be"),
    ("rank.json", {}, "rank.json is malformed: field rows is missing"),
    ("eval/ea.json", {}, "eval/ea.json is not an lvsearch evaluation report"),
    ("search/state.json", "curve", "search/state.json is malformed: field curve: input should be a valid list"),
    ("retrain/ea/summary.json", [], "retrain/ea/summary.json is malformed: input should be a valid dictionary"),
    ("supernet/summary.json", "panel", "supernet/summary.json is malformed: field final_eval.panel: input should be "
                                       "a valid dictionary"),
    ("supernet/config.json", "slots", "supernet/config.json is malformed: field space.num_slots: input should be a "
                                      "valid integer"),
    ("retrain/bert/config.json", {"arch": "bert"}, "retrain/bert/config.json is malformed: field arch: input should be "
                                                   "a valid dictionary"),
]


@pytest.mark.parametrize("name,content,expect", DAMAGED_STAGE_FILES, ids=[f"{n}={json.dumps(c)[:12]}"
                                                                         for n, c, _ in DAMAGED_STAGE_FILES])
def test_a_damaged_stage_file_is_one_message_naming_file_and_field(finished, tmp_path, capsys, name, content, expect):
    """A finished quickstart re-run after one of its stage files was edited and its report.md
    removed: the report stage refuses the file, naming it and the field (was a KeyError/TypeError
    traceback)."""
    import shutil

    out = tmp_path / "run"
    shutil.copytree(finished["out"], out)
    path = out / name
    if content in ("curve", "panel", "slots"):  # one field of the real file damaged
        content, state = json.loads(path.read_text()), content
        if state == "curve":
            content["curve"] = "garbage"
        elif state == "panel":
            content["final_eval"]["panel"] = "x"
        else:
            content["space"]["num_slots"] = "4"
    path.write_text(json.dumps(content))
    (out / "report.md").unlink()  # else the finished run is left as it is (nothing re-read, nothing rewritten)
    argv = [out if a == str(finished["out"]) else a for a in finished["argv"]]
    capsys.readouterr()
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and expect in " ".join(err.split()) and "Traceback" not in err, err
    assert "fix: " in err


def test_search_and_finalist_stages_check_the_files_they_read(tmp_path):
    """The search stage's "is it done" check and the finalist stage read state.json and
    topk.json through the stage-file models: a non-integer iteration target was a ValueError
    traceback, a top-k that is not a list let the finalist stage skip itself silently."""
    from types import SimpleNamespace

    from lvsearch.errors import LvsearchError
    from lvsearch.quickstart.stages import _search_done, stage_finalists

    search = tmp_path / "search"
    search.mkdir()
    (search / "best.json").write_text("{}")
    (search / "state.json").write_text(json.dumps({"iteration": 2, "config": {"iterations": "many"}}))
    with pytest.raises(LvsearchError, match="state.json is malformed: field config.iterations: input should be a "
                                            "valid integer"):
        _search_done(search)
    (search / "state.json").write_text(json.dumps({"iteration": 2, "config": {"iterations": 2}}))
    assert _search_done(search)
    (search / "topk.json").write_text(json.dumps({"topk": "ccff"}))
    ctx = SimpleNamespace(plan=SimpleNamespace(finalists=2), search_dir=search)
    with pytest.raises(LvsearchError, match="topk.json is malformed: field topk: input should be a valid list") as e:
        stage_finalists(ctx)
    assert "run the same quickstart command again with another --out" in str(e.value)


def test_bad_inputs(tmp_path, capsys):
    def bad(*argv: str, match: str) -> None:
        code = main(["quickstart", "--out", str(tmp_path / "o"), *argv])
        err = capsys.readouterr().err
        assert code == 2 and match in err and "Traceback" not in err, err

    bad("--minutes", "0", match="--minutes must be > 0")
    bad("--seeds", "0", match="--seeds must be ≥ 1")
    bad("--finalists", "1", match="--finalists must be 0")
    bad("--minutes", "inf", match="--minutes must be > 0")
    bad("--data", str(tmp_path / "missing"), match="does not exist")
    with pytest.raises(SystemExit):  # argparse: invalid choice
        main(["quickstart", "--out", str(tmp_path / "o"), "--space", "dc-ff"])
    assert "invalid choice" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    bad("--data", str(empty), match="--data")  # data-prepare's message, in quickstart's terms
    notblimp = tmp_path / "notblimp"
    notblimp.mkdir()
    (notblimp / "readme.txt").write_text("x")
    bad("--blimp", str(notblimp), match="holds no *.jsonl files")  # checked before any training
    bad("--task", str(tmp_path / "nope"), match="nope")
    bad("--blimp", str(tmp_path / "nope"), match="is not a folder")
    other = tmp_path / "busy"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    code = main(["quickstart", "--out", str(other), "--no-blimp"])
    assert code == 2 and "holds no quickstart" in capsys.readouterr().err
    assert (other / "keep.txt").read_text() == "mine"
    # a first try that failed on bad --data produced nothing: the fixed command may reuse --out
    state = json.loads((tmp_path / "o" / "quickstart.json").read_text())
    assert state["settings"]["data"] == str(empty) and not any(
        st.get("status") == "done" for st in state["stages"].values())
    from lvsearch.quickstart.context import QuickstartSettings, open_context

    ctx = open_context(tmp_path / "o", QuickstartSettings(data="builtin:python-docs", blimp=None), show_progress=False)
    assert ctx.state["settings"]["data"] == "builtin:python-docs"
    (tmp_path / "o" / "quickstart.json").write_text('{"format": "lvsearch.quickstart/v1", "stages": 5}')
    bad("--no-blimp", match="quickstart.json is malformed: field settings is missing")
    state["stages"] = {"data": "done"}
    (tmp_path / "o" / "quickstart.json").write_text(json.dumps(state))
    bad("--no-blimp", match="quickstart.json is malformed: field stages.data: input should be a valid dictionary")
    (tmp_path / "o" / "quickstart.json").write_text("{not json")
    bad("--no-blimp", match="not valid JSON")
    assert (tmp_path / "o" / "quickstart.json").read_text() == "{not json"


def test_paired_difference_verdicts():
    rng = np.random.default_rng(0)
    b = rng.integers(0, 2, 2000)
    better = np.where(rng.random(2000) < 0.3, 1, b)  # flips 0 → 1 on ~15% of items
    d = mean_difference_interval(better, b)
    assert d["verdict"] == "ahead" and d["low"] > 0 and d["diff"] == pytest.approx(better.mean() - b.mean())
    assert mean_difference_interval(b, better)["verdict"] == "behind"
    noise = rng.integers(0, 2, 2000)
    assert mean_difference_interval(noise, noise ^ (rng.random(2000) < 0.001))["verdict"] == "within noise"
    assert mean_difference_interval(b, b)["verdict"] == "within noise"
    with pytest.raises(ValueError):
        mean_difference_interval(b, b[:10])


def test_plan_scales_with_minutes():
    small, default, large = make_plan(2), make_plan(20), make_plan(60)
    assert small.supernet_steps < default.supernet_steps < large.supernet_steps
    assert small.retrain_steps <= default.retrain_steps < large.retrain_steps
    assert default.population * default.iterations <= large.population * large.iterations
    assert make_plan(20, seeds=3).seeds == 3
    # the default plan: three arms retrained 1800 steps (where searched arms clear the MLM floor),
    # no finalist stage, the search with evolve's defaults (1024 dev sequences, racing)
    assert default.arms == ("ea", "random-search", "bert") and default.retrain_steps == 1800
    assert default.finalists == 0 and default.search_dev_sequences == 1024 and default.racing == "default"
    assert make_plan(20, finalists=3).finalists == 3
    assert {c[0] for c in default.cuts()} == {"supernet", "search", "retrain", "BLiMP", "fine-tuning"}
    # above 20 minutes every stage's work grows like its budget (linearly), so --minutes 60 runs
    # about 60 minutes: training steps, search evaluations on the same dev set, BLiMP pairs and
    # fine-tuning examples × seeds
    for minutes in (40, 60, 100):
        p, s = make_plan(minutes), minutes / 20

        def work(q):
            return {"supernet": q.supernet_steps, "search": q.population * q.iterations * q.search_dev_sequences,
                    "retrain": q.retrain_steps, "blimp": q.blimp_limit,
                    "finetune": q.finetune_train_limit * q.finetune_epochs * q.finetune_seeds}

        for stage, ratio in ((k, work(p)[k] / work(default)[k]) for k in work(p)):
            assert ratio == pytest.approx(s, rel=0.1), (minutes, stage, ratio)


@pytest.mark.parametrize("minutes", [0.2, 5, 20, 33.3, 60])
def test_stage_budgets_add_up_to_minutes(minutes):
    """The plan's stage budgets add up to --minutes; extra seeds repeat retrain and evaluate,
    and the optional finalist stage comes on top."""
    plan = make_plan(minutes)
    budgets = plan.stage_budgets()
    assert sum(budgets.values()) == pytest.approx(minutes * 60)
    assert plan.total_minutes() == pytest.approx(minutes)
    assert budgets["finalists"] == 0 and all(budgets[n] > 0 for n in ("supernet", "search", "retrain", "evaluate"))
    three = make_plan(minutes, seeds=3).stage_budgets()
    assert three["retrain"] == pytest.approx(3 * budgets["retrain"]) and three["supernet"] == pytest.approx(budgets["supernet"])
    fin = make_plan(minutes, finalists=3).stage_budgets()
    assert fin["finalists"] > 0 and sum(fin.values()) > minutes * 60


@pytest.mark.parametrize("seeds,finalists", [(1, 0), (3, 0), (1, 3)])
def test_report_budget_is_the_plans(tmp_path, seeds, finalists):
    """The report's budget and its overrun warning read the plan's total (Plan.total_minutes:
    extra seeds repeat retrain and evaluate, finalists add their stage); it was recomputed as
    --minutes × 2 with several seeds and --minutes with finalists (~40 instead of ~42.6, 20
    instead of ~29.6 at --minutes 20)."""
    from lvsearch.quickstart.context import Context
    from lvsearch.quickstart.plan import OVERRUN_WARN
    from lvsearch.quickstart.report import ReportInputs, header_section

    plan = make_plan(20, seeds, finalists)
    planned = plan.total_minutes()
    assert planned == pytest.approx(sum(plan.stage_budgets().values()) / 60)
    if seeds == 1 and not finalists:
        assert planned == pytest.approx(20)
    else:
        assert planned > 20 * (1.05 if seeds == 1 else 2.05)

    def header(minutes_used: float) -> str:
        ctx = Context(tmp_path, QuickstartSettings(seeds=seeds, finalists=finalists), plan,
                      {"stages": {"retrain": {"seconds": minutes_used * 60}}})
        names = {a: ctx.run_names(a) for a in plan.arms}
        inp = ReportInputs(ctx, names, {}, {}, {n: {"tokens": 2048 * plan.retrain_steps} for v in names.values() for n in v},
                           {}, {})
        return "\n".join(header_section(inp))

    shown = "20" if seeds == 1 and not finalists else f"{round(planned, 1):g}"
    under, over = header(OVERRUN_WARN * planned * 0.99), header(OVERRUN_WARN * planned * 1.01)
    assert "This run took" not in under
    assert f"× its ~{shown}-minute budget" in over
    if shown != "20":
        assert f"budget 20 min, ~{shown} min planned with " in under
    else:
        assert "budget 20 min (plan below)" in under


def _tiny_run(tmp_path: Path, corpora: Path, extra: list[str]) -> tuple[Path, str]:
    """A tiny quickstart without BLiMP with ``extra`` switches: ``(OUT, report text)``."""
    out = tmp_path / "run"
    assert main(_argv(out, _recipes(tmp_path), str(corpora), ["--no-blimp", *extra])) == 0
    return out, (out / "report.md").read_text()


def test_electra_objective_is_stated(tmp_path, corpora):
    out, text = _tiny_run(tmp_path, corpora, ["--objective", "electra"])
    assert "retrain objective **electra**" in text and "ELECTRA *generator*" in text
    rc = json.loads((out / "retrain" / "bert" / "config.json").read_text())
    assert rc["config"]["objective"] == "electra" and rc["generator_dims"] is not None


def test_summary_and_search_sentence_follow_the_numbers():
    """The summary covers every paired metric with its verdict, the search sentence names
    whichever search is ahead, and the one-seed sentence follows the number of seeds."""
    from lvsearch.quickstart.sentences import search_gap_sentence, summary_sentences

    comps = {("ea", "mlm"): {"verdict": "ahead", "diff": 0.01},
             ("ea-vs", "random-search", "mlm"): {"verdict": "within noise", "diff": 0.002},
             ("ea-vs", "random-arch", "blimp"): {"verdict": "behind", "diff": -0.03}}
    text = summary_sentences(comps, ea_floor="ahead")
    assert "on MLM dev accuracy the searched architecture is ahead of `bert` (+0.0100)" in text
    assert "not distinguishable from the random-search best (+0.0020)" in text
    assert "on BLiMP the searched architecture is behind the random architecture (-0.0300)" in text
    assert "co-occurrence" not in text and "co-occurrence" not in summary_sentences(comps, ea_floor=None)
    # the caveat says "below" only for an interval wholly below 0, "within noise of" for one holding 0
    behind, noise = summary_sentences(comps, ea_floor="behind"), summary_sentences(comps, ea_floor="within noise")
    assert "co-occurrence (below the neighbour-count floor)" in behind
    assert "co-occurrence (within noise of the neighbour-count floor)" in noise and "below" not in noise
    assert search_gap_sentence(0.0907, 0.0932, 0.0900, 0.0910).startswith("Here: random search ahead")
    assert search_gap_sentence(0.095, 0.0932, 0.0900, 0.0910).startswith("Here: EA ahead on best fitness, random search")
    # dev MLM loss (what the search optimised) per arm: the random-search arm lower after retraining
    losses = {"ea": [4.201], "bert": [4.25, 4.23], "random-search": [4.155]}
    text = summary_sentences(comps, ea_floor="ahead", losses=losses)
    assert ("on dev MLM loss (nats, lower is better; −loss is the search's default fitness) the searched "
            "architecture has 4.201, lower (better) than `bert` (4.240 ± 0.014, -0.039), higher (worse) than the "
            "random-search best (4.155, +0.046)") in text
    assert "no per-target losses to pair" in text
    assert text.index("MLM dev accuracy the searched") < text.index("dev MLM loss") < text.index("on BLiMP")
    assert "dev MLM loss" not in summary_sentences(comps, ea_floor="ahead")
    flipped = summary_sentences({("ea", "mlm"): {"verdict": "behind", "diff": -0.01}}, ea_floor="ahead")
    assert "behind `bert` (-0.0100)" in flipped and "ahead" not in flipped
    from lvsearch.quickstart.sentences import one_seed_sentence

    assert "one pretraining seed" in one_seed_sentence(1) and "--seeds 3" in one_seed_sentence(1)
    assert "3 pretraining seeds" in one_seed_sentence(3) and "several search seeds" in one_seed_sentence(3)


def test_stage_shares_follow_the_stages():
    """The ETA's calibration shares name every stage, in the order the stages run."""
    from lvsearch.quickstart.stages import STAGES
    from lvsearch.quickstart.plan import STAGE_ORDER, STAGE_SHARES, pace_line

    assert [name for name, _ in STAGES] == list(STAGE_ORDER)
    budgets = make_plan(20).stage_budgets()
    assert list(budgets) == list(STAGE_ORDER)
    text, pace = pace_line(600, ["data", "supernet"], budgets)  # 10 min for what the plan gives ~3.4 min
    assert pace == pytest.approx(600 / (budgets["data"] + budgets["supernet"]))
    assert "whole run takes" in text and "of ~20 min used" in text
    assert pace_line(5, [], budgets)[1] is None
    # the data stage prepares the whole corpus at any budget: its budget is its measured seconds,
    # so a fast data stage does not promise a 60-minute run in 22 minutes
    long = make_plan(60).stage_budgets()
    assert long["data"] == budgets["data"] == STAGE_SHARES["data"]
    assert pace_line(16, ["data"], long)[1] is None
    text, pace = pace_line(16 + 760, ["data", "supernet"], long)
    assert pace == pytest.approx(776 / (long["data"] + long["supernet"])) and "~60 min" in text


def test_same_pick_is_trained_and_evaluated_once(tmp_path):
    """When both searches pick the same architecture, the random-search arm links to the EA
    arm's run and copies its evaluation (the runs would be byte-identical)."""
    from lvsearch.arch import Arch
    from lvsearch.quickstart.arms import same_as
    from lvsearch.quickstart.context import Context, QuickstartSettings
    from lvsearch.quickstart.stages import stage_evaluate, stage_retrain

    from dataclasses import replace

    settings = QuickstartSettings(blimp=None)  # arms in this process, so the fake retrain below is used
    ctx = Context(tmp_path, settings, replace(make_plan(20), arm_processes=0), {"stages": {}}, show_progress=False)
    pick = Arch.from_key("cfcfsfsfsfsf").to_dict(space="lvbert@12")
    for folder in (tmp_path / "search", tmp_path / "search" / "random"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "best.json").write_text(json.dumps(pick))
    assert same_as(ctx, "random-search") == "ea" and same_as(ctx, "ea") is None and same_as(ctx, "bert") is None
    trained = []
    import lvsearch.quickstart.stages as stages

    def fake_retrain(ctx, arm, seed, run):
        run.mkdir(parents=True)
        (run / "marker").write_text(arm)
        trained.append(arm)
        return {}

    real = stages.retrain_arm
    stages.retrain_arm = fake_retrain
    try:
        result = stage_retrain(ctx)
    finally:
        stages.retrain_arm = real
    assert trained == ["ea", "bert"] and result["random-search"]["from"] == "same architecture as ea"
    link = tmp_path / "retrain" / "random-search"
    assert link.is_symlink() and (link / "marker").read_text() == "ea"
    evaluated = []
    real_eval = stages.evaluate_options
    (tmp_path / "eval").mkdir()
    for arm in ("ea", "bert"):  # evaluated earlier; only the copy is made
        (tmp_path / "eval" / f"{arm}.json").write_text(json.dumps({"arm": arm}))
    stages.evaluate_options = lambda *a: evaluated.append(a)
    try:
        done = stage_evaluate(ctx)
    finally:
        stages.evaluate_options = real_eval
    assert evaluated == [] and done["random-search"].startswith("copied from ea.json")
    assert json.loads((tmp_path / "eval" / "random-search.json").read_text()) == {"arm": "ea"}
    # different picks: nothing is linked
    other = Arch.from_key("ffcfsfsfsfsf").to_dict(space="lvbert@12")
    (tmp_path / "search" / "random" / "best.json").write_text(json.dumps(other))
    assert same_as(ctx, "random-search") is None


def test_fixed_arms_train_beside_the_search(tmp_path, monkeypatch):
    """On a CPU, up to cores − 1 runs of the fixed arms (bert) train in the background while this
    process trains the supernet with that many fewer threads; none on one core or a GPU."""
    import lvsearch.quickstart.job as job
    from lvsearch.quickstart.context import Context, QuickstartSettings
    from lvsearch.quickstart.job import fixed_runs, search_threads

    def ctx(seeds=1, device="cpu"):
        return Context(tmp_path, QuickstartSettings(), make_plan(20, seeds), {"stages": {}}, device=device)

    monkeypatch.setattr(job, "cpu_cores", lambda: 1)
    assert fixed_runs(ctx()) == [] and search_threads(ctx(), 1) == 1
    monkeypatch.setattr(job, "cpu_cores", lambda: 2)
    assert fixed_runs(ctx()) == [("bert", 0, "bert")] and search_threads(ctx(), 2) == 1
    assert fixed_runs(ctx(seeds=3)) == [("bert", 0, "bert")]
    monkeypatch.setattr(job, "cpu_cores", lambda: 16)
    assert [r[2] for r in fixed_runs(ctx(seeds=3))] == ["bert", "bert-seed1", "bert-seed2"]
    assert search_threads(ctx(seeds=3), 16) == 13
    assert fixed_runs(ctx(device="cuda")) == []


def test_finalists_stage_on_request(tmp_path, corpora):
    """`--finalists K` adds successive halving over the EA top-k; its pick is the EA arm."""
    out, text = _tiny_run(tmp_path, corpora, ["--finalists", "2"])
    assert "## Finalist pruning" in text and "ranked by the current dev MLM loss" in text
    assert (out / "retrain" / "ea").is_symlink()
    assert (out / "retrain" / "ea").resolve().parent == (out / "finalists" / "finalists").resolve()
    state = json.loads((out / "quickstart.json").read_text())
    assert state["settings"]["finalists"] == 2 and state["plan"]["finalists"] == 2


def test_worker_progress_shows_the_logs_current_phase(tmp_path):
    """An evaluation worker has no step count; its bar shows the phase its log reports last."""
    from lvsearch.quickstart.workers import _last_progress

    log = tmp_path / "ea.evaluate.log"
    assert _last_progress(log) == ""
    log.write_text("MLM dev set: 512 sequences\n[progress] BLiMP: 3,093/3,350 (92%) · sentences · 1:01 elapsed · ETA 0:09\n"
                   "[progress] fine-tuning: 48/94 (51%) · sentence_polarity seed 0 · 0:36 elapsed · ETA 0:34\nnoise\n")
    assert _last_progress(log) == "fine-tuning: 48/94 (51%) · sentence_polarity seed 0"


def test_worker_processes_train_as_one_thread_in_process(tmp_path, prepared_corpus):
    """An arm trained in a single-threaded worker process equals the same retrain with one
    thread in this process, bit for bit; a worker's error arrives as the same message."""
    import torch

    from lvsearch.errors import LvsearchError
    from lvsearch.quickstart.workers import WorkerJob, run_jobs
    from lvsearch.train.retrain import retrain

    recipe = _recipes(tmp_path)[1]
    kwargs = {"arch_spec": "bert", "recipe": recipe, "data_dir": str(prepared_corpus), "overrides": ["num_slots=4"]}
    jobs = run_jobs([WorkerJob("a", "retrain", {**kwargs, "out": str(tmp_path / "a")}, steps=10, run=str(tmp_path / "a")),
                     WorkerJob("b", "retrain", {**kwargs, "arch_spec": "sandwich", "out": str(tmp_path / "b")}, steps=10)],
                    tmp_path / "logs", show_progress=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        here = retrain("bert", recipe, prepared_corpus, tmp_path / "here", overrides=["num_slots=4"], show_progress=False)
    finally:
        torch.set_num_threads(threads)
    assert jobs[0].result["weights_sha256"] == here["weights_sha256"]
    assert jobs[1].result["weights_sha256"] != here["weights_sha256"]  # another architecture
    env = json.loads((tmp_path / "a" / "environment.json").read_text())
    assert env["started"]["threads"] == 1
    # a retrain worker with then_evaluate evaluates its run in the same process, and its report
    # equals one evaluated afterwards in an evaluate worker (what the evaluate stage would run)
    from lvsearch.eval.job import EvaluateOptions

    def ev(out):
        return {"model": str(tmp_path / "e" / "model"), "out": str(out), "no_blimp": True, "mlm_data": str(prepared_corpus),
                "dev_sequences": 16, "device": "cpu", "threads": 1}

    assert set(ev(tmp_path)) <= set(EvaluateOptions.__dataclass_fields__)
    both = WorkerJob("e", "retrain", {**kwargs, "out": str(tmp_path / "e")}, steps=10, run=str(tmp_path / "e"),
                     then_evaluate=ev(tmp_path / "early.json"))
    [both] = run_jobs([both], tmp_path / "logs", show_progress=False)
    assert both.result["weights_sha256"] == here["weights_sha256"] and both.result["report"] == str(tmp_path / "early.json")
    [later] = run_jobs([WorkerJob("e2", "evaluate", ev(tmp_path / "later.json"))], tmp_path / "logs", show_progress=False)
    early, late = (json.loads((tmp_path / f).read_text())["mlm"] for f in ("early.json", "later.json"))
    assert early["per_target_correct"] == late["per_target_correct"] and early["accuracy"] == late["accuracy"]
    with pytest.raises(LvsearchError, match="retrain of bad: .*nosuch"):
        run_jobs([WorkerJob("bad", "retrain", {**kwargs, "recipe": str(tmp_path / "nosuch.yaml"), "out": str(tmp_path / "c")})],
                 tmp_path / "logs", show_progress=False)
    # a background worker's failure is raised by the next check, without waiting for the others
    from lvsearch.quickstart.workers import WorkerPool

    pool = WorkerPool(tmp_path / "logs")
    pool.start([WorkerJob("bad2", "retrain", {**kwargs, "recipe": str(tmp_path / "nosuch.yaml"), "out": str(tmp_path / "d")})])
    deadline = time.monotonic() + 120
    while pool.running() and time.monotonic() < deadline:
        time.sleep(0.1)
    with pytest.raises(LvsearchError, match="retrain of bad2: .*nosuch"):
        pool.check()


@pytest.mark.parametrize("decoy", ["empty folder", "other package"])
def test_workers_import_this_lvsearch_whatever_the_current_folder_holds(tmp_path, monkeypatch, decoy):
    """Run from a folder holding a directory named ``lvsearch`` (a checkout seen from
    its parent loads as a namespace package in place of an editable install; a package of that
    name would shadow any install), a worker still imports the lvsearch of this process: the
    job's own error arrives, not an import failure blamed on memory."""
    from lvsearch.errors import LvsearchError
    from lvsearch.quickstart.workers import WorkerJob, run_jobs

    here = tmp_path / "cwd"
    (here / "lvsearch").mkdir(parents=True)
    if decoy == "other package":
        (here / "lvsearch" / "__init__.py").write_text("raise ImportError('the decoy lvsearch was imported')\n")
    else:  # only the editable install's finder (no PYTHONPATH) would find lvsearch after the folder
        monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.chdir(here)
    job = WorkerJob("bad", "retrain", {"arch_spec": "bert", "recipe": str(tmp_path / "nosuch.yaml"),
                                       "data_dir": str(tmp_path), "out": str(tmp_path / "c")})
    with pytest.raises(LvsearchError) as err:
        run_jobs([job], tmp_path / "logs", show_progress=False)
    msg = str(err.value)
    assert msg.startswith("retrain of bad: ") and "is not a prepared dataset" in msg, msg
    assert "memory" not in msg
