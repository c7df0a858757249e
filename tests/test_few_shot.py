"""Few-shot sub-supernets: the fixed-op sampler, the warm start, the split's choice rule, bad
settings, and ``evolve --few-shot`` (scores, records, bad parts, resume) — on a tiny supernet
trained on the real shared corpus."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from _shared import run_cli

from lvsearch.arch import Arch
from lvsearch.cli import main
from lvsearch.config import SamplingConfig, load_config, SupernetConfig
from lvsearch.data.loader import fixed_dev_set
from lvsearch.data.shards import PreparedData
from lvsearch.errors import LvsearchError
from lvsearch.search.evaluator import SupernetEvaluator
from lvsearch.search.schedule import Racing
from lvsearch.search.few_shot import FewShotSupernets
from lvsearch.train.supernet import sub_supernet_recipe
from lvsearch.train.supernet import load_dev
from lvsearch.space import SearchSpace
from lvsearch.train.supernet import ArchSampler, load_supernet, train_supernet

REPO = Path(__file__).resolve().parents[1]
TINY = [
    "space=lvbert-elc", "num_slots=4", "model.hidden=32", "model.embedding=16", "model.ff_inner=64",
    "model.heads=2", "model.conv_kernel=3", "train.seq_len=32", "train.batch_size=8", "train.steps=8",
    "train.warmup_steps=2", "train.log_every=10", "train.eval_every=0", "train.checkpoint_every=8",
    "eval.dev_sequences=16", "eval.panel=[bert]",
]


@pytest.fixture(scope="module")
def one_shot(prepared_corpus: Path, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("few_shot") / "one_shot"
    train_supernet("quickstart", prepared_corpus, out, overrides=TINY, show_progress=False)
    return out


@pytest.fixture(scope="module")
def parts(one_shot: Path, prepared_corpus: Path, tmp_path_factory) -> list[Path]:
    """The split at slot 1, made the three ways the docs give: SA from :func:`sub_supernet_recipe`,
    FF by ``train-supernet --few-shot-from``, DC by the one-shot's recipe and --set plus
    init_from and the fixed op."""
    root = tmp_path_factory.mktemp("parts")
    runs = [_train_part(one_shot, prepared_corpus, root / "sa", "SA")]
    ff = root / "ff"
    assert main(["train-supernet", "--few-shot-from", str(one_shot), "--op", "FF", "--steps", "3",
                 "--data", str(prepared_corpus), "--out", str(ff)]) == 0
    rec = json.loads((ff / "config.json").read_text())["config"]
    assert rec["sampling"]["fix_slot"] == 1 and rec["sampling"]["fix_op"] == "FF"
    assert rec["init_from"] == str(one_shot.resolve()) and rec["train"]["steps"] == 3
    assert rec["model"] == json.loads((one_shot / "config.json").read_text())["config"]["model"]
    runs.append(ff)
    dc = root / "dc"
    sets = [f"--set={s}" for s in [*TINY, f"init_from={one_shot}", "sampling.fix_slot=1", "sampling.fix_op=DC",
                                    "train.steps=3", "train.checkpoint_every=3"]]
    assert main(["train-supernet", "--config", "quickstart", "--data", str(prepared_corpus), "--out", str(dc),
                 *sets]) == 0
    return [*runs, dc]


def _train_part(one_shot: Path, data: Path, out: Path, op: str | None, **train) -> Path:
    recipe = sub_supernet_recipe(one_shot, steps=3, slot=1 if op else None, op=op)
    recipe["train"].update(train)
    path = out.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    train_supernet(str(path), data, out, show_progress=False)
    return out


def test_fixed_op_sampler_runs_the_op_at_its_slot_and_samples_the_rest():
    space = SearchSpace.load("lvbert-elc").with_num_slots(6)
    for strategy in ("uniform", "fair"):
        sampler = ArchSampler(space, SamplingConfig(strategy=strategy, fix_slot=2, fix_op="DC"), seed=0)
        archs = [sampler(step) for step in range(60)]
        assert all(a.ops[1] == "DC" for a in archs)
        assert {a.ops[0] for a in archs} == set(space.ops)  # the other slots still vary over all ops
        assert all(space.validate(a) for a in archs)
        free = ArchSampler(space, SamplingConfig(strategy=strategy), seed=0)
        # the same draw as the unrestricted sampler, except at the fixed slot
        for step in range(10):
            a, b = sampler(step), free(step)
            assert a.inputs == b.inputs and a.ops[:1] + a.ops[2:] == b.ops[:1] + b.ops[2:]


def test_bad_sub_supernet_settings_are_refused():
    for sets, word in ((["sampling.fix_slot=1"], "go together"), (["sampling.fix_op=SA"], "go together"),
                       (["sampling.fix_slot=0", "sampling.fix_op=SA"], "slot number"),
                       (["sampling.fix_slot=1", "sampling.fix_op=SA", "sampling.strategy=sandwich"], "sandwich")):
        with pytest.raises(LvsearchError, match=word):
            load_config(SupernetConfig, "quickstart", sets)


def test_warm_start_copies_the_one_shot_weights(one_shot: Path, prepared_corpus: Path, tmp_path: Path):
    # a vanishing lr (AdamW's decoupled weight decay scales with it too) leaves the warm start as it is
    part = _train_part(one_shot, prepared_corpus, tmp_path / "sa", "SA", lr=1e-30)
    a, b = load_supernet(one_shot).supernet.state_dict(), load_supernet(part).supernet.state_dict()
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], rtol=0, atol=1e-20) for k in a)
    # with a real learning rate the part moves away, and only from the one-shot start
    moved = load_supernet(_train_part(one_shot, prepared_corpus, tmp_path / "sa2", "SA")).supernet.state_dict()
    assert any(not torch.allclose(a[k], moved[k], rtol=0, atol=1e-6) for k in a)


def test_warm_start_from_another_shape_is_refused(one_shot: Path, prepared_corpus: Path, tmp_path: Path):
    recipe = sub_supernet_recipe(one_shot, steps=2, slot=None, op=None)
    recipe["model"] = {**recipe["model"], "hidden": 48, "heads": 2}
    path = tmp_path / "wide.yaml"
    path.write_text(yaml.safe_dump(recipe), encoding="utf-8")
    with pytest.raises(LvsearchError, match="init_from") as err:
        train_supernet(str(path), prepared_corpus, tmp_path / "wide", show_progress=False)
    # the message names only what differs, not both whole settings dictionaries
    assert "model.hidden" in str(err.value) and "48" in str(err.value) and "model.ff_inner" not in str(err.value)
    with pytest.raises(LvsearchError, match="fix_op"):
        bad = sub_supernet_recipe(one_shot, steps=2, slot=1, op="XX")
        (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad), encoding="utf-8")
        train_supernet(str(tmp_path / "bad.yaml"), prepared_corpus, tmp_path / "bad", show_progress=False)


def test_each_candidate_is_scored_by_the_sub_supernet_of_its_op_at_the_split_slot(one_shot: Path, parts: list[Path],
                                                                                     prepared_corpus: Path):
    runs = parts
    split = FewShotSupernets.load(runs)
    assert split.slot == 1 and set(split.parts) == {"SA", "FF", "DC"}
    loaded = load_supernet(one_shot)
    dev = fixed_dev_set(PreparedData.open(prepared_corpus), num_sequences=12, seq_len=32, seed=loaded.config.eval.seed)
    rng, archs = random.Random(0), {}
    while len(archs) < 9:
        a = loaded.space.sample(rng)
        archs.setdefault(a.key, a)
    archs = list(archs.values())
    got = split.evaluator(dev, seq_len=32).evaluate_many(archs)
    assert [r.key for r in got] == [a.key for a in archs]
    for a, r in zip(archs, got):
        op = split.choose(a)
        assert op == a.ops[0]
        want = SupernetEvaluator(split.parts[op].supernet, dev, seq_len=32, fitness="loss").evaluate_many([a])[0]
        assert r.loss == want.loss and r.accuracy == want.accuracy
    # the parts differ, so the choice matters
    other = SupernetEvaluator(split.parts["FF" if archs[0].ops[0] != "FF" else "SA"].supernet, dev, seq_len=32,
                              fitness="loss").evaluate_many([archs[0]])[0]
    assert other.loss != got[0].loss
    with pytest.raises(LvsearchError, match="no sub-supernet"):
        FewShotSupernets.load(runs[:2])
    with pytest.raises(LvsearchError, match="not a few-shot"):
        FewShotSupernets.load([one_shot, *runs])


# ----------------------------------------------------------------------------------------
# lvsearch evolve --few-shot
# ----------------------------------------------------------------------------------------

SEARCH = ["--population", "6", "--iterations", "2", "--topk", "2", "--dev-sequences", "12", "--racing", "6"]


def _rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "history.jsonl").read_text().splitlines()]


def test_evolve_few_shot_scores_every_candidate_with_its_part(one_shot: Path, parts: list[Path], tmp_path: Path,
                                                              capsys):
    out = tmp_path / "fs"
    code, text = run_cli(capsys, "evolve", "--supernet", str(one_shot), "--few-shot", *map(str, parts), "--out", str(out),
                         *SEARCH, "--compare-random", "--max-params", "1e9")
    assert code == 0, text
    loaded = load_supernet(one_shot)
    dev, _ = load_dev(loaded, None, 12)
    split = FewShotSupernets.load(parts)
    # the part's own evaluator with the same dev set, fitness and racing
    alone = {op: SupernetEvaluator(ld.supernet, dev, seq_len=32, fitness="loss", racing=Racing((6,), 4.0))
             for op, ld in split.parts.items()}
    base = SupernetEvaluator(loaded.supernet, dev, seq_len=32, fitness="loss", racing=Racing((6,), 4.0))
    ea, rs = _rows(out), _rows(out / "random")
    assert len(ea) == len(rs) == 12
    differs = 0
    for row in ea + rs:
        a = Arch.from_key(row["key"])
        if row["partial"]:  # stopped at the rung: scored on the first 6 racing sequences only
            assert row["targets"] < max(r["targets"] for r in ea + rs if not r["partial"])
            continue
        want = alone[a.ops[0]].evaluate(a)
        assert row["fitness"] == want.fitness and row["loss"] == want.loss and row["accuracy"] == want.accuracy
        assert row["params"] == loaded.supernet.num_params(a)
        differs += base.evaluate(a).loss != row["loss"]
    assert differs > 0  # the parts are not the one-shot supernet: the flag changed the scores
    assert sum(not r["partial"] for r in ea) >= 2 and any(r["partial"] for r in ea)  # racing ran
    recorded = split.record()
    assert recorded["slot"] == 1 and set(recorded["parts"]) == {"SA", "FF", "DC"}
    assert {p["run"] for p in recorded["parts"].values()} == {str(p.resolve()) for p in parts}
    for folder in (out, out / "random"):
        assert json.loads((folder / "state.json").read_text())["extra"]["few_shot"] == recorded
        assert json.loads((folder / "best.json").read_text())["meta"]["few_shot"] == recorded
    best = json.loads((out / "best.json").read_text())["meta"]
    assert best["fitness"] == max(r["fitness"] for r in ea if not r["partial"])

    # two gloo processes (candidates sharded by prefix subtree across parts) give the same history
    ddp = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29831",
           "-m", "lvsearch", "evolve", "--supernet", str(one_shot), "--few-shot", *map(str, parts), "--out", str(ddp),
           *SEARCH, "--max-params", "1e9"]
    env = {**os.environ, "LVSEARCH_QUIET": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=REPO, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _rows(ddp) == ea

    # resume: the same parts continue; other parts, or none, are refused and nothing is written
    code, text = run_cli(capsys, "evolve", "--supernet", str(one_shot), "--few-shot", *map(str, parts), "--out", str(out),
                         "--resume", "--iterations", "3", "--dev-sequences", "12", "--max-params", "1e9")
    assert code == 0, text
    assert len(_rows(out)) == 18
    before = (out / "state.json").read_bytes()
    moved = tmp_path / "ff-copy"
    shutil.copytree(parts[1], moved)
    for argv, match in (([str(parts[0]), str(moved), str(parts[2])], "other few-shot parts"),
                        ([], "without --few-shot")):
        code, text = run_cli(capsys, "evolve", "--supernet", str(one_shot), *(["--few-shot", *argv] if argv else []),
                             "--out", str(out), "--resume", "--iterations", "4", "--dev-sequences", "12", "--max-params", "1e9")
        assert code == 2 and match in text and str(parts[1].resolve()) in text and "Traceback" not in text, text
    assert (out / "state.json").read_bytes() == before
    plain = tmp_path / "plain"
    assert main(["evolve", "--supernet", str(one_shot), "--out", str(plain), *SEARCH]) == 0
    capsys.readouterr()
    assert "few_shot" not in json.loads((plain / "state.json").read_text())["extra"]
    code, text = run_cli(capsys, "evolve", "--supernet", str(one_shot), "--few-shot", *map(str, parts), "--out",
                         str(plain), "--resume", "--iterations", "3", "--dev-sequences", "12")
    assert code == 2 and "scored with the one-shot supernet" in text, text


def test_evolve_few_shot_bad_parts_are_refused(one_shot: Path, parts: list[Path], tmp_path: Path, capsys):
    def bad(runs: list, match: str, *more: str) -> None:
        out = tmp_path / f"o{len(list(tmp_path.iterdir()))}"
        code, text = run_cli(capsys, "evolve", "--supernet", str(one_shot), "--few-shot", *map(str, runs),
                             "--out", str(out), *SEARCH, *more)
        assert code == 2 and match in text and "Traceback" not in text, text
        assert not out.exists()  # refused before anything is written

    bad([one_shot, *parts], f"{one_shot} is not a few-shot sub-supernet")
    bad(parts[:2], "no sub-supernet for op DC at slot 1")
    bad([*parts, parts[0]], "both the sub-supernet of SA")
    bad([tmp_path / "nowhere", *parts[1:]], "nowhere")
    edits = {"space": lambda c: c["space"].update(name="lvbert-other"),
             "tok": lambda c: c["data"].update(tokenizer_sha256="0" * 64),
             "dims": lambda c: c["dims"].update(dropout=0.3)}
    for name, edit in edits.items():
        other = tmp_path / f"part-{name}"
        shutil.copytree(parts[2], other)
        cfg = json.loads((other / "config.json").read_text())
        edit(cfg)
        (other / "config.json").write_text(json.dumps(cfg))
        match = {"space": "trained on space lvbert-other", "tok": "another tokenizer than supernet",
                 "dims": "other model dims than supernet"}[name]
        bad([*parts[:2], other], f"few-shot part {other} ")
        bad([*parts[:2], other], match)
    bad(parts, "does not combine with --few-shot", "--second-stage", "rescore")


def test_few_shot_from_switches(one_shot: Path, prepared_corpus: Path, tmp_path: Path, capsys):
    def bad(*argv: str, match: str) -> None:
        code, text = run_cli(capsys, "train-supernet", "--data", str(prepared_corpus), "--out", str(tmp_path / "p"),
                             *argv)
        assert code == 2 and match in text and "Traceback" not in text, text
        assert not (tmp_path / "p").exists()

    bad("--config", "quickstart", "--op", "SA", match="--few-shot-from is not given")
    bad("--few-shot-from", str(one_shot), "--op", "SA", match="needs --op")
    bad("--few-shot-from", str(one_shot), "--op", "SA", "--steps", "3", "--config", "quickstart", match="drop --config")
    bad("--few-shot-from", str(one_shot), "--op", "XX", "--steps", "3", match="fix_op")
    bad("--few-shot-from", str(tmp_path), "--op", "SA", "--steps", "3", match="pass the train-supernet run folder")


def test_more_dev_sequences_than_the_split_has_are_said(one_shot: Path, capsys):
    """load_dev (evolve's dev set) with more sequences than the dev split holds: all are used,
    and a warning names the count (it capped silently)."""
    dev, data = load_dev(load_supernet(one_shot), None, 10**6)
    err = " ".join(capsys.readouterr().err.split())
    n = dev.input_ids.shape[0]
    assert n < 10**6 and f"--dev-sequences 1000000: the dev split of {data.folder} has {n} sequences" in err
