"""Regressions: no non-finite checkpoint, finished runs stay finished, the parameter
count equals what is saved, bad --max-params, one-seed spreads, file permissions."""

from __future__ import annotations

import errno
import math
import os
import random
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from lvsearch.cli import main
from lvsearch.errors import LvsearchError
from lvsearch.io import umask
from lvsearch.model import Encoder, ModelDims, Supernet
from lvsearch.space import SearchSpace
from lvsearch.train.retrain import retrain
from lvsearch.train.supernet import train_supernet

SUPERNET_TINY = [
    "num_slots=4", "model.hidden=32", "model.embedding=16", "model.ff_inner=64", "model.heads=2",
    "train.seq_len=32", "train.batch_size=8", "train.log_every=5", "eval.dev_sequences=32", "eval.batch_size=32",
]
RETRAIN_TINY = [
    "num_slots=4", "model.hidden=32", "model.embedding=16", "model.ff_inner=64", "model.heads=2",
    "train.seq_len=32", "train.batch_size=8", "train.log_every=5", "eval.dev_sequences=32", "eval.batch_size=32",
    "objective=mlm",
]


def printed(capsys) -> str:
    """What the console printed (stdout + stderr), line wrapping undone."""
    out, err = capsys.readouterr()
    return " ".join((out + err).split())


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``folder``: bytes and modification time (ns)."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------ 1. divergence
@pytest.mark.parametrize("every", [5, 1])  # the issue's repro (diverges at step 3), and checkpoints before it
def test_diverging_run_never_writes_a_nonfinite_checkpoint(prepared_corpus: Path, tmp_path: Path, every: int):
    run = tmp_path / "run"
    sets = SUPERNET_TINY + ["train.steps=60", "train.lr=1e9", "train.warmup_steps=0", f"train.checkpoint_every={every}",
                            "train.log_every=10", "train.eval_every=0"]
    with pytest.raises(LvsearchError, match="training diverged at step") as err:
        train_supernet("quickstart", prepared_corpus, run, overrides=sets, show_progress=False)
    msg = str(err.value)
    folders = sorted((run / "checkpoints").glob("step-*"))
    for folder in folders:
        for name in ("model.safetensors", "optimizer.safetensors"):
            tensors = load_file(str(folder / name))
            assert all(torch.isfinite(t).all() for t in tensors.values()), f"{folder / name} holds non-finite values"
    if every == 1:
        assert folders
    if folders:
        assert str(folders[-1]) in msg and "last good checkpoint" in msg
    else:
        assert "no checkpoint was written" in msg
    assert "lower train.lr" in msg


# ------------------------------------------------------------------ 2. finished runs
def test_damaged_run_summaries_are_one_message_and_incomplete_ones_are_run_again(tmp_path: Path):
    """A summary.json without its final evaluation is incomplete (the run is resumed: None); one
    whose fields have the wrong type is one LvsearchError naming the file and the field (it was
    returned, and its reader raised TypeError/AttributeError). The same for a rank check's
    standalone summary, which was returned with ``final_eval`` a string."""
    from lvsearch.search.rank_check import finished_standalone
    from lvsearch.train.run import finished_summary

    path = tmp_path / "summary.json"
    for incomplete in ({"steps": 12}, {"steps": 12, "final_eval": {}}, {"steps": 8, "final_eval": {"loss": 1.0}}, [],
                       "{not json"):
        path.write_text(incomplete if isinstance(incomplete, str) else json.dumps(incomplete))
        assert finished_summary(tmp_path, 12) is None
    for bad, field in (({"steps": "12", "final_eval": {}}, "field steps"),
                       ({"steps": 12, "final_eval": {"panel": {"bert": {"accuracy": "0.5"}}}},
                        "field final_eval.panel.bert.accuracy"),
                       ({"steps": 12, "final_eval": {"loss": 1.0}, "floors": {"unigram": {}}}, "field floors")):
        path.write_text(json.dumps(bad))
        with pytest.raises(LvsearchError, match=f"run summary {path} is malformed: {field}") as e:
            finished_summary(tmp_path, 12)
        assert "delete it and resume" in e.value.fix
    path.write_text(json.dumps({"arch": "k", "steps": 4, "supernet_step": 8, "final_eval": "x"}))
    with pytest.raises(LvsearchError, match=f"standalone summary {path} is malformed: field final_eval") as e:
        finished_standalone(tmp_path, "k", 4, 8)
    assert "rank-check" in e.value.fix
    path.write_text(json.dumps({"arch": "k", "steps": 4, "supernet_step": 8, "final_eval": {"loss": 2.0, "accuracy": 0.5}}))
    assert finished_standalone(tmp_path, "k", 4, 8)["final_eval"]["loss"] == 2.0
    assert finished_standalone(tmp_path, "other", 4, 8) is None


def test_resume_of_finished_supernet_changes_nothing_and_kill_before_summary_recovers(
        prepared_corpus: Path, tmp_path: Path, capsys):
    run = tmp_path / "sn"
    sets = SUPERNET_TINY + ["train.steps=4", "train.checkpoint_every=2", "train.eval_every=0"]
    first = train_supernet("quickstart", prepared_corpus, run, overrides=sets, show_progress=False)
    assert first["final_eval"]
    before = snapshot(run)
    capsys.readouterr()
    again = train_supernet(None, prepared_corpus, run, resume=True, show_progress=False)
    assert "already finished" in printed(capsys)
    assert snapshot(run) == before
    assert again["final_eval"] == first["final_eval"]

    # killed between the final checkpoint and the summary write
    (run / "summary.json").unlink()
    recovered = train_supernet(None, prepared_corpus, run, resume=True, show_progress=False)
    assert recovered["final_eval"] == first["final_eval"] and recovered["steps"] == 4
    from lvsearch.io import read_json

    assert read_json(run / "summary.json")["final_eval"] == first["final_eval"]


def test_resume_of_finished_retrain_changes_nothing_and_kill_before_summary_recovers(
        prepared_corpus: Path, tmp_path: Path, capsys):
    from lvsearch.io import read_json

    run = tmp_path / "rt"
    sets = RETRAIN_TINY + ["train.steps=6", "train.checkpoint_every=2", "train.eval_every=0"]
    stopped = retrain("bert", "retrain-quickstart", prepared_corpus, run, overrides=sets, show_progress=False, stop_at=4)
    assert stopped["final_eval"] and stopped["steps"] == 4
    before = snapshot(run)
    capsys.readouterr()
    # resumed at its stop: finished there (what finalist pruning does)
    again = retrain(None, None, prepared_corpus, run, resume=True, show_progress=False, stop_at=4)
    assert "already finished" in printed(capsys)
    assert snapshot(run) == before and again["final_eval"] == stopped["final_eval"]

    full = retrain(None, None, prepared_corpus, run, resume=True, show_progress=False)
    assert full["steps"] == 6 and full["final_eval"]
    before = snapshot(run)
    retrain(None, None, prepared_corpus, run, resume=True, show_progress=False)
    assert "already finished" in printed(capsys)
    assert snapshot(run) == before

    # killed between the final checkpoint and the summary write: the old (stop_at) summary is left
    (run / "summary.json").write_bytes(before["summary.json"][0].replace(b'"steps": 6', b'"steps": 4'))
    recovered = retrain(None, None, prepared_corpus, run, resume=True, show_progress=False)
    assert recovered["steps"] == 6 and recovered["final_eval"] == full["final_eval"]
    assert read_json(run / "summary.json")["final_eval"] == full["final_eval"]
    assert read_json(run / "model" / "config.json")["extra"]["steps"] == 6


# ------------------------------------------------------------------ 3. parameter count
def test_elc_num_params_equals_saved_size(tmp_path: Path):
    from lvsearch.modeldir import save_model_dir

    space = SearchSpace.load("lvbert-elc").with_num_slots(6)
    d = ModelDims(vocab_size=50, hidden=16, embedding=8, ff_inner=32, heads=2, conv_kernel=5, max_len=32)
    sn = Supernet(space, d)
    tok = tmp_path / "tokenizer.json"
    tok.write_text("{}")
    checked = 0
    for seed in range(6):
        arch = space.sample(random.Random(seed), dense_prob=0.5)
        enc = sn.extract(arch)
        folder = save_model_dir(tmp_path / f"m{seed}", enc, arch=arch, dims=d, tokenizer_path=tok,
                                objective="mlm", training_args={})
        saved = sum(t.numel() for t in load_file(str(folder / "model.safetensors")).values())
        assert enc.num_params() == saved == sn.num_params(arch)
        checked += enc.mixing is not None
    assert checked  # some sampled arch mixes several inputs (holds the α matrix)


# ------------------------------------------------------------------ 4. smaller ones
@pytest.mark.parametrize("flag,value", [("--max-params", "-1"), ("--max-params", "0"), ("--max-flops", "-5")])
def test_nonpositive_resource_bounds_are_refused(tmp_path: Path, capsys, flag: str, value: str):
    try:
        code = main(["evolve", "--supernet", str(tmp_path / "sn"), "--out", str(tmp_path / "s"), flag, value])
    except SystemExit as e:  # a negative count is refused at parse time (lvsearch.argtypes.count)
        code = e.code
    out = "".join(capsys.readouterr())
    want = f"{flag} must be a positive number" if value == "0" else f"argument {flag}: '{value}' is outside [0, 2^63)"
    assert code == 2 and want in out and "Traceback" not in out
    assert not (tmp_path / "s").exists()


def test_one_seed_reports_no_spread():
    from lvsearch.eval.finetune_metrics import seed_summary
    from lvsearch.eval.report import summary_rows

    one = seed_summary([0.75])
    assert one["std"] is None and one["n"] == 1
    assert math.isclose(seed_summary([0.5, 0.7])["std"], 0.2 / math.sqrt(2))
    report = {"finetune": {"rte": {"aggregate": {"dev": {"accuracy": one}}, "per_seed": [{}], "failed_seeds": []}}}
    text = " ".join(v for _, v in summary_rows(report))
    assert "± 0.0000" not in text and "0.7500 ± unmeasured (1 seed)" in text


def test_bounded_reader_caps_size_depth_aliases_and_memory(tmp_path: Path, monkeypatch):
    """Issue 56: the one bounded reader refuses an oversized file, a device, a named pipe, a
    deep nesting, an alias bomb and a duplicate key in microseconds, before any value is built;
    models and latency timings are refused before allocation when they exceed memory."""
    import time

    from lvsearch import device as device_mod
    from lvsearch.io import parse_yaml, read_bytes, read_json
    from lvsearch.latency.table import check_bench_memory

    big = tmp_path / "big.json"
    big.write_bytes(b" " * 2048)
    with pytest.raises(LvsearchError, match="is larger than 1,024 bytes"):
        read_bytes(big, what="latency table", max_bytes=1024)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(LvsearchError, match="is a named pipe, not a regular file"):
        read_json(fifo, what="latency table")
    t0 = time.perf_counter()
    with pytest.raises(LvsearchError, match="expands to 8,335,593,968 values"):
        parse_yaml(_LAUGHS + "x: *l9\n", "s.yaml")
    assert time.perf_counter() - t0 < 1.0
    for text, match in (("a: &a [*a]", "contains itself"), ("[" * 70 + "]" * 70, "nests deeper than 64"),
                        ("a: 1\na: 2", "gives the key 'a' twice")):
        with pytest.raises(LvsearchError, match=match):
            parse_yaml(text, "s.yaml")
    assert parse_yaml("b: &b {x: 1}\nd: {<<: *b, y: 2}", "s.yaml")["d"] == {"x": 1, "y": 2}  # merge keys are fine
    monkeypatch.setattr(device_mod, "physical_memory_bytes", lambda: 1 << 20)  # a 1 MB machine
    space = SearchSpace.load("lvbert").with_num_slots(4)
    dims = ModelDims(vocab_size=50, hidden=16, embedding=8, ff_inner=32, heads=2, conv_kernel=5, max_len=32)
    with pytest.raises(LvsearchError, match="a model of 4 slots at hidden 256 .* more than this machine's 0 GB"):
        Supernet(space, ModelDims(vocab_size=5000))
    with pytest.raises(LvsearchError, match="(?s)--batch 4096 × --seq-len 32: timing .* fix: use --batch"):
        check_bench_memory(space, dims, 4096, 32, 4, torch.device("cpu"))
    assert Supernet(space, dims).num_params(space.sample(random.Random(0))) > 0  # a small model still fits


def test_weight_files_have_the_usual_permissions(tmp_path: Path):
    from lvsearch.modeldir import save_model_dir
    from lvsearch.train.checkpoint import save_checkpoint
    from lvsearch.arch import Arch

    want = 0o666 & ~umask()
    d = ModelDims(vocab_size=50, hidden=16, embedding=8, ff_inner=32, heads=2, conv_kernel=5, max_len=32)
    enc = Encoder(Arch.sequential("sf"), d)
    opt = torch.optim.AdamW(enc.parameters())
    enc(torch.ones(1, 4, dtype=torch.long)).sum().backward()
    opt.step()
    ckpt = save_checkpoint(tmp_path / "run", 1, enc, opt, {})
    tok = tmp_path / "tokenizer.json"
    tok.write_text("{}")
    model = save_model_dir(tmp_path / "model", enc, arch=enc.arch, dims=d, tokenizer_path=tok, objective="mlm",
                           training_args={})
    files = [p for p in [*ckpt.iterdir(), *model.iterdir()] if p.is_file()]
    assert {p.name for p in files} >= {"model.safetensors", "optimizer.safetensors", "state.json", "config.json"}
    modes = {p.name: oct(os.stat(p).st_mode & 0o777) for p in files}
    assert set(modes.values()) == {oct(want)}, modes
    assert re.fullmatch(r"step-0000001", ckpt.name)


# ====================================================================== the reliability suite
# Every CLI verb in a subprocess against bad inputs and faults: exit code 2, no traceback, a
# message naming the file, and byte-identical files in every folder that existed before.

import dataclasses  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SN_SETS = [*SUPERNET_TINY, "space=lvbert-elc", "train.steps=12", "train.checkpoint_every=4", "train.warmup_steps=2", "train.eval_every=0",
           "eval.panel=[bert]"]
RT_SETS = [*RETRAIN_TINY, "train.steps=12", "train.checkpoint_every=4", "train.warmup_steps=2", "train.eval_every=4"]
SEARCH_ARGS = ["--population", "4", "--iterations", "3", "--topk", "2", "--crossover", "2", "--mutation", "2",
               "--dev-sequences", "16"]


def _sets(values: list[str]) -> list[str]:
    return [x for v in values for x in ("--set", v)]


def cli(*argv: str, kill_at: str | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -m lvsearch ARGV`` in a fresh process on one thread, progress hidden."""
    env = {**os.environ, "LVSEARCH_QUIET": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    env.pop("LVSEARCH_KILL_AT", None)
    env.pop("LVSEARCH_DEBUG", None)
    if kill_at:
        env["LVSEARCH_KILL_AT"] = kill_at
    return subprocess.run([sys.executable, "-m", "lvsearch", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO)


def tree_digest(folder: Path) -> dict[str, str]:
    """``relative path -> sha256`` of every file (and ``<dir>`` for folders) under ``folder``."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        out[rel] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "<dir>"
    return out


@pytest.fixture(scope="module")
def ws(prepared_corpus: Path, small_corpus: Path, shared_data: Path, tmp_path_factory) -> dict[str, Path]:
    """A workspace as a user has it after the quickstart's steps by hand: a prepared corpus, a
    tiny supernet run, a search over it, a retrained model, a regular file, damaged copies
    of some of them, and Hugging Face folders (an export, foreign and hostile ones; each
    bad-input case names the one it needs)."""
    w = tmp_path_factory.mktemp("ws")
    paths = {"W": w, "CORPUS": prepared_corpus, "OTHER_CORPUS": small_corpus, "FILE": w / "afile.txt"}
    paths["FILE"].write_text("not a folder\n")
    sn, search, rt = w / "sn", w / "search", w / "rt"
    assert main(["train-supernet", "--config", "quickstart", "--data", str(prepared_corpus), "--out", str(sn),
                 *_sets(SN_SETS)]) == 0
    assert main(["evolve", "--supernet", str(sn), "--out", str(search), *SEARCH_ARGS]) == 0
    assert main(["retrain", "--arch", str(search / "best.json"), "--config", "retrain-quickstart", "--data",
                 str(prepared_corpus), "--out", str(rt), *_sets(RT_SETS)]) == 0
    paths.update(SN=sn, SEARCH=search, RT=rt, MODEL=rt / "model")
    paths.update(_broken_json_copies(w, prepared_corpus, sn, search))

    # damaged copies
    def copy(src: Path, name: str) -> Path:
        dst = w / name
        shutil.copytree(src, dst, symlinks=True)
        return dst

    bad_state = copy(sn, "sn-bad-state")  # state.json says another step than its folder
    ck = bad_state / "checkpoints" / "step-0000012" / "state.json"
    st = json.loads(ck.read_text())
    st["step"] = 4
    ck.write_text(json.dumps(st))
    bad_pointer = copy(sn, "sn-bad-pointer")  # latest.json step disagrees with the folder it names
    (bad_pointer / "checkpoints" / "latest.json").write_text(json.dumps({"step": 8, "dir": "step-0000012"}))
    edited_state = copy(rt, "rt-edited-state")  # state.json edited, step kept (sha256 recorded in latest.json)
    ck = edited_state / "checkpoints" / "step-0000012" / "state.json"
    st = json.loads(ck.read_text())
    st["extra"]["tokens"] = 1
    ck.write_text(json.dumps(st, indent=2, sort_keys=True) + "\n")
    pointer_type = copy(sn, "sn-pointer-type")  # latest.json's step written as a string
    (pointer_type / "checkpoints" / "latest.json").write_text(json.dumps({"step": "12", "dir": "step-0000012"}))
    paths.update(SN_BAD_STATE=bad_state, SN_BAD_POINTER=bad_pointer, RT_EDITED_STATE=edited_state,
                 SN_POINTER_TYPE=pointer_type)
    # a run and a corpus that also hold the user's own files (a fresh user's pass: --overwrite deleted them)
    sn_notes, corpus_notes = w / "sn-with-notes", w / "corpus-with-notes"
    shutil.copytree(paths["SN"], sn_notes)
    (sn_notes / "NOTES.md").write_text("my notes\n")
    (sn_notes / "evo").mkdir()
    (sn_notes / "evo" / "best.json").write_text("{}\n")
    shutil.copytree(prepared_corpus, corpus_notes)
    (corpus_notes / "NOTES.md").write_text("my notes\n")
    paths.update(SN_NOTES=sn_notes, CORPUS_NOTES=corpus_notes)
    arch_list, arch_meta_nan = w / "arch-list.json", w / "arch-meta-nan.json"  # retrain raised AttributeError
    arch_list.write_text("[1, 2, 3]\n")
    best = json.loads((paths["SEARCH"] / "best.json").read_text())
    arch_meta_nan.write_text(json.dumps({**best, "meta": float("nan")}))
    paths.update(ARCH_LIST=arch_list, ARCH_META_NAN=arch_meta_nan)
    for name, edit in (("SN_NO_SPACE", lambda d: d.pop("space")), ("SN_DATA_STRING", lambda d: d.update(data="/x")),
                       ("SN_CONFIG_NULL", lambda d: d.update(config=None))):  # KeyError / TypeError / silently defaults
        bad = w / name.lower()
        shutil.copytree(paths["SN"], bad)
        rec = json.loads((bad / "config.json").read_text())
        edit(rec)
        (bad / "config.json").write_text(json.dumps(rec))
        paths[name] = bad

    corpus_mod = w / "corpus-modified"  # a shard with one byte changed (same size)
    shutil.copytree(prepared_corpus, corpus_mod)
    shard = corpus_mod / "train-00000.bin"
    raw = bytearray(shard.read_bytes())
    raw[1001] ^= 1
    shard.write_bytes(bytes(raw))
    tok_mod = w / "corpus-tokenizer-modified"  # tokenizer.json edited
    shutil.copytree(prepared_corpus, tok_mod)
    (tok_mod / "tokenizer.json").write_text((tok_mod / "tokenizer.json").read_text().replace('"[UNK]"', '"[UNKNOWN]"', 1))
    man_mod = w / "corpus-manifest-modified"  # manifest vocab_size edited (the tokenizer is intact)
    shutil.copytree(prepared_corpus, man_mod)
    man = json.loads((man_mod / "manifest.json").read_text())
    man["tokenizer"]["vocab_size"] = 300
    (man_mod / "manifest.json").write_text(json.dumps(man))
    search_mod = copy(search, "search-curve-cut")  # a search state.json whose curve was cut
    st = json.loads((search_mod / "state.json").read_text())
    st["curve"] = st["curve"][:1]
    (search_mod / "state.json").write_text(json.dumps(st))
    man_type = w / "corpus-manifest-type"  # a shard's token count written as a string
    shutil.copytree(prepared_corpus, man_type)
    man = json.loads((man_type / "manifest.json").read_text())
    man["splits"]["train"]["shards"][0]["tokens"] = str(man["splits"]["train"]["shards"][0]["tokens"])
    (man_type / "manifest.json").write_text(json.dumps(man))
    man_field = w / "corpus-manifest-no-dtype"  # a field the reader needs removed
    shutil.copytree(prepared_corpus, man_field)
    man = json.loads((man_field / "manifest.json").read_text())
    del man["dtype"]
    (man_field / "manifest.json").write_text(json.dumps(man))
    paths.update(CORPUS_MOD=corpus_mod, CORPUS_TOK_MOD=tok_mod, CORPUS_MANIFEST_MOD=man_mod, SEARCH_CURVE_CUT=search_mod,
                 CORPUS_MANIFEST_TYPE=man_type, CORPUS_MANIFEST_NO_DTYPE=man_field)

    # a supernet retrained into the same folder after a search started on it
    sn2, search2 = w / "sn-retrained", w / "search-on-old-supernet"
    assert main(["train-supernet", "--config", "quickstart", "--data", str(prepared_corpus), "--out", str(sn2),
                 *_sets(SN_SETS)]) == 0
    assert main(["evolve", "--supernet", str(sn2), "--out", str(search2), *SEARCH_ARGS[:2], "--iterations", "1",
                 *SEARCH_ARGS[4:]]) == 0
    assert main(["train-supernet", "--config", "quickstart", "--data", str(prepared_corpus), "--out", str(sn2),
                 "--overwrite", *_sets([*SN_SETS, "train.seed=7"])]) == 0
    paths.update(SN2=sn2, SEARCH2=search2)

    (w / "broken.json").write_text("{not json")
    (w / "arch-seq-bad.json").write_text(json.dumps({"format": "lvsearch.arch/v1", "ops": ["SA", "FF", "SA", "FF"],
                                                     "inputs": [[0], [0], [1, 2], [3]]}))
    (w / "report-broken.json").write_text("{}")
    # bad variants: in a search space YAML and in an architecture file
    for name, ops_text in (("space-variant-dim", "{SA: {kernel: [3]}, FF: {}}"),
                           ("space-variant-value", "{SA: {heads: [2]}, FF: {inner: [0.5, -1]}}"),
                           ("space-variant-even", "{DC: {kernel: [3, 4]}, FF: {}}")):
        (w / f"{name}.yaml").write_text(f"name: {name}\nnum_slots: 4\nops: {ops_text}\nconnectivity: elc\n")
        paths[name.upper().replace("-", "_")] = w / f"{name}.yaml"
    for name, variants in (("arch-variant-dim", [{"kernel": 3}, {}, {}, {}]),
                           ("arch-variant-value", [{"heads": 3}, {}, {}, {}]),
                           ("arch-variant-even", [{}, {}, {"kernel": 4}, {}])):
        (w / f"{name}.json").write_text(json.dumps({"format": "lvsearch.arch/v2", "ops": "sfcf", "variants": variants,
                                                    "inputs": [[0], [1], [2], [3]]}))
        paths[name.upper().replace("-", "_")] = w / f"{name}.json"
    (w / "bomb.json").write_text("[" * 100_000 + "]" * 100_000)  # a recursion bomb
    paths["BOMB"] = w / "bomb.json"
    paths.update(BROKEN_JSON=w / "broken.json", ARCH_SEQ_BAD=w / "arch-seq-bad.json",
                 REPORT_BROKEN=w / "report-broken.json")
    empty = w / "empty"
    empty.mkdir()
    paths["EMPTY"] = empty
    thesis = w / "thesis"  # a user's folder that no lvsearch verb wrote
    thesis.mkdir()
    (thesis / "chapter1.tex").write_text("\\chapter{Introduction}\n")
    rc_out = w / "rc-out"  # a rank check's folder whose file is reused (its standalone runs inside)
    (rc_out / "standalone" / "00").mkdir(parents=True)
    (rc_out / "rank_check.json").write_text("{}")
    (rc_out / "standalone" / "00" / "summary.json").write_text("{}")
    paths.update(THESIS=thesis, RC_OUT=rc_out)
    bin_src = w / "binary-src"
    bin_src.mkdir()
    (bin_src / "a.train").write_bytes(b"\x00\x01\x02\xff" * 500)
    paths["BIN_SRC"] = bin_src
    task = w / "task-tiny"  # 16 RTE rows per split
    task.mkdir()
    for split in ("train", "dev"):
        rows = (shared_data / "tasks" / "rte" / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[:17]
        (task / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    paths["TASK"] = task
    paths.update(_reuse_files(w, sn, search))
    paths.update(_encoding_tasks(w, task))
    paths.update(_bad_label_tasks(w, task))
    paths.update(_bad_reports(w, rt / "model"))
    paths.update(_bad_landscapes(w))
    paths.update(_hf_workspace(w, prepared_corpus))
    paths.update(_hostile_inputs(w, sn))
    return paths


#: A YAML "billion laughs": 10 levels of 9 aliases (1.4 KB, 10^9 values when expanded).
_LAUGHS = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9) if i else ', '.join(['lol'] * 9)}]\n"
                  for i in range(10))


def _hostile_inputs(w: Path, sn: Path) -> dict[str, Path]:
    """Issue 56: hostile and careless latency tables, search-space YAMLs and architecture
    files. A table measured from the supernet (a tiny timing), edited copies of it (a
    tampered slot count, a calibration or entry no measurement writes, a free-text dtype,
    a table of another space), a search over a copy that is then edited in place; space
    files with alias bombs and sizes without bound; an architecture key with a dimension
    given twice."""
    from lvsearch.latency.table import choice_keys
    from lvsearch.space import SearchSpace

    out: dict[str, Path] = {}
    lt = w / "latency.json"
    assert main(["latency", "measure", "--supernet", str(sn), "--out", str(lt), "--warmup", "1", "--repeats", "1",
                 "--calibrate", "0"]) == 0  # a fit on a busy machine may be refused (slope ≤ 0): added by hand below
    table = json.loads(lt.read_text())

    def edited(name: str, edit) -> Path:
        t = json.loads(json.dumps(table))
        edit(t)
        out[name] = w / f"{name.lower().replace('_', '-')}.json"
        out[name].write_text(json.dumps(t))
        return out[name]

    edited("LT_SLOTS_HUGE", lambda t: t["space"].update(num_slots=10**9))
    edited("LT_INTERCEPT", lambda t: t.update(calibration={"intercept_ms": -1e6, "slope": 1.0, "archs": 3, "seed": 1,
                                                           "raw_median_ape": 0.1, "median_ape": 0.05}))
    edited("LT_ENTRY_HUGE", lambda t: t["ops_ms"].update(SA=1e308))
    edited("LT_DTYPE", lambda t: t.update(dtype="float16"))
    edited("LT_ENTRY_UNKNOWN", lambda t: t["ops_ms"].update({"SA(h2)": 1.0}))
    other = SearchSpace.load("lvbert-elc").with_num_slots(6)  # the same ops and more mixing widths: it used to fit
    edited("LT_OTHER_SPACE", lambda t: t.update(space=other.to_dict(), ops_ms={k: 1.0 for k in choice_keys(other)},
                                                mixing_ms={str(k): 0.1 for k in range(2, 7)}))
    copy = w / "latency-copy.json"  # a search with it, then the table edited in place
    copy.write_text(lt.read_text())
    search = w / "search-latency"
    assert main(["evolve", "--supernet", str(sn), "--out", str(search), *SEARCH_ARGS[:2], "--iterations", "1",
                 *SEARCH_ARGS[4:], "--latency-table", str(copy)]) == 0
    copy.write_text(json.dumps({**table, "overhead_ms": table["overhead_ms"] * 1.01}))
    out.update(LT=lt, LT_EDITED_IN_PLACE=copy, SEARCH_LT=search)
    spaces = {  # name: the YAML text
        "space-bomb-name": f"{_LAUGHS}name: *l9\nnum_slots: 4\nops: [SA, FF]\n",
        "space-bomb-connectivity": f"{_LAUGHS}num_slots: 4\nops: [SA, FF]\nconnectivity: *l9\n",
        "space-bomb-slots": f"{_LAUGHS}num_slots: *l9\nops: [SA, FF]\n",
        "space-bomb-description": f"{_LAUGHS}description: *l9\nnum_slots: 4\nops: [SA, FF]\n",
        "space-recursive-alias": "num_slots: 4\nops: &o [SA, *o]\n",
        "space-ff-huge": "num_slots: 4\nops: {SA: {}, FF: {inner: [1000000]}}\n",
        "space-sa-huge": "num_slots: 4\nops: {SA: {heads: [100000]}, FF: {}}\n",
        "space-dc-huge": "num_slots: 4\nops: {DC: {kernel: [1000001]}, FF: {}}\n",
        "space-ff-inf": "num_slots: 4\nops: {SA: {}, FF: {inner: [.inf]}}\n",
        "space-slots-huge": "num_slots: 3000\nops: [SA, FF]\n",
        "space-name-list": "name: [a, b]\nnum_slots: 4\nops: [SA, FF]\n",
    }
    for name, text in spaces.items():
        out[name.upper().replace("-", "_")] = w / f"{name}.yaml"
        (w / f"{name}.yaml").write_text(text)
    out["RECIPE_BOMB"] = w / "recipe-bomb.yaml"
    out["RECIPE_BOMB"].write_text(f"{_LAUGHS}train: {{steps: *l9}}\n")
    out["ARCH_DIM_TWICE"] = w / "arch-dim-twice.json"
    out["ARCH_DIM_TWICE"].write_text(json.dumps({"format": "lvsearch.arch/v2", "ops": "s(h2,h4)fsf",
                                                 "inputs": [[0], [1], [2], [3]]}))
    out["ARCH_KEY_TWICE"] = w / "arch-key-twice.json"  # a JSON object with a key given twice
    out["ARCH_KEY_TWICE"].write_text('{"format": "lvsearch.arch/v1", "ops": "ssss", "ops": "ffff", '
                                     '"inputs": [[0], [1], [2], [3]]}')
    return out


def _broken_json_copies(w: Path, corpus: Path, sn: Path, search: Path) -> dict[str, Path]:
    """Copies of the supernet run, the search and the prepared corpus, each with one of its JSON
    files cut short (its config.json, state.json, manifest.json); a copy of the supernet run
    whose summary.json records its final evaluation as a string; copies of the search's pick
    whose meta names a supernet run with a damaged config.json, or names it with a number."""
    out = {}
    for name, src, file in (("SN_BROKEN_CONFIG", sn, "config.json"), ("SEARCH_BROKEN_STATE", search, "state.json"),
                            ("CORPUS_BROKEN_MANIFEST", corpus, "manifest.json")):
        out[name] = w / name.lower().replace("_", "-")
        shutil.copytree(src, out[name], symlinks=True)
        text = (out[name] / file).read_text()
        (out[name] / file).write_text(text[:len(text) // 2])
    out["SN_SUMMARY_TYPE"] = w / "sn-summary-type"  # resume raised TypeError printing the finished run
    shutil.copytree(sn, out["SN_SUMMARY_TYPE"], symlinks=True)
    summary = json.loads((sn / "summary.json").read_text())
    (out["SN_SUMMARY_TYPE"] / "summary.json").write_text(json.dumps({**summary, "final_eval": "done"}))
    sn_data_string = w / "sn-pick-data-string"  # a supernet run whose config.json has data as a string
    (sn_data_string / "checkpoints").mkdir(parents=True)
    config = json.loads((sn / "config.json").read_text())
    (sn_data_string / "config.json").write_text(json.dumps({**config, "data": "/x"}))
    best = json.loads((search / "best.json").read_text())
    for name, supernet in (("ARCH_SN_DATA_STRING", str(sn_data_string)), ("ARCH_SN_NUMBER", 5)):  # AttributeError,
        out[name] = w / f"{name.lower().replace('_', '-')}.json"                                  # TypeError
        out[name].write_text(json.dumps({**best, "meta": {**best["meta"], "supernet": supernet}}))
    out["SN_PICK_DATA_STRING"] = sn_data_string
    return out


def _reuse_files(w: Path, sn: Path, search: Path) -> dict[str, Path]:
    """``rank-check --reuse`` files over architectures of the search (in the supernet's space):
    one edited by hand with its digest removed (every accuracy set to 0.2: τ undefined), one
    with an absurd pool (digest intact)."""
    from lvsearch.search.rank_check import standalone_digest
    from lvsearch.space import SearchSpace

    space = SearchSpace.from_dict(json.loads((sn / "config.json").read_text())["space"])
    keys = list(dict.fromkeys(json.loads(ln)["key"] for ln in (search / "history.jsonl").read_text().splitlines()))
    rows = [{"key": k, "standalone_accuracy": 0.2, "standalone_loss": 6.0} for k in keys[:4]]
    assert len(rows) == 4
    out = {}
    for name, rec in (("RC_NO_DIGEST", {"archs": rows, "steps": 4, "pool": 8, "space": space.to_dict()}),
                      ("RC_HUGE_POOL", {"archs": rows, "steps": 4, "pool": 10**30, "space": space.to_dict(),
                                        "standalone_sha256": standalone_digest(rows)})):
        out[name] = w / f"{name.lower().replace('_', '-')}.json"
        out[name].write_text(json.dumps(rec))
    return out


def _encoding_tasks(w: Path, task: Path) -> dict[str, Path]:
    """Copies of the task folder as other programs save it: with a UTF-8 byte-order mark (what
    spreadsheet programs write), in UTF-16 and in Latin-1 (a line with an 'é'), and two with
    header names a terminal does not show: an empty name between two tabs, a zero-width space."""
    out = {}
    rows = {split: (task / f"{split}.tsv").read_text(encoding="utf-8") for split in ("train", "dev")}
    for name, encode in (("TASK_BOM", lambda t: t.encode("utf-8-sig")), ("TASK_UTF16", lambda t: t.encode("utf-16")),
                         ("TASK_LATIN1", lambda t: t.replace("oil", "café oil", 1).encode("latin-1", "replace"))):
        folder = w / name.lower().replace("_", "-")
        folder.mkdir()
        for split, text in rows.items():
            (folder / f"{split}.tsv").write_bytes(encode(text))
        out[name] = folder
    for name, header in (("TASK_TWO_TABS", "premise\t\thypothesis\tlabel"), ("TASK_ZERO_WIDTH", "premise\u200b\tlabel")):
        folder = w / name.lower().replace("_", "-")
        folder.mkdir()
        for split, text in rows.items():
            body = text.split("\n", 1)[1]
            if name == "TASK_ZERO_WIDTH":  # one text column: premise only
                body = "".join(f"{ln.split(chr(9))[0]}\t{ln.split(chr(9))[-1]}\n" for ln in body.splitlines())
            (folder / f"{split}.tsv").write_text(header + "\n" + body, encoding="utf-8")
        out[name] = folder
    return out


def _bad_label_tasks(w: Path, task: Path) -> dict[str, Path]:
    """Copies of the task folder with a field over the reader's limit (line 3 of train.tsv), a
    ``nan`` label (line 4 of train.tsv: how pandas writes a missing value), and a regression
    task (scores) whose dev split has an ``inf`` score on line 3."""
    from lvsearch.eval.tasks import MAX_FIELD_CHARS

    rows = {split: (task / f"{split}.tsv").read_text(encoding="utf-8").splitlines() for split in ("train", "dev")}

    def edited(lines: list[str], line: int, column: int, value: str) -> str:
        out = list(lines)
        fields = out[line - 1].split("\t")
        fields[column] = value
        out[line - 1] = "\t".join(fields)
        return "\n".join(out) + "\n"

    def scores(lines: list[str]) -> list[str]:
        return [lines[0]] + [ln.rsplit("\t", 1)[0] + f"\t{i % 5}.5" for i, ln in enumerate(lines[1:])]

    out = {}
    for name, train, dev in (
            ("TASK_LONG_FIELD", edited(rows["train"], 3, 0, "word " * (MAX_FIELD_CHARS // 5 + 1)), None),
            ("TASK_NAN_LABEL", edited(rows["train"], 4, -1, "nan"), None),
            ("TASK_INF_SCORE", "\n".join(scores(rows["train"])) + "\n", edited(scores(rows["dev"]), 3, -1, "inf"))):
        folder = w / name.lower().replace("_", "-")
        folder.mkdir()
        (folder / "train.tsv").write_text(train, encoding="utf-8")
        (folder / "dev.tsv").write_text(dev or "\n".join(rows["dev"]) + "\n", encoding="utf-8")
        out[name] = folder
    return out


def edited_report(model: Path, edit=None) -> dict:
    """A minimal evaluation report of ``model`` (what ``lvsearch report`` renders), after ``edit``."""
    config = json.loads((model / "config.json").read_text())
    report = {"format": "lvsearch.eval-report/v1",
              "model": {"name": "model", "folder": str(model), "num_params": 1000,
                        "config": {"objective": config["objective"], "arch": config["arch"]}},
              "mlm": {"status": "done", "accuracy": 0.5, "loss": 3.0},
              "blimp": {"status": "skipped", "reason": "--no-blimp"},
              "finetune": {"rte": {"status": "done", "aggregate": {"dev": {"accuracy": {
                  "mean": 0.5, "std": None, "median": 0.5, "n": 1}}}}}}
    if edit:
        edit(report)
    return report


#: Damaged evaluation reports: each edit of :func:`edited_report` and the field it breaks.
BAD_REPORTS = {
    "REPORT_NO_FOLDER": lambda r: r["model"].pop("folder"),
    "REPORT_FOLDER_NUMBER": lambda r: r["model"].update(folder=5),
    "REPORT_MLM_STRING": lambda r: r.update(mlm="garbage"),
    "REPORT_MLM_ACCURACY_TEXT": lambda r: r["mlm"].update(accuracy="high"),
    "REPORT_MLM_STATUS": lambda r: r["mlm"].update(status=5),
    "REPORT_BLIMP_DONE_EMPTY": lambda r: r.update(blimp={"status": "done"}),
    "REPORT_BLIMP_LIST": lambda r: r.update(blimp=[1, 2]),
    "REPORT_TASK_MEAN_TEXT": lambda r: r["finetune"]["rte"]["aggregate"]["dev"]["accuracy"].update(mean="x"),
    "REPORT_TASK_NO_METRICS": lambda r: r["finetune"]["rte"].update(aggregate={"dev": {}}),
    "REPORT_TASKS_LIST": lambda r: r.update(finetune=[1]),
}


def _bad_reports(w: Path, model: Path) -> dict[str, Path]:
    """The report of :func:`edited_report` (``REPORT_OK``) and its damaged copies (:data:`BAD_REPORTS`)."""
    out = {}
    for name, edit in [("REPORT_OK", None), *BAD_REPORTS.items()]:
        out[name] = w / f"{name.lower().replace('_', '-')}.json"
        out[name].write_text(json.dumps(edited_report(model, edit)))
    return out


def _bad_landscapes(w: Path) -> dict[str, Path]:
    """The shipped landscape file with an infinite median, a negative pretraining-seed σ, and an
    integer too large for a float as the best random draw (written as JSON text by hand)."""
    text = (REPO / "benchmarks" / "results" / "landscape.json").read_text()
    d = json.loads(text)
    out = {}
    for name, edit in (("LANDSCAPE_INF_MEDIAN", lambda s: s["distribution_random"].update(median=float("inf"))),
                       ("LANDSCAPE_NEG_SIGMA", lambda s: s["sigma_seed"].update(pooled_std=-0.006)),
                       ("LANDSCAPE_HUGE_INT", lambda s: s["distribution_random"].update(best=10**400))):
        e = json.loads(text)
        edit(e["summary"])
        out[name] = w / f"{name.lower().replace('_', '-')}.json"
        out[name].write_text(json.dumps(e))
    assert d["summary"]["sigma_seed"]["pooled_std"] > 0
    return out


def _hf_workspace(w: Path, corpus: Path) -> dict[str, Path]:
    """Hugging Face folders under ``w/hf`` (none without transformers: their cases skip). Code
    in the hostile ones writes a marker file into ``w`` when it runs, which the suite's
    "every file byte-identical" check would catch."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        return {}
    from _hf_folders import bert_folder, flip_byte, remote_code_folder

    from lvsearch.data.shards import PreparedData
    from lvsearch.export import export_model

    tok, vocab = corpus / "tokenizer.json", PreparedData.open(corpus).vocab_size
    hf = w / "hf"
    out = {"HF_EXPORT": export_model(w / "rt" / "model", hf / "export")["out"]}
    edited = hf / "export-edited"  # one byte of its modeling file changed
    shutil.copytree(out["HF_EXPORT"], edited)
    flip_byte(edited / "modeling_lvsearch.py")
    rehashed = hf / "export-edited-rehashed"  # the same edit, with the recorded sha256 edited to match
    shutil.copytree(out["HF_EXPORT"], rehashed)
    flip_byte(rehashed / "modeling_lvsearch.py")
    prov = json.loads((rehashed / "lvsearch_export.json").read_text())
    prov["code_sha256"]["modeling_lvsearch.py"] = hashlib.sha256((rehashed / "modeling_lvsearch.py").read_bytes()).hexdigest()
    (rehashed / "lvsearch_export.json").write_text(json.dumps(prov))
    bad_prov = hf / "export-bad-provenance"  # lvsearch_export.json: training_args a string
    shutil.copytree(out["HF_EXPORT"], bad_prov)
    prov = json.loads((bad_prov / "lvsearch_export.json").read_text())
    prov["training_args"] = "steps=12"
    (bad_prov / "lvsearch_export.json").write_text(json.dumps(prov))
    out["HF_EXPORT_BAD_PROV"] = bad_prov
    broken = bert_folder(hf / "broken-config", tok, vocab_size=vocab)
    (broken / "config.json").write_text("{not json")
    tok_config_dir = bert_folder(hf / "tok-config-dir", tok, vocab_size=vocab)  # tokenizer_config.json a folder
    (tok_config_dir / "tokenizer_config.json").unlink()
    (tok_config_dir / "tokenizer_config.json").mkdir()
    no_weights = bert_folder(hf / "no-weights", tok, vocab_size=vocab)
    (no_weights / "model.safetensors").unlink()
    out.update(
        HF_EXPORT_REHASHED=rehashed,
        HF_EXPORT_EDITED=edited, HF_BROKEN_CONFIG=broken, HF_NO_WEIGHTS=no_weights,
        HF_TOK_CONFIG_DIR=tok_config_dir,
        HF_BASE=bert_folder(hf / "base-model", tok, vocab_size=vocab, head=False),
        HF_SMALL_VOCAB=bert_folder(hf / "small-vocab", tok, vocab_size=100),
        HF_NO_TOKENIZER=bert_folder(hf / "no-tokenizer", None, vocab_size=vocab),
        HF_PICKLE=bert_folder(hf / "pickle", tok, vocab_size=vocab, weights="pickle"),
        HF_POISON=bert_folder(hf / "poison", tok, vocab_size=vocab, weights="poison", marker=w / "payload-ran"),
        HF_REMOTE=remote_code_folder(hf / "remote", tok, vocab_size=vocab, marker=w / "remote-code-ran"),
        HF_TOK_REMOTE=remote_code_folder(hf / "tok-remote", tok, vocab_size=vocab, marker=w / "tokenizer-code-ran",
                                         in_tokenizer=True),
    )
    return out


@dataclasses.dataclass(frozen=True)
class Case:
    """One bad input: ``argv`` and the text the message must contain (``{NAME}`` placeholders
    are workspace paths)."""

    id: str
    argv: tuple[str, ...]
    expect: str


def C(id: str, argv: str, expect: str) -> Case:  # noqa: N802 - a table row
    return Case(id, tuple(argv.split()), expect)


T = "--config retrain-quickstart --data {CORPUS}"
CASES = [
    # data prepare / verify
    C("prepare-missing-input", "data prepare --input {W}/nope --out {W}/p1", "{W}/nope"),
    C("prepare-out-is-file", "data prepare --input {CORPUS} --out {FILE}", "{FILE}"),
    C("prepare-out-under-file", "data prepare --input {CORPUS} --out {FILE}/sub", "{FILE}"),
    C("prepare-out-in-proc", "data prepare --input {CORPUS} --out /proc/lvsearch-x", "/proc/lvsearch-x"),
    C("prepare-out-holds-dataset", "data prepare --input {CORPUS} --out {CORPUS}", "{CORPUS}"),
    C("prepare-binary-source", "data prepare --input {BIN_SRC} --out {W}/p2", "a.train"),
    C("prepare-bad-vocab", "data prepare --input {BIN_SRC} --out {W}/p3 --vocab-size 3", "vocab"),
    C("verify-not-a-dataset", "data verify {EMPTY}", "{EMPTY}"),
    C("verify-modified-shard", "data verify {CORPUS_MOD}", "train-00000.bin"),
    C("verify-edited-manifest", "data verify {CORPUS_MANIFEST_MOD}", "{CORPUS_MANIFEST_MOD}/manifest.json"),
    C("verify-manifest-wrong-type", "data verify {CORPUS_MANIFEST_TYPE}",
      "dataset manifest {CORPUS_MANIFEST_TYPE}/manifest.json is malformed: field splits.train.shards.0.tokens"),
    C("retrain-manifest-missing-field", "retrain --arch bert --config retrain-quickstart --data "
      "{CORPUS_MANIFEST_NO_DTYPE} --out {W}/r7b", "{CORPUS_MANIFEST_NO_DTYPE}/manifest.json is malformed: field dtype is missing"),
    C("retrain-edited-manifest", "retrain --arch bert --config retrain-quickstart --data {CORPUS_MANIFEST_MOD} "
      "--out {W}/r7", "{CORPUS_MANIFEST_MOD}/manifest.json"),
    # train-supernet
    C("supernet-unknown-recipe", "train-supernet --config nosuch-recipe --data {CORPUS} --out {W}/s1", "nosuch-recipe"),
    C("supernet-missing-data", "train-supernet --config quickstart --data {W}/nodata --out {W}/s2", "{W}/nodata"),
    C("supernet-bad-value", "train-supernet --config quickstart --data {CORPUS} --out {W}/s3 --set train.lr=abc", "train.lr"),
    C("supernet-impossible-seq-len", "train-supernet --config quickstart --data {CORPUS} --out {W}/s7 "
      "--set train.seq_len=100000", "train.seq_len=100000"),
    C("retrain-impossible-seq-len", "retrain --arch bert " + T + " --out {W}/r6 --set train.seq_len=100000",
      "train.seq_len=100000"),
    C("supernet-unknown-key", "train-supernet --config quickstart --data {CORPUS} --out {W}/s4 --set nosuch.key=1", "nosuch"),
    C("supernet-out-holds-run", "train-supernet --config quickstart --data {CORPUS} --out {SN}", "{SN}"),
    C("supernet-lr-nan", "train-supernet --config quickstart --data {CORPUS} --out {W}/s9 --set train.lr=nan",
      "train.lr must be a finite number"),
    C("supernet-seed-negative", "train-supernet --config quickstart --data {CORPUS} --out {W}/s10 --set train.seed=-1",
      "train.seed must be ≥ 0"),
    C("supernet-eval-batch-zero", "train-supernet --config quickstart --data {CORPUS} --out {W}/s11 "
      "--set eval.batch_size=0", "eval.batch_size must be ≥ 1"),
    C("supernet-grad-clip-nan", "train-supernet --config quickstart --data {CORPUS} --out {W}/s12 "
      "--set train.grad_clip=nan", "train.grad_clip must be a finite number"),
    C("retrain-weight-decay-negative", "retrain --arch bert " + T + " --out {W}/r9 --set train.weight_decay=-5",
      "train.weight_decay must be a finite number"),
    C("evaluate-out-a-folder", "evaluate --model {MODEL} --no-blimp --mlm-data {CORPUS} --out {W}/", "is a folder"),
    C("retrain-arch-file-a-list", "retrain --arch {ARCH_LIST} " + T + " --out {W}/r10", "{ARCH_LIST}"),
    C("retrain-arch-meta-nan", "retrain --arch {ARCH_META_NAN} " + T + " --out {W}/r11", "field meta"),
    C("retrain-arch-supernet-config-data-string", "retrain --arch {ARCH_SN_DATA_STRING} " + T + " --out {W}/r12",
      "supernet run config {SN_PICK_DATA_STRING}/config.json is malformed: field data: input should be a valid dictionary"),
    C("retrain-arch-meta-supernet-number", "retrain --arch {ARCH_SN_NUMBER} " + T + " --out {W}/r13",
      "architecture file {ARCH_SN_NUMBER} is malformed: field meta.supernet: input should be a valid string"),
    C("evolve-supernet-config-no-space", "evolve --supernet {SN_NO_SPACE} --out {W}/e20", "field space"),
    C("evolve-supernet-config-data-string", "evolve --supernet {SN_DATA_STRING} --out {W}/e21", "field data"),
    C("evolve-supernet-config-null", "evolve --supernet {SN_CONFIG_NULL} --out {W}/e22", "field config"),
    C("supernet-overwrite-user-files", "train-supernet --config quickstart --data {CORPUS} --out {SN_NOTES} --overwrite",
      "also holds NOTES.md, evo/"),
    C("prepare-overwrite-user-files", "data prepare --input {BIN_SRC} --out {CORPUS_NOTES} --overwrite",
      "also holds NOTES.md"),
    C("report-out-training-run", "report {MODEL} --out {RT} --overwrite", "holds a training run"),
    C("report-out-inside-a-run", "report {MODEL} --out {SN}/checkpoints --overwrite", "(inside {SN})"),
    C("report-out-new-folder-in-a-model", "report {MODEL} --out {MODEL}/rep", "(inside {MODEL})"),
    C("supernet-out-in-proc", "train-supernet --config quickstart --data {CORPUS} --out /proc/lvsearch-x", "/proc/lvsearch-x"),
    C("supernet-out-under-file", "train-supernet --config quickstart --data {CORPUS} --out {FILE}/run", "{FILE}"),
    C("supernet-resume-nothing", "train-supernet --data {CORPUS} --out {EMPTY} --resume", "{EMPTY}"),
    C("supernet-resume-other-config", "train-supernet --data {CORPUS} --out {SN} --resume --set train.lr=1e-2", "{SN}"),
    C("supernet-resume-state-step", "train-supernet --data {CORPUS} --out {SN_BAD_STATE} --resume", "state.json"),
    C("supernet-resume-pointer", "train-supernet --data {CORPUS} --out {SN_BAD_POINTER} --resume", "latest.json"),
    C("supernet-resume-pointer-type", "train-supernet --data {CORPUS} --out {SN_POINTER_TYPE} --resume",
      "checkpoint pointer {SN_POINTER_TYPE}/checkpoints/latest.json is malformed: field step: input should be a valid "
      "integer"),
    C("supernet-modified-shard", "train-supernet --config quickstart --data {CORPUS_MOD} --out {W}/s5", "train-00000.bin"),
    C("supernet-modified-tokenizer", "train-supernet --config quickstart --data {CORPUS_TOK_MOD} --out {W}/s6", "tokenizer.json"),
    C("supernet-resume-other-data", "train-supernet --data {OTHER_CORPUS} --out {SN} --resume", "{OTHER_CORPUS}"),
    # retrain (and finalists)
    C("retrain-missing-arch-file", "retrain --arch {W}/nope.json " + T + " --out {W}/r1", "{W}/nope.json"),
    C("retrain-unknown-arch-name", "retrain --arch zzz " + T + " --out {W}/r2", "zzz"),
    # the arch is checked before the data folder, so a user with two bad inputs fixes them in one pass
    C("retrain-missing-arch-file-and-data", "retrain --arch {W}/nope.json --config retrain-quickstart "
      "--data {W}/nodata --out {W}/r14", "{W}/nope.json"),
    C("retrain-no-arch-and-missing-data", "retrain --config retrain-quickstart --data {W}/nodata --out {W}/r15",
      "--arch is required"),
    C("retrain-unknown-arch-name-and-missing-data", "retrain --arch zzz --config retrain-quickstart "
      "--data {W}/nodata --out {W}/r16", "unknown reference architecture 'zzz'"),
    C("retrain-arch-list-without-finalists", "retrain --arch bert,sandwich " + T + " --out {W}/r17", "--finalists K"),
    C("retrain-broken-arch-json", "retrain --arch {BROKEN_JSON} " + T + " --out {W}/r3", "{BROKEN_JSON}"),
    C("retrain-arch-bad-inputs", "retrain --arch {ARCH_SEQ_BAD} " + T + " --out {W}/r4", "{ARCH_SEQ_BAD}"),
    C("retrain-out-holds-run", "retrain --arch bert " + T + " --out {RT}", "{RT}"),
    C("retrain-out-in-proc", "retrain --arch bert " + T + " --out /proc/lvsearch-x", "/proc/lvsearch-x"),
    C("retrain-negative-steps", "retrain --arch bert " + T + " --out {W}/r5 --set train.steps=-5", "train.steps"),
    C("retrain-resume-edited-state", "retrain --data {CORPUS} --out {RT_EDITED_STATE} --resume", "state.json"),
    C("finalists-too-few", "retrain --arch {SEARCH}/topk.json --finalists 1 --budget 8 " + T + " --out {W}/f1", "finalists"),
    C("finalists-out-in-proc", "retrain --arch {SEARCH}/topk.json --finalists 2 --budget 8 --set num_slots=4 --set train.eval_every=4 " + T + " --out /proc/lvs-f",
      "/proc/lvs-f"),
    C("finalists-wsd-rung-in-cooldown", "retrain --arch bert,sandwich --finalists 2 --budget 16 --set num_slots=4 "
      "--set train.eval_every=4 --set train.warmup_steps=2 --set train.schedule=wsd --set train.decay_fraction=0.6 "
      + T + " --out {W}/f3", "stable phase"),
    # --executor (lvsearch/dispatch.py)
    C("retrain-executor-without-finalists", "retrain --arch bert " + T + " --out {W}/r8 --executor local", "--executor"),
    C("finalists-slurm-option-without-slurm", "retrain --arch bert,sandwich --finalists 2 --budget 8 " + T
      + " --out {W}/f5 --executor local --slurm-partition gpu", "--executor slurm"),
    C("finalists-slurm-without-sbatch", "retrain --arch bert,sandwich --finalists 2 --budget 8 " + T
      + " --out {W}/f6 --executor slurm", "sbatch"),
    C("finalists-max-parallel-zero", "retrain --arch bert,sandwich --finalists 2 --budget 8 " + T
      + " --out {W}/f7 --executor local --max-parallel 0", "--max-parallel"),
    C("finalists-slurm-extra-not-key-value", "retrain --arch bert,sandwich --finalists 2 --budget 8 " + T
      + " --out {W}/f8 --executor slurm --slurm-extra qos", "--slurm-extra"),
    C("rank-check-slurm-without-sbatch", "rank-check --supernet {SN} --archs 3 --steps 2 --out {W}/rc9 --executor slurm",
      "sbatch"),
    # evolve / arch / rank-check
    C("evolve-missing-supernet", "evolve --supernet {W}/nosn --out {W}/e1", "{W}/nosn"),
    C("evolve-not-a-run", "evolve --supernet {CORPUS} --out {W}/e2", "{CORPUS}"),
    C("evolve-out-holds-search", "evolve --supernet {SN} --out {SEARCH}", "{SEARCH}"),
    C("evolve-out-in-proc", "evolve --supernet {SN} --out /proc/lvsearch-x", "/proc/lvsearch-x"),
    C("evolve-out-under-file", "evolve --supernet {SN} --out {FILE}/s", "{FILE}"),
    C("evolve-negative-max-params", "evolve --supernet {SN} --out {W}/e3 --max-params -1", "--max-params"),
    C("evolve-min-above-max-params", "evolve --supernet {SN} --out {W}/e5 --min-params 2e6 --max-params 1e6", "--min-params"),
    C("evolve-space-mismatch", "evolve --supernet {SN} --out {W}/e4 --space lvbert@6", "--space"),
    C("evolve-resume-other-supernet", "evolve --supernet {SN2} --out {SEARCH2} --resume --iterations 3", "{SN2}"),
    C("evolve-resume-nothing", "evolve --supernet {SN} --out {EMPTY} --resume", "{EMPTY}"),
    C("evolve-resume-edited-state", "evolve --supernet {SN} --out {SEARCH_CURVE_CUT} --resume " + " ".join(SEARCH_ARGS),
      "{SEARCH_CURVE_CUT}/state.json"),
    # a finished 3-iteration search resumed with fewer: the state and best.json stay as they are
    C("evolve-resume-fewer-iterations", "evolve --supernet {SN} --out {SEARCH} --resume --iterations 2",
      "--iterations 2, below the 3 recorded in {SEARCH}/state.json (3 iterations already run): --iterations may only grow"),
    # evolve's size band: a band no architecture of the space can fill ends at once, naming both switches
    C("evolve-band-above-space", "evolve --supernet {SN} --out {W}/e6 --min-params 1e9 --max-params 2e9",
      "fits --min-params 1,000,000,000 and --max-params 2,000,000,000: its architectures have"),
    C("evolve-band-below-space", "evolve --supernet {SN} --out {W}/e7 --max-params 1000",
      "fits --max-params 1,000: its architectures have"),
    C("evolve-min-params-above-space", "evolve --supernet {SN} --out {W}/e8 --min-params 1e9", "--min-params ≤"),
    # the search switches: bad values, missing files, wrong combinations
    C("evolve-fitness-unknown", "evolve --supernet {SN} --out {W}/e9 --fitness bogus", "--fitness: invalid choice"),
    C("evolve-racing-zero", "evolve --supernet {SN} --out {W}/e10 --racing 0", "racing rungs [0] must be increasing"),
    C("evolve-racing-decreasing", "evolve --supernet {SN} --out {W}/e11 --racing 8,4", "racing rungs [8, 4]"),
    C("evolve-racing-not-numbers", "evolve --supernet {SN} --out {W}/e12 --racing abc", "not a list of sequence counts"),
    C("evolve-racing-above-dev-set", "evolve --supernet {SN} --out {W}/e13 --racing 64 --dev-sequences 16",
      "racing rung 64 is not below --dev-sequences 16"),
    C("evolve-racing-eta-one", "evolve --supernet {SN} --out {W}/e14 --racing 4 --racing-eta 1",
      "--racing-eta must be a finite number > 1, got 1.0"),
    C("evolve-racing-eta-nan", "evolve --supernet {SN} --out {W}/e15 --racing-eta nan", "--racing-eta: 'nan' is not a finite number"),
    C("evolve-racing-eta-when-off", "evolve --supernet {SN} --out {W}/e16 --racing off --racing-eta 2",
      "--racing off turns racing off"),
    C("evolve-racing-with-nsga2", "evolve --supernet {SN} --out {W}/e17 --strategy nsga2 --racing 4", "NSGA-II"),
    C("evolve-aging-tournament-zero", "evolve --supernet {SN} --out {W}/e18 --strategy aging --population 4 "
      "--tournament 0", "--tournament 0 must be between 1 and --population 4"),
    C("evolve-aging-tournament-above-population", "evolve --supernet {SN} --out {W}/e19 --strategy aging "
      "--population 4 --tournament 9", "--tournament 9 must be between 1 and --population 4"),
    C("evolve-aging-cycle-zero", "evolve --supernet {SN} --out {W}/e20 --strategy aging --population 4 --cycle 0",
      "--cycle 0 must be between 1"),
    C("evolve-tournament-without-aging", "evolve --supernet {SN} --out {W}/e21 --tournament 2",
      "settings of --strategy aging"),
    C("evolve-cycle-with-random", "evolve --supernet {SN} --out {W}/e22 --strategy random --cycle 2",
      "settings of --strategy aging"),
    C("evolve-landscape-missing", "evolve --supernet {SN} --out {W}/e23 --landscape {W}/nolandscape.json",
      "{W}/nolandscape.json"),
    C("evolve-landscape-broken", "evolve --supernet {SN} --out {W}/e24 --landscape {BROKEN_JSON}", "{BROKEN_JSON}"),
    C("evolve-landscape-not-landscape", "evolve --supernet {SN} --out {W}/e25 --landscape {REPORT_BROKEN}",
      "landscape file {REPORT_BROKEN} is malformed: field summary is missing"),
    # numbers no landscape has: one message naming the field, no verdict printed
    C("evolve-landscape-infinite-median", "evolve --supernet {SN} --out {W}/e29 --landscape {LANDSCAPE_INF_MEDIAN}",
      "field summary.distribution_random.median: input should be a finite number (found inf)"),
    C("evolve-landscape-negative-sigma", "evolve --supernet {SN} --out {W}/e30 --landscape {LANDSCAPE_NEG_SIGMA}",
      "field summary.sigma_seed.pooled_std: input should be greater than or equal to 0"),
    C("evolve-landscape-huge-integer", "evolve --supernet {SN} --out {W}/e31 --landscape {LANDSCAPE_HUGE_INT}",
      "field summary.distribution_random.best: input should be a valid number"),
    C("evolve-dev-sequences-zero", "evolve --supernet {SN} --out {W}/e26 --dev-sequences 0", "--dev-sequences must be ≥ 1"),
    C("evolve-dev-sequences-negative", "evolve --supernet {SN} --out {W}/e27 --dev-sequences -3",
      "--dev-sequences must be ≥ 1"),
    C("evolve-dev-sequences-word", "evolve --supernet {SN} --out {W}/e28 --dev-sequences many", "--dev-sequences"),
    C("evolve-resume-other-fitness", "evolve --supernet {SN} --out {SEARCH} --resume --fitness accuracy", "--fitness"),
    C("evolve-nsga2-cost-without-nsga2", "evolve --supernet {SN} --out {W}/e40 --nsga2-cost flops",
      "--nsga2-cost flops sets NSGA-II's second objective, and this search's strategy is evolution"),
    C("evolve-nsga2-cost-with-aging", "evolve --supernet {SN} --out {W}/e41 --strategy aging --nsga2-cost latency",
      "add --strategy nsga2, or drop --nsga2-cost"),
    C("rank-check-fitness-unknown", "rank-check --supernet {SN} --archs 3 --steps 2 --fitness bogus", "--fitness"),
    C("rank-check-landscape-missing", "rank-check --supernet {SN} --archs 3 --steps 2 --out {W}/rc1 "
      "--landscape {W}/nolandscape.json", "{W}/nolandscape.json"),
    C("supernet-sampling-paths-uniform", "train-supernet --config quickstart --data {CORPUS} --out {W}/s8 "
      "--set sampling.paths=4", "sampling.paths=4 is read by the sandwich rule only"),
    C("arch-show-unknown", "arch show zzz --space lvbert", "zzz"),
    C("arch-show-broken-file", "arch show {BROKEN_JSON}", "{BROKEN_JSON}"),
    C("arch-show-broken-file-before-supernet", "arch show {BROKEN_JSON} --supernet {W}/nosn", "{BROKEN_JSON}"),
    # bad variants: a search space YAML, an architecture file
    C("space-variant-unknown-dimension", "train-supernet --config quickstart --data {CORPUS} --out {W}/s30 "
      "--set space={SPACE_VARIANT_DIM}", "{SPACE_VARIANT_DIM}: ops.SA has unknown variant dimension 'kernel'"),
    C("space-variant-value-not-allowed", "train-supernet --config quickstart --data {CORPUS} --out {W}/s31 "
      "--set space={SPACE_VARIANT_VALUE}", "{SPACE_VARIANT_VALUE}: ops.FF.inner has -1"),
    C("space-variant-even-kernel", "arch show bert --space {SPACE_VARIANT_EVEN}",
      "{SPACE_VARIANT_EVEN}: ops.DC.kernel has 4: kernel must be an odd positive integer"),
    C("arch-variant-unknown-dimension", "retrain --arch {ARCH_VARIANT_DIM} " + T + " --out {W}/r30",
      "{ARCH_VARIANT_DIM}: slot 1 (SA) has unknown variant dimension 'kernel'"),
    C("arch-variant-value-not-allowed", "retrain --arch {ARCH_VARIANT_VALUE} " + T + " --out {W}/r31 "
      "--set space=lvbert-elastic --set num_slots=4", "{ARCH_VARIANT_VALUE}: slot 1 uses SA with heads 3, which search space"),
    C("arch-variant-even-kernel", "arch show {ARCH_VARIANT_EVEN}",
      "{ARCH_VARIANT_EVEN}: slot 3 (DC) has kernel 4: kernel must be an odd positive integer"),
    C("rank-check-missing-supernet", "rank-check --supernet {W}/nosn --archs 3 --steps 2", "{W}/nosn"),
    # evaluate / report
    C("evaluate-missing-model", "evaluate --model {W}/nomodel --no-blimp --mlm-data {CORPUS}", "{W}/nomodel"),
    C("evaluate-not-a-model", "evaluate --model {CORPUS} --no-blimp --mlm-data {CORPUS}", "{CORPUS}"),
    C("evaluate-out-in-proc", "evaluate --model {MODEL} --no-blimp --mlm-data {CORPUS} --out /proc/lvs/r.json", "/proc/lvs"),
    C("evaluate-out-under-file", "evaluate --model {MODEL} --no-blimp --mlm-data {CORPUS} --out {FILE}/r.json", "{FILE}"),
    C("evaluate-missing-task", "evaluate --model {MODEL} --no-blimp --task {W}/notask --out {W}/ev1.json", "{W}/notask"),
    C("evaluate-missing-blimp", "evaluate --model {MODEL} --blimp {W}/noblimp --out {W}/ev2.json", "{W}/noblimp"),
    C("evaluate-other-tokenizer", "evaluate --model {MODEL} --no-blimp --mlm-data {OTHER_CORPUS} --out {W}/ev3.json",
      "{OTHER_CORPUS}"),
    C("evaluate-dev-seq-too-long", "evaluate --model {MODEL} --no-blimp --mlm-data {CORPUS} --dev-seq-len 100000 "
      "--out {W}/ev4.json", "max_len"),
    # task files in other encodings, and header names with invisible characters (quoted with escapes)
    C("evaluate-task-utf16", "evaluate --model {MODEL} --no-blimp --task {TASK_UTF16} --out {W}/ev22.json",
      "{TASK_UTF16}/train.tsv is UTF-16LE text (byte-order mark), not UTF-8"),
    C("evaluate-task-latin1", "evaluate --model {MODEL} --no-blimp --task {TASK_LATIN1} --out {W}/ev23.json",
      "{TASK_LATIN1}/train.tsv is not UTF-8: byte 0xe9 on line 2 is 'é' in Latin-1 / Windows-1252"),
    C("evaluate-task-header-two-tabs", "evaluate --model {MODEL} --no-blimp --task {TASK_TWO_TABS} --out {W}/ev24.json",
      "the header has 4 ('premise', '', 'hypothesis', 'label')"),
    C("evaluate-task-header-zero-width", "evaluate --model {MODEL} --no-blimp --task {TASK_ZERO_WIDTH} "
      "--out {W}/ev25.json", "columns found: 'premise\\u200b', 'label'"),
    # task files: a field over the reader's limit, labels that are not finite numbers
    C("evaluate-task-field-too-long", "evaluate --model {MODEL} --no-blimp --task {TASK_LONG_FIELD} --out {W}/ev26.json",
      "{TASK_LONG_FIELD}/train.tsv, line 3: cannot be read as a tab-separated row (field larger than field limit "
      "(1000000); lvsearch reads fields of up to 1,000,000 characters)"),
    C("evaluate-task-nan-label", "evaluate --model {MODEL} --no-blimp --task {TASK_NAN_LABEL} --out {W}/ev27.json",
      "{TASK_NAN_LABEL}/train.tsv, line 4: label 'nan' is not a finite number"),
    C("evaluate-task-inf-score", "evaluate --model {MODEL} --no-blimp --task {TASK_INF_SCORE} --out {W}/ev28.json",
      "{TASK_INF_SCORE}/dev.tsv, line 3: label 'inf' is not a finite number"),
    C("evaluate-compare-missing", "evaluate --compare {W}/a.json {W}/b.json", "{W}/a.json"),
    C("report-missing-source", "report {W}/nothing --out {W}/rep1", "{W}/nothing"),
    C("report-notes-file", "report {FILE} --out {W}/rep1", "{FILE} is not an evaluation report"),
    C("report-broken-report", "report {REPORT_BROKEN} --out {W}/rep2", "{REPORT_BROKEN}"),
    C("report-out-in-proc", "report {MODEL} --out /proc/lvsearch-x", "/proc/lvsearch-x"),
    # garbage in a report's fields: one message naming the field, no report written
    C("report-no-model-folder", "report {REPORT_NO_FOLDER} --out {W}/rep3", "{REPORT_NO_FOLDER} is malformed: "
      "field model.folder is missing"),
    C("report-model-folder-number", "report {REPORT_FOLDER_NUMBER} --out {W}/rep4",
      "field model.folder: input should be a valid string (found 5)"),
    C("report-mlm-string", "report {REPORT_MLM_STRING} --out {W}/rep5",
      "field mlm: input should be a valid dictionary (found 'garbage')"),
    C("report-mlm-accuracy-text", "report {REPORT_MLM_ACCURACY_TEXT} --out {W}/rep6",
      "field mlm.accuracy: input should be a valid number (found 'high')"),
    C("report-mlm-status-number", "report {REPORT_MLM_STATUS} --out {W}/rep7",
      "field mlm.status: input should be 'done', 'skipped' or 'not applicable' (found 5)"),
    C("report-blimp-done-empty", "report {REPORT_BLIMP_DONE_EMPTY} --out {W}/rep8",
      "field blimp: status 'done' needs 'pairs', 'ties', 'phenomena'"),
    C("report-blimp-list", "report {REPORT_BLIMP_LIST} --out {W}/rep9", "field blimp: input should be a valid dictionary"),
    C("report-task-mean-text", "report {REPORT_TASK_MEAN_TEXT} --out {W}/rep10",
      "field finetune.rte.aggregate.dev.accuracy.mean: input should be a valid number (found 'x')"),
    C("report-task-no-metrics", "report {REPORT_TASK_NO_METRICS} --out {W}/rep11",
      "field finetune.rte: aggregate needs a 'dev' or 'test' entry, each with at least one metric"),
    C("report-tasks-list", "report {REPORT_TASKS_LIST} --out {W}/rep12",
      "field finetune: input should be a valid dictionary (found [1])"),
    C("evaluate-compare-garbage", "evaluate --compare {REPORT_OK} {REPORT_MLM_STRING}", "{REPORT_MLM_STRING} is malformed"),
    # quickstart / scaling
    C("quickstart-missing-data", "quickstart --data {W}/nodata --out {W}/q1", "{W}/nodata"),
    C("quickstart-out-is-file", "quickstart --out {FILE}", "{FILE}"),
    C("quickstart-out-in-proc", "quickstart --out /proc/lvsearch-x", "/proc/lvsearch-x"),
    C("quickstart-bad-minutes", "quickstart --minutes 0 --out {W}/q2", "--minutes"),
    C("quickstart-out-holds-other", "quickstart --out {SN}", "{SN}"),
    C("scaling-fit-missing-curve", "scaling fit {W}/nocurve.jsonl", "{W}/nocurve.jsonl"),
    # export / evaluate hf:
    # latency
    C("latency-not-a-run", "latency measure --supernet {CORPUS} --out {W}/lt1.json", "{CORPUS}"),
    C("latency-no-cuda", "latency measure --supernet {SN} --out {W}/lt2.json --device cuda", "cuda"),
    C("latency-seq-too-long", "latency measure --supernet {SN} --out {W}/lt3.json --seq-len 100000", "--seq-len"),
    C("latency-table-not-json", "latency predict --table {FILE} --arch bert", "{FILE}"),
    C("latency-missing-table", "latency validate --supernet {SN} --table {W}/nope.json --out {W}/lv1.json",
      "{W}/nope.json"),
    C("latency-out-is-input", "latency validate --supernet {SN} --table {W}/nope.json --out {SN}", "{SN}"),
    # issue 56: hostile and careless latency tables, search spaces and architecture keys
    C("latency-validate-two-archs", "latency validate --supernet {SN} --table {LT} --out {W}/lv2.json --archs 2",
      "--archs: '2' is outside [3, 1,000,000] (a rank correlation needs 3 architectures)"),
    C("latency-measure-huge-batch", "latency measure --supernet {SN} --out {W}/lt5.json --batch 100000",
      "--batch: '100000' is outside [1, 65,536]"),
    C("latency-table-huge-slot-count", "latency predict --table {LT_SLOTS_HUGE} --arch bert",
      "{LT_SLOTS_HUGE} (field space): num_slots 1,000,000,000 is above the 1,024 slots lvsearch builds"),
    C("latency-table-dev-zero", "latency predict --table /dev/zero --arch bert",
      "latency table /dev/zero is a character device, not a regular file"),
    C("latency-table-negative-intercept", "latency predict --table {LT_INTERCEPT} --arch bert",
      "latency table {LT_INTERCEPT} is malformed: its calibration (-1e+06 ms"),
    C("latency-table-negative-intercept-evolve", "evolve --supernet {SN} --out {W}/e50 --latency-table {LT_INTERCEPT} "
      "--max-latency 1", "latency table {LT_INTERCEPT} is malformed: its calibration"),
    C("latency-table-huge-entry", "latency predict --table {LT_ENTRY_HUGE} --arch bert",
      "field ops_ms.SA: input should be less than or equal to 1000000"),
    C("latency-table-other-space", "evolve --supernet {SN} --out {W}/e51 --latency-table {LT_OTHER_SPACE}",
      "latency table {LT_OTHER_SPACE} was measured for space 'lvbert-elc@6' (6 slots"),
    C("latency-table-free-text-dtype", "latency predict --table {LT_DTYPE} --arch bert",
      "field dtype: input should be 'float32' or 'bfloat16' (found 'float16')"),
    C("latency-table-entry-of-no-choice", "latency predict --table {LT_ENTRY_UNKNOWN} --arch bert",
      "field ops_ms has entries its space 'lvbert-elc@4' has no choice for ('SA(h2)')"),
    C("evolve-resume-table-edited-in-place", "evolve --supernet {SN} --out {SEARCH_LT} --resume "
      "--latency-table {LT_EDITED_IN_PLACE} --population 4 --iterations 2 --topk 2 --crossover 2 --mutation 2 "
      "--dev-sequences 16", "the latency table {LT_EDITED_IN_PLACE} was changed since the search"),
    C("space-alias-bomb-name", "arch show bert --space {SPACE_BOMB_NAME}",
      "{SPACE_BOMB_NAME} expands to 8,335,593,974 values through its &anchors and *aliases"),
    C("space-alias-bomb-connectivity", "train-supernet --config quickstart --data {CORPUS} --out {W}/s40 "
      "--set space={SPACE_BOMB_CONNECTIVITY}", "{SPACE_BOMB_CONNECTIVITY} expands to"),
    C("space-alias-bomb-num-slots", "arch show bert --space {SPACE_BOMB_SLOTS}", "{SPACE_BOMB_SLOTS} expands to"),
    C("space-alias-bomb-description", "arch show bert --space {SPACE_BOMB_DESCRIPTION}",
      "{SPACE_BOMB_DESCRIPTION} expands to"),
    C("space-recursive-alias", "arch show bert --space {SPACE_RECURSIVE_ALIAS}",
      "{SPACE_RECURSIVE_ALIAS} has an alias that contains itself"),
    C("recipe-alias-bomb", "train-supernet --config {RECIPE_BOMB} --data {CORPUS} --out {W}/s41",
      "recipe {RECIPE_BOMB} expands to"),
    C("space-ff-inner-huge", "train-supernet --config quickstart --data {CORPUS} --out {W}/s42 "
      "--set space={SPACE_FF_HUGE}", "{SPACE_FF_HUGE}: ops.FF.inner has 1000000: inner must be a positive multiple of "
      "model.ff_inner of at most 64"),
    C("space-sa-heads-huge", "arch show bert --space {SPACE_SA_HUGE}", "ops.SA.heads has 100000: heads must be in 1..256"),
    C("space-dc-kernel-huge", "arch show bert --space {SPACE_DC_HUGE}",
      "ops.DC.kernel has 1000001: kernel must be at most 1023 taps"),
    C("space-ff-inner-inf", "arch show bert --space {SPACE_FF_INF}", "ops.FF.inner has inf: inner must be"),
    C("space-slots-huge", "train-supernet --config quickstart --data {CORPUS} --out {W}/s43 "
      "--set space={SPACE_SLOTS_HUGE}", "{SPACE_SLOTS_HUGE}: num_slots 3,000 is above the 1,024 slots"),
    C("space-name-not-a-string", "arch show bert --space {SPACE_NAME_LIST}",
      "{SPACE_NAME_LIST}: name must be a string, got ['a', 'b']"),
    C("arch-key-dimension-twice", "arch show {ARCH_DIM_TWICE}",
      "architecture file {ARCH_DIM_TWICE}: slot 1 (SA) gives heads twice in 's(h2,h4)fsf'"),
    C("arch-json-key-twice", "arch show {ARCH_KEY_TWICE}", "{ARCH_KEY_TWICE} gives the key 'ops' twice in one object"),
    C("supernet-slot-count-blamed", "train-supernet --config quickstart --data {CORPUS} --out {W}/s44 "
      "--set num_slots=1024 --set train.batch_size=4000 --set model.heads=8", "num_slots=1024 (LV-BERT uses 24): one "
      "step's attention activations"),
    C("retrain-arch-of-fewer-slots", "retrain --arch {SEARCH}/best.json " + T + " --out {W}/r40",
      "fix: pass --set num_slots=4 (a recipe's slot count"),
    C("export-not-a-model", "export --model {CORPUS} --out {W}/x1", "{CORPUS}"),
    C("export-out-not-empty", "export --model {MODEL} --out {SN}", "{SN}"),
    C("export-out-in-proc", "export --model {MODEL} --out /proc/lvsearch-x", "/proc/lvsearch-x"),
    C("export-generator-of-mlm-run", "export --model {MODEL} --out {W}/x2 --generator", "generator"),
    C("evaluate-hf-not-a-model", "evaluate --model hf:{CORPUS} --no-blimp --mlm-data {CORPUS} --out {W}/ev5.json",
      "{CORPUS}"),
    # export: --out is never the source or above it, with or without --overwrite
    C("export-out-is-file", "export --model {MODEL} --out {FILE}", "{FILE}"),
    C("export-out-under-file", "export --model {MODEL} --out {FILE}/x", "{FILE}"),
    C("export-out-holds-export", "export --model {MODEL} --out {HF_EXPORT}", "{HF_EXPORT}"),
    C("export-out-is-source", "export --model {MODEL} --out {MODEL}", "--out {MODEL} is the model directory"),
    C("export-out-is-source-overwrite", "export --model {MODEL} --out {MODEL} --overwrite",
      "--out {MODEL} is the model directory"),
    C("export-out-holds-source", "export --model {MODEL} --out {RT}", "--out {RT} contains the model directory"),
    C("export-out-holds-source-overwrite", "export --model {MODEL} --out {RT} --overwrite",
      "--out {RT} contains the model directory"),
    C("export-out-dotdot-overwrite", "export --model {MODEL} --out {MODEL}/.. --overwrite", "contains the model directory"),
    C("export-missing-model", "export --model {W}/nomodel --out {W}/x3", "{W}/nomodel"),
    C("export-model-is-hf-folder", "export --model {HF_EXPORT} --out {W}/x4", "{HF_EXPORT}"),
    C("export-run-folder", "export --model {RT} --out {W}/x5", "pass --model {RT}/model"),
    # evaluate hf:: no code runs and no pickle is loaded without consent; no silent misscoring
    C("evaluate-hf-missing-folder", "evaluate --model hf:{W}/nohf --no-blimp --mlm-data {CORPUS} --out {W}/ev6.json",
      "{W}/nohf"),
    C("evaluate-hf-broken-config", "evaluate --model hf:{HF_BROKEN_CONFIG} --no-blimp --mlm-data {CORPUS} "
      "--out {W}/ev7.json", "{HF_BROKEN_CONFIG}/config.json"),
    C("evaluate-hf-no-weights", "evaluate --model hf:{HF_NO_WEIGHTS} --no-blimp --mlm-data {CORPUS} --out {W}/ev8.json",
      "{HF_NO_WEIGHTS} has no weights file"),
    C("evaluate-hf-tokenizer-config-folder", "evaluate --model hf:{HF_TOK_CONFIG_DIR} --no-blimp --mlm-data {CORPUS} "
      "--out {W}/ev30.json", "{HF_TOK_CONFIG_DIR}/tokenizer_config.json is not a file"),
    C("evaluate-hf-no-mlm-head", "evaluate --model hf:{HF_BASE} --no-blimp --mlm-data {CORPUS} --out {W}/ev9.json",
      "{HF_BASE} is not a masked-LM checkpoint"),
    C("evaluate-hf-vocab-mismatch-mlm", "evaluate --model hf:{HF_SMALL_VOCAB} --no-blimp --mlm-data {CORPUS} "
      "--out {W}/ev10.json", "the tokenizer of {HF_SMALL_VOCAB}"),
    C("evaluate-hf-vocab-mismatch-blimp", "evaluate --model hf:{HF_SMALL_VOCAB} --blimp-limit 1 --out {W}/ev11.json",
      "the tokenizer of {HF_SMALL_VOCAB}"),
    C("evaluate-hf-vocab-mismatch-task", "evaluate --model hf:{HF_SMALL_VOCAB} --no-blimp --task {TASK} --epochs 1 "
      "--seeds 1 --out {W}/ev12.json", "the tokenizer of {HF_SMALL_VOCAB}"),
    C("evaluate-hf-no-tokenizer", "evaluate --model hf:{HF_NO_TOKENIZER} --no-blimp --task {TASK} --out {W}/ev13.json",
      "the tokenizer of {HF_NO_TOKENIZER}"),
    C("evaluate-hf-remote-code", "evaluate --model hf:{HF_REMOTE} --no-blimp --mlm-data {CORPUS} --out {W}/ev14.json",
      "{HF_REMOTE}/marker_config.py"),
    C("evaluate-hf-remote-code-nothing-to-do", "evaluate --model hf:{HF_REMOTE} --no-blimp --out {W}/ev15.json",
      "without --trust-remote-code"),
    C("evaluate-hf-tokenizer-remote-code", "evaluate --model hf:{HF_TOK_REMOTE} --no-blimp --mlm-data {CORPUS} "
      "--out {W}/ev16.json", "{HF_TOK_REMOTE}/marker_tokenizer.py"),
    C("evaluate-hf-edited-export", "evaluate --model hf:{HF_EXPORT_EDITED} --no-blimp --mlm-data {CORPUS} "
      "--out {W}/ev17.json", "{HF_EXPORT_EDITED}/modeling_lvsearch.py was changed after the export"),
    # an edit with its recorded hash edited too: not blamed on another version alone, and the fix is the
    # re-export; --trust-remote-code only for a source the user trusts
    C("evaluate-hf-edited-export-rehashed", "evaluate --model hf:{HF_EXPORT_REHASHED} --no-blimp --mlm-data {CORPUS} "
      "--out {W}/ev31.json", "{HF_EXPORT_REHASHED}/modeling_lvsearch.py does not match what this lvsearch version "
      "writes"),
    C("evaluate-hf-export-bad-provenance", "evaluate --model hf:{HF_EXPORT_BAD_PROV} --no-blimp --mlm-data {CORPUS} "
      "--out {W}/ev32.json", "lvsearch export provenance {HF_EXPORT_BAD_PROV}/lvsearch_export.json is malformed: "
      "field training_args: input should be a valid dictionary"),
    C("evaluate-hf-pickle-weights", "evaluate --model hf:{HF_PICKLE} --no-blimp --mlm-data {CORPUS} --out {W}/ev18.json",
      "{HF_PICKLE}/pytorch_model.bin"),
    C("evaluate-hf-hostile-pickle-allowed", "evaluate --model hf:{HF_POISON} --allow-pickle --no-blimp --mlm-data {CORPUS} "
      "--out {W}/ev19.json", "the pickle weights of {HF_POISON}"),
    C("evaluate-trust-remote-code-on-model-dir", "evaluate --model {MODEL} --trust-remote-code --no-blimp "
      "--mlm-data {CORPUS} --out {W}/ev20.json", "--trust-remote-code applies to --model hf:"),
    C("evaluate-allow-pickle-on-model-dir", "evaluate --model {MODEL} --allow-pickle --no-blimp --mlm-data {CORPUS} "
      "--out {W}/ev21.json", "--allow-pickle applies to --model hf:"),
    # data lost: --overwrite replaces only a previous output of the same verb
    C("evaluate-out-over-weights", "evaluate --model {MODEL} --no-blimp --mlm-data {CORPUS} "
      "--out {MODEL}/model.safetensors --overwrite", "{MODEL}/model.safetensors is a file of {MODEL}"),
    C("evaluate-out-over-config", "evaluate --model {MODEL} --no-blimp --mlm-data {CORPUS} "
      "--out {MODEL}/config.json --overwrite", "{MODEL}/config.json is a file of {MODEL}"),
    C("evaluate-out-over-task-file", "evaluate --model {MODEL} --no-blimp --task {TASK} --out {TASK}/train.tsv "
      "--overwrite", "{TASK}/train.tsv is a file of {TASK}, which holds a task folder"),
    C("evaluate-out-over-user-file", "evaluate --model {MODEL} --no-blimp --mlm-data {CORPUS} --out {FILE} "
      "--overwrite", "{FILE} exists and is not a previous output"),
    C("export-over-unrelated-folder", "export --model {MODEL} --out {THESIS} --overwrite",
      "{THESIS} exists and is not empty, and holds no lvsearch export"),
    C("supernet-few-shot-out-is-source", "train-supernet --few-shot-from {SN} --op SA --steps 2 --data {CORPUS} "
      "--out {SN} --overwrite", "is the input --few-shot-from (init_from) {SN}"),
    C("rank-check-out-holds-its-reuse", "rank-check --supernet {SN} --reuse {RC_OUT}/rank_check.json --out {RC_OUT} "
      "--overwrite", "--out {RC_OUT} contains the input --reuse {RC_OUT}/rank_check.json"),
    C("rank-check-out-holds-other-files", "rank-check --supernet {SN} --out {THESIS} --archs 3",
      "--out {THESIS} is not empty and holds no rank check"),
    C("evolve-out-is-supernet", "evolve --supernet {SN} --out {SN} --overwrite", "--out {SN} is the input --supernet"),
    C("retrain-out-holds-its-arch", "retrain --arch {SEARCH}/best.json " + T + " --out {SEARCH} --overwrite",
      "--out {SEARCH} contains the input --arch {SEARCH}/best.json"),
    C("finalists-out-holds-its-topk", "retrain --arch {SEARCH}/topk.json --finalists 2 " + T + " --out {SEARCH} "
      "--overwrite", "--out {SEARCH} contains the input --arch {SEARCH}/topk.json"),
    C("quickstart-out-holds-its-task", "quickstart --data {CORPUS} --task {TASK} --out {W}",
      "--out {W} contains the input input {TASK}"),
    C("prepare-out-holds-its-input", "data prepare --input {THESIS} --out {W} --overwrite",
      "--out {W} contains the input --input {THESIS}"),
    C("scaling-plot-over-curve", "scaling fit {RT}/curve.jsonl --plot {RT}/curve.jsonl --overwrite",
      "--plot {RT}/curve.jsonl is the input CURVE"),
    C("scaling-plot-over-existing-file", "scaling fit {RT}/curve.jsonl --plot {FILE}", "--plot {FILE} already exists"),
    C("scaling-plot-over-non-png", "scaling fit {RT}/curve.jsonl --plot {FILE} --overwrite",
      "--plot {FILE} exists and is not a previous output"),
    # a device torch cannot use here: one message naming the devices that exist (CPU-only CI)
    C("supernet-device-cuda", "train-supernet --config quickstart --data {CORPUS} --out {W}/dv1 --device cuda",
      "--device cuda: torch cannot use CUDA here"),
    C("retrain-device-cuda", "retrain --arch bert " + T + " --out {W}/dv2 --device cuda",
      "--device cuda: torch cannot use CUDA here"),
    C("evolve-device-cuda", "evolve --supernet {SN} --out {W}/dv3 --device cuda", "--device cuda: torch cannot use CUDA"),
    C("rank-check-device-cuda", "rank-check --supernet {SN} --out {W}/dv4 --device cuda",
      "--device cuda: torch cannot use CUDA"),
    C("evaluate-device-cuda-7", "evaluate --model {MODEL} --no-blimp --mlm-data {CORPUS} --out {W}/dv5.json "
      "--device cuda:7", "--device cuda:7: torch cannot use CUDA"),
    C("evaluate-device-tpu", "evaluate --model {MODEL} --no-blimp --mlm-data {CORPUS} --out {W}/dv6.json --device tpu",
      "--device 'tpu' is not a device lvsearch runs on (devices here: cpu)"),
    C("quickstart-device-cuda", "quickstart --out {W}/dv7 --device cuda", "--device cuda: torch cannot use CUDA"),
    C("evolve-random-compare-random", "evolve --supernet {SN} --out {W}/c1 --strategy random --compare-random",
      "--compare-random compares a search with random search"),
    C("evolve-resume-and-overwrite", "evolve --supernet {SN} --out {SEARCH} --resume --overwrite",
      "--resume continues the output that --overwrite would replace"),
    C("retrain-resume-and-overwrite", "retrain --data {CORPUS} --out {RT} --resume --overwrite",
      "--resume continues the output that --overwrite would replace"),
    # deeply nested JSON (a recursion bomb) in any file the tools read: one message
    C("retrain-arch-bomb", "retrain --arch {BOMB} " + T + " --out {W}/b1", "{BOMB} nests deeper than 64 levels"),
    C("evolve-landscape-bomb", "evolve --supernet {SN} --out {W}/b2 --landscape {BOMB}", "{BOMB} nests deeper"),
    C("rank-check-reuse-no-digest", "rank-check --supernet {SN} --out {W}/rc2 --reuse {RC_NO_DIGEST}",
      "{RC_NO_DIGEST}: 'standalone_sha256' is missing"),
    C("rank-check-reuse-absurd-pool", "rank-check --supernet {SN} --out {W}/rc3 --reuse {RC_HUGE_POOL}",
      "{RC_HUGE_POOL}: 'pool' 1,000,000,000,000,000,000,000,000,000,000 is more architectures than the search space"),
    # a damaged JSON file: the fix names the command that writes it again
    C("supernet-resume-summary-type", "train-supernet --data {CORPUS} --out {SN_SUMMARY_TYPE} --resume",
      "run summary {SN_SUMMARY_TYPE}/summary.json is malformed: field final_eval: input should be a valid dictionary"),
    C("supernet-resume-broken-config", "train-supernet --data {CORPUS} --out {SN_BROKEN_CONFIG} --resume",
      "write it again: lvsearch train-supernet --config RECIPE --data DATA --out {SN_BROKEN_CONFIG} --overwrite"),
    C("evolve-resume-broken-state", "evolve --supernet {SN} --out {SEARCH_BROKEN_STATE} --resume",
      "write it again: lvsearch evolve --supernet SUPERNET --out {SEARCH_BROKEN_STATE} --overwrite"),
    C("verify-broken-manifest", "data verify {CORPUS_BROKEN_MANIFEST}",
      "write it again: lvsearch data prepare --input SOURCES --out {CORPUS_BROKEN_MANIFEST} --overwrite"),
    C("report-broken-json", "report {BROKEN_JSON} --out {W}/rep13",
      "write it again: lvsearch evaluate --model MODEL --out {BROKEN_JSON} --overwrite"),
    C("rank-check-reuse-broken-json", "rank-check --supernet {SN} --out {W}/rc4 --reuse {BROKEN_JSON}",
      "write it again: lvsearch rank-check --supernet SUPERNET --out FOLDER"),
    C("rank-check-landscape-broken-json", "rank-check --supernet {SN} --archs 3 --steps 2 --out {W}/rc5 "
      "--landscape {BROKEN_JSON}", "write it again: python benchmarks/landscape.py --report"),
    C("rank-check-reuse-bomb", "rank-check --supernet {SN} --out {W}/b3 --reuse {BOMB}", "{BOMB} nests deeper"),
    C("arch-show-bomb", "arch show {BOMB}", "{BOMB} nests deeper"),
    # numbers out of range, refused at parse time
    C("evolve-min-params-overflow", "evolve --supernet {SN} --out {W}/n1 --min-params 1e999",
      "--min-params: '1e999' is not a finite number"),
    C("evolve-max-flops-overflow", "evolve --supernet {SN} --out {W}/n2 --max-flops 1e999",
      "--max-flops: '1e999' is not a finite number"),
    C("evolve-cache-mb-nan", "evolve --supernet {SN} --out {W}/n3 --cache-mb nan", "--cache-mb: 'nan' is not a finite"),
    C("evolve-mutation-prob-above-one", "evolve --supernet {SN} --out {W}/n4 --mutation-prob 1.5",
      "--mutation-prob: '1.5' is outside [0, 1]"),
    C("evolve-budget-negative", "evolve --supernet {SN} --out {W}/n5 --budget -5", "--budget"),
    C("evaluate-lr-inf", "evaluate --model {MODEL} --no-blimp --task {TASK} --out {W}/n6.json --lr inf",
      "--lr: 'inf' is not a finite number"),
    C("evaluate-max-len-one", "evaluate --model {MODEL} --no-blimp --task {TASK} --out {W}/n7.json --max-len 1",
      "--max-len: must be ≥ 3"),
    C("scaling-holdout-one", "scaling fit {RT}/curve.jsonl --holdout-frac 1", "--holdout-frac: '1' is outside [0, 1)"),
    C("quickstart-minutes-huge", "quickstart --minutes 1e9 --out {W}/n8", "--minutes 1e+09 is above 10,080"),
    C("prepare-dev-fraction-zero", "data prepare --input {THESIS} --out {W}/n9 --dev-fraction 0",
      "--dev-fraction: '0' is outside (0, 1)"),
]


@pytest.mark.parametrize("verb", ["train-supernet", "retrain", "prepare"])
def test_overwrite_never_deletes_the_folder_the_user_stands_in(ws: dict[str, Path], tmp_path: Path, verb: str):
    """``cd RUN && train-supernet --out . --overwrite`` deleted the run, then failed; ``retrain
    --out ..`` and ``data prepare --out .. --overwrite`` from inside a dataset did the same."""
    import shutil

    if verb == "prepare":
        run = tmp_path / "corpus"
        shutil.copytree(ws["CORPUS"], run)
        (run / "sub").mkdir()
        cwd, argv = run / "sub", ["data", "prepare", "--input", str(ws["THESIS"]), "--out", "..", "--overwrite"]
    else:
        run = tmp_path / "run"
        shutil.copytree(ws["SN"] if verb == "train-supernet" else ws["RT"], run)
        (run / "sub").mkdir()
        out, cwd = (".", run) if verb == "train-supernet" else ("..", run / "sub")
        argv = ([verb, "--config", "quickstart"] if verb == "train-supernet" else
                [verb, "--arch", "bert", "--config", "retrain-quickstart"]) + [
            "--data", str(ws["CORPUS"]), "--out", out, "--overwrite", *_sets(RETRAIN_TINY[:1])]
    before = tree_digest(run)
    env = {**os.environ, "LVSEARCH_QUIET": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "lvsearch", *argv], capture_output=True, text=True, timeout=300,
                          env=env, cwd=cwd)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "the folder you are working in" in " ".join(proc.stderr.split())
    assert tree_digest(run) == before


def _fill(text: str, ws: dict[str, Path]) -> str:
    for k in sorted(ws, key=len, reverse=True):
        text = text.replace("{" + k + "}", str(ws[k]))
    return text


def test_the_suite_has_enough_distinct_cases():
    assert len({c.id for c in CASES}) == len(CASES) >= 40
    assert len({c.argv[0] if c.argv[0] not in ("data", "arch", "scaling") else " ".join(c.argv[:2])
                for c in CASES}) >= 12  # every verb


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_one_message_exit_2_nothing_touched(ws: dict[str, Path], case: Case):
    argv = [_fill(a, ws) for a in case.argv]
    if any("{HF_" in a for a in argv):
        pytest.skip("transformers is not installed (no Hugging Face folders in the workspace)")
    if case.id.endswith("-slurm-without-sbatch") and shutil.which("sbatch"):
        pytest.skip("sbatch is installed here (a real Slurm: tests/test_slurm.py covers --executor slurm)")
    before = {k: tree_digest(p) for k, p in ws.items() if p.is_dir()}
    proc = cli(*argv)
    err = proc.stderr
    assert proc.returncode == 2, f"exit {proc.returncode}\n{err[-3000:]}"
    assert "Traceback" not in err and "Traceback" not in proc.stdout, err[-3000:]
    assert _fill(case.expect, ws) in " ".join(err.split()) or _fill(case.expect, ws) in err, err[-3000:]
    assert err.count("lvsearch: error:") + err.count("error:") >= 1, err
    after = {k: tree_digest(p) for k, p in ws.items() if p.is_dir()}
    for k in before:
        assert after[k] == before[k], f"{case.id} changed files under {ws[k]}"


# ---------------------------------------------------------------- kill-and-resume matrix
def _weights_digest(run: Path) -> dict[str, str]:
    """sha256 of every tensor of the final checkpoint and of the model directory's weights."""
    latest = json.loads((run / "checkpoints" / "latest.json").read_text())
    ck = run / "checkpoints" / latest["dir"]
    out = {f"ckpt:{latest['dir']}/{n}": hashlib.sha256((ck / n).read_bytes()).hexdigest()
           for n in ("model.safetensors", "optimizer.safetensors") if (ck / n).is_file()}
    if (run / "model" / "model.safetensors").is_file():
        out["model"] = hashlib.sha256((run / "model" / "model.safetensors").read_bytes()).hexdigest()
    return out


def _metrics_lines(run: Path, name: str) -> list[dict]:
    """``metrics.jsonl``/``curve.jsonl`` records without wall-clock fields."""
    lines = []
    for line in (run / name).read_text().splitlines():
        rec = json.loads(line)
        for k in ("elapsed_s", "tokens_per_s", "seconds"):
            rec.pop(k, None)
        if isinstance(rec.get("eval"), dict):
            rec["eval"] = {k: v for k, v in rec["eval"].items() if not k.endswith("seconds")}
        lines.append(rec)
    return lines


def _summary_core(run: Path) -> dict:
    s = json.loads((run / "summary.json").read_text())
    return {k: s[k] for k in ("steps", "final_eval", "floors", "beats_floor") if k in s}


def _train_outcome(run: Path) -> dict:
    model_config = run / "model" / "config.json"  # a retrain's model directory records what --arch named
    return {"weights": _weights_digest(run), "metrics": _metrics_lines(run, "metrics.jsonl"),
            "summary": _summary_core(run), "stale_temps": sorted(p.name for p in (run / "checkpoints").glob(".step-*")),
            "arch_source": json.loads(model_config.read_text())["extra"]["arch_source"] if model_config.is_file() else None}


def _kill_then_resume(argv: list[str], resume_argv: list[str], point: str, run: Path) -> None:
    proc = cli(*argv, kill_at=point)
    assert proc.returncode == -signal.SIGKILL, f"{point}: not killed (exit {proc.returncode})\n{proc.stderr[-2000:]}"
    proc = cli(*resume_argv)
    assert proc.returncode == 0, f"resume after {point}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr


import signal  # noqa: E402

KILLS = ["step:{k}", "checkpoint-write:8", "before-summary"]  # a random step, mid-checkpoint, before the summary


@pytest.mark.parametrize("verb", ["train-supernet", "retrain"])
def test_kill_and_resume_matrix_training(prepared_corpus: Path, tmp_path: Path, verb: str):
    rng = random.Random(f"kill-{verb}")
    if verb == "train-supernet":
        base = ["train-supernet", "--config", "quickstart", "--data", str(prepared_corpus), *_sets(SN_SETS)]
    else:
        base = ["retrain", "--arch", "random:3", "--config", "retrain-quickstart", "--data", str(prepared_corpus),
                *_sets(RT_SETS)]
    ref = tmp_path / "ref"
    proc = cli(*base, "--out", str(ref))
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = _train_outcome(ref)
    assert want["arch_source"] == (None if verb == "train-supernet" else "random:3")
    for point in KILLS:
        point = point.format(k=rng.randint(1, 11))
        run = tmp_path / point.replace(":", "-")
        _kill_then_resume([*base, "--out", str(run)], [verb, "--data", str(prepared_corpus), "--out", str(run),
                                                        "--resume"], point, run)
        got = _train_outcome(run)
        assert got == want, f"{verb} killed at {point} and resumed differs from the uninterrupted run"
    # a resume of the finished run changes nothing
    snap = snapshot(run)
    proc = cli(verb, "--data", str(prepared_corpus), "--out", str(run), "--resume")
    assert proc.returncode == 0 and "already finished" in " ".join(proc.stderr.split())
    assert snapshot(run) == snap


def _search_outcome(out: Path) -> dict:
    return {n: (out / n).read_bytes() for n in ("state.json", "history.jsonl", "topk.json", "best.json")}


def test_kill_and_resume_matrix_evolve(ws: dict[str, Path], tmp_path: Path):
    base = ["evolve", "--supernet", str(ws["SN"]), *SEARCH_ARGS, "--compare-random"]
    ref = tmp_path / "ref"
    assert cli(*base, "--out", str(ref)).returncode == 0
    want = {"ea": _search_outcome(ref), "random": _search_outcome(ref / "random")}
    rng = random.Random("kill-evolve")
    for point in (f"search-save:{rng.randint(1, 2)}", "search-save:3"):  # mid-search and at the last save
        out = tmp_path / point.replace(":", "-")
        _kill_then_resume([*base, "--out", str(out)], [*base, "--out", str(out), "--resume"], point, out)
        got = {"ea": _search_outcome(out), "random": _search_outcome(out / "random")}
        diff = {(arm, n) for arm in want for n in want[arm] if got[arm][n] != want[arm][n]}
        assert got == want, f"evolve killed at {point} and resumed differs in {sorted(diff)}"


def test_kill_and_resume_matrix_few_shot_part(ws: dict[str, Path], prepared_corpus: Path, tmp_path: Path):
    """A few-shot part checkpoints on its one-shot's schedule (SN_SETS: every 4 steps; it wrote
    none before its last step), so a kill mid-part, inside its final checkpoint write or before
    its summary resumes to the uninterrupted part's weights, metrics and summary, no temporary
    folder left."""
    base = ["train-supernet", "--few-shot-from", str(ws["SN"]), "--op", "SA", "--steps", "10",
            "--data", str(prepared_corpus)]
    ref = tmp_path / "ref"
    proc = cli(*base, "--out", str(ref))
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = _train_outcome(ref)
    assert sorted(p.name for p in (ref / "checkpoints").glob("step-*")) == ["step-0000008", "step-0000010"]
    for point in (f"step:{random.Random('kill-few-shot').randint(5, 7)}", "checkpoint-write:10", "before-summary"):
        run = tmp_path / point.replace(":", "-")
        _kill_then_resume([*base, "--out", str(run)], ["train-supernet", "--data", str(prepared_corpus), "--out",
                                                        str(run), "--resume"], point, run)
        assert _train_outcome(run) == want, f"few-shot part killed at {point} and resumed differs"


def test_kill_and_resume_second_stage(ws: dict[str, Path], tmp_path: Path):
    """A kill while the second stage fine-tunes a candidate (after the search finished):
    ``evolve --resume`` re-ranks to the uninterrupted run's second_stage.json and best.json."""
    base = ["evolve", "--supernet", str(ws["SN"]), *SEARCH_ARGS, "--second-stage", "finetune", "--second-stage-k", "2",
            "--second-stage-steps", "4"]

    def outcome(out: Path) -> dict:
        rec = json.loads((out / "second_stage.json").read_text())
        rec.pop("seconds", None)
        return {"second_stage": rec, **_search_outcome(out)}

    ref = tmp_path / "ref"
    proc = cli(*base, "--out", str(ref))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "killed"
    _kill_then_resume([*base, "--out", str(out)], [*base, "--out", str(out), "--resume"], "step:3", out)
    assert outcome(out) == outcome(ref)


def _finalists_outcome(out: Path) -> dict:
    state = json.loads((out / "finalists.json").read_text())

    def strip(obj):
        if isinstance(obj, dict):
            return {k: strip(v) for k, v in obj.items() if k not in ("seconds", "started", "finished")}
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        return obj

    runs = {p.name: _weights_digest(p) for p in sorted((out / "finalists").iterdir())}
    best = (out / "best.json").read_text().replace(str(out), "OUT")  # it names the pick's model folder
    return {"state": json.loads(json.dumps(strip(state)).replace(str(out), "OUT")), "runs": runs, "best": best}


def test_kill_and_resume_matrix_finalists(ws: dict[str, Path], prepared_corpus: Path, tmp_path: Path):
    sets = _sets([*RETRAIN_TINY, "train.warmup_steps=2", "train.eval_every=2", "train.checkpoint_every=4"])
    base = ["retrain", "--arch", str(ws["SEARCH"] / "topk.json"), "--finalists", "2", "--budget", "16",
            "--pruning", "current-loss", "--config", "retrain-quickstart", "--data", str(prepared_corpus), *sets]
    ref = tmp_path / "ref"
    proc = cli(*base, "--out", str(ref))
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = _finalists_outcome(ref)
    for point in ("step:5", "checkpoint-write:16", "finalists-round:1", "before-summary"):
        out = tmp_path / point.replace(":", "-")
        _kill_then_resume([*base, "--out", str(out)], [*base, "--out", str(out)], point, out)
        assert _finalists_outcome(out) == want, f"finalists killed at {point} and re-run differs"


def _quickstart_outcome(out: Path) -> dict:
    """What a quickstart produced, without wall-clock fields: every arm's weights, the searches'
    top-k, the finalists' decisions (when the plan has them), the evaluation results."""
    arms = tuple(json.loads((out / "quickstart.json").read_text())["plan"]["arms"])
    got = {"weights": {a: hashlib.sha256((out / "retrain" / a / "model" / "model.safetensors").read_bytes()).hexdigest()
                       for a in arms},
           "topk": [(out / p / "topk.json").read_bytes() for p in ("search", "search/random")]}
    if (out / "finalists" / "finalists.json").exists():
        fin = json.loads((out / "finalists" / "finalists.json").read_text())
        got["finalists"] = [(r["alive"], r["decision"]["kept"]) for r in fin["rounds"]] + [fin["final"]["pick"]]
    got["mlm"] = {a: json.loads((out / "eval" / f"{a}.json").read_text())["mlm"]["accuracy"] for a in arms}
    return got


def test_kill_and_resume_matrix_quickstart(prepared_corpus: Path, corpora: Path, tmp_path: Path):
    from test_quickstart import MINUTES, _recipes

    recipes = _recipes(tmp_path)
    base = ["quickstart", "--data", str(corpora), "--minutes", MINUTES, "--supernet-config", recipes[0],
            "--retrain-config", recipes[1], "--no-blimp"]
    ref = tmp_path / "ref"
    proc = cli(*base, "--out", str(ref))
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = _quickstart_outcome(ref)
    # a random supernet step, mid-checkpoint of the first 48-step retrain, between a stage's end and its record
    for point in (f"step:{random.Random('kill-qs').randint(1, 39)}", "checkpoint-write:48", "quickstart-stage:search"):
        out = tmp_path / point.replace(":", "-")
        _kill_then_resume([*base, "--out", str(out)], [*base, "--out", str(out)], point, out)
        assert _quickstart_outcome(out) == want, f"quickstart killed at {point} and re-run differs"


# ---------------------------------------------------------------- item-level regressions
def test_retrain_takes_the_space_recorded_in_the_arch_file(ws: dict[str, Path]):
    """Item 11: README step 4 (`retrain --arch best.json --config retrain-quickstart`) on a search
    over an lvbert-elc supernet; the recipe says `space: lvbert`."""
    best = json.loads((ws["SEARCH"] / "best.json").read_text())
    rc = json.loads((ws["RT"] / "config.json").read_text())
    assert best["space"].startswith("lvbert-elc") and rc["config"]["space"] == best["space"]
    assert json.loads((ws["SEARCH"] / "topk.json").read_text())["space"] == best["space"]


def test_environment_and_fingerprint_are_recorded(ws: dict[str, Path]):
    """Item 10: every run/search folder says what bit-reproducibility depends on."""
    from lvsearch.repro import BIT_RELEVANT

    for key in ("SN", "SEARCH", "RT"):
        env = json.loads((ws[key] / "environment.json").read_text())
        assert set(BIT_RELEVANT) <= set(env["started"]) and env["started"]["threads"] >= 1
    summary = json.loads((ws["RT"] / "summary.json").read_text())
    assert summary["weights_sha256"] == hashlib.sha256((ws["MODEL"] / "model.safetensors").read_bytes()).hexdigest()
    sn = json.loads((ws["SN"] / "summary.json").read_text())
    assert sn["weights_sha256"] == hashlib.sha256(
        (ws["SN"] / "checkpoints" / "step-0000012" / "model.safetensors").read_bytes()).hexdigest()


def test_resume_in_another_environment_warns(tmp_path: Path, capsys, monkeypatch):
    from lvsearch import repro

    repro.record_environment(tmp_path, "cpu", resume=False)
    real = repro.environment
    monkeypatch.setattr(repro, "environment", lambda device=None: {**real(device), "threads": 97})
    diffs = repro.record_environment(tmp_path, "cpu", resume=True)
    assert any(d.startswith("threads:") and d.endswith("→ 97") for d in diffs)
    assert "not bit for bit" in printed(capsys)
    rec = json.loads((tmp_path / "environment.json").read_text())
    assert len(rec["resumes"]) == 1 and rec["resumes"][0]["threads"] == 97
    older = {k: v for k, v in rec["started"].items() if k not in ("cpu_model", "cpu_capability")}
    assert repro.bit_differences(older, {**rec["started"], "cpu_model": "another"}) == []  # unknown then
    assert repro.bit_differences(rec["started"], {**rec["started"], "cpu_model": "another"}) == [
        f"cpu_model: {rec['started']['cpu_model']} → another"]


def test_a_damaged_environment_record_is_replaced_on_resume_and_refused_by_the_fingerprint(tmp_path: Path):
    """environment.json read through its schema: on resume a record with fields of the wrong type
    is replaced (it only informs; ``resumes`` as a string was an AttributeError), and the quickstart
    report's fingerprint names the file and the field."""
    from lvsearch import repro
    from lvsearch.quickstart.fingerprint import fingerprint_section

    repro.record_environment(tmp_path, "cpu", resume=False)
    rec = json.loads((tmp_path / "environment.json").read_text())
    (tmp_path / "environment.json").write_text(json.dumps({**rec, "resumes": "twice"}))
    with pytest.raises(LvsearchError, match=r"environment record .*environment.json is malformed: field resumes"):
        fingerprint_section(tmp_path, {})
    assert repro.record_environment(tmp_path, "cpu", resume=True) == []
    again = json.loads((tmp_path / "environment.json").read_text())
    assert again["format"] == repro.FORMAT and again["resumes"] == []  # the damaged record was replaced


def test_evaluate_defaults_to_the_models_training_dev_set():
    """Item 7: `evaluate --mlm-data` scores on the dev set the model was trained and searched with."""
    import argparse

    from lvsearch.eval.job import mlm_dev_settings

    class Data:
        seq_len = 128

    none = argparse.Namespace(dev_seq_len=None, dev_sequences=None, dev_seed=None)
    ta = {"train": {"seq_len": 64}, "eval": {"dev_sequences": 96, "seed": 7}}
    got = mlm_dev_settings(none, ta, Data())
    assert (got["seq_len"], got["num_sequences"], got["seed"]) == (64, 96, 7)
    assert "model's training dev set" in got["source"]
    given = argparse.Namespace(dev_seq_len=32, dev_sequences=None, dev_seed=None)
    assert mlm_dev_settings(given, ta, Data())["seq_len"] == 32
    assert mlm_dev_settings(none, {}, Data())["seq_len"] == 128  # a foreign model: the dataset's


def test_imbalanced_tasks_select_epochs_by_macro_f1():
    """Item 9: accuracy only where classes are balanced; the table says which F1. (Issue 60:
    imbalanced tasks, binary ones included, select and meet the floor on macro F1; it was MCC for
    binary and the multi-class f1, the same macro F1, before.)"""
    from lvsearch.eval.finetune_metrics import metric_label, primary_metric

    assert primary_metric("classification", [0, 1] * 50, 2) == "accuracy"
    assert primary_metric("classification", [0] * 80 + [1] * 20, 2) == "macro_f1"
    assert primary_metric("classification", [0] * 60 + [1] * 20 + [2] * 20, 3) == "macro_f1"
    assert primary_metric("classification", [0, 1, 2] * 30, 3) == "accuracy"
    assert primary_metric("regression", [0.1, 0.5], None) == "pearson"
    assert metric_label("f1", 3) == "f1 (macro over 3 classes)"
    assert metric_label("f1", 2, ["neg", "pos"]) == "f1 (binary, positive class 1 = pos)"


def test_costly_steps_warn(capsys):
    """Item 9: settings that make one step huge are accepted with a warning."""
    from types import SimpleNamespace

    from lvsearch.train.run import check_step_memory

    cfg = SimpleNamespace(train=SimpleNamespace(seq_len=1024, batch_size=32), model=SimpleNamespace(heads=4), num_slots=12)
    check_step_memory(cfg, SimpleNamespace(seq_len=128))
    text = printed(capsys)
    assert "train.seq_len=1024" in text and "GB per step" in text
    huge = SimpleNamespace(train=SimpleNamespace(seq_len=100000, batch_size=32), model=SimpleNamespace(heads=4), num_slots=12)
    with pytest.raises(LvsearchError, match="more than this machine's"):  # it could only fail, minutes later
        check_step_memory(huge, SimpleNamespace(seq_len=128))
    check_step_memory(SimpleNamespace(train=SimpleNamespace(seq_len=128, batch_size=32), model=SimpleNamespace(heads=4),
                                     num_slots=12), SimpleNamespace(seq_len=128))
    assert "warning" not in printed(capsys)
    # a recipe's `model` section is a dict: its heads count (it was read as 1)
    from lvsearch.config import RetrainConfig, load_config
    from lvsearch.train.run import step_attention_bytes

    quick, _ = load_config(RetrainConfig, "retrain-quickstart", [])
    assert step_attention_bytes(quick) == 32 * 2 * 64 * 64 * 4 * 2 * 12  # batch, 2 heads, L², fp32, ×2, slots
    small, _ = load_config(RetrainConfig, "retrain-small", [])  # heads from the named size (4)
    assert step_attention_bytes(small) == 128 * 4 * 128 * 128 * 4 * 2 * 24


def test_progress_off_a_terminal_prints_plain_lines():
    """Item 11: a log file gets periodic, unwrapped progress lines, not a bar at the end."""
    import io

    from rich.console import Console

    from lvsearch.ui import LineProgress

    buf = io.StringIO()
    bar = LineProgress(console=Console(file=buf, width=40), every=0.0)
    task = bar.add_task("supernet training with a long name", total=1500, info="")
    bar.update(task, completed=450, info="loss 5.2")
    bar.update(task, completed=1500, info="loss 4.9")
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("[progress] supernet training with a long name: 450/1,500 (30%) · loss 5.2")
    assert "ETA" in lines[0] and lines[-1].startswith("[progress] supernet training with a long name: 1,500/1,500 (100%)")
    assert len(lines) == 2  # unwrapped at width 40, and the finished task prints once


def test_arch_show_without_supernet_uses_recorded_size(ws: dict[str, Path]):
    proc = cli("arch", "show", str(ws["SEARCH"] / "best.json"))
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    assert "recorded in" in out and "pass --supernet" not in out


def test_a_stray_label_warns(shared_data: Path, tmp_path: Path, capsys):
    """One `positive` among 8,530 `0`/`1` labels silently made sentence_polarity 3-class."""
    from lvsearch.eval.tasks import load_task_folder

    task = tmp_path / "task"
    shutil.copytree(shared_data / "tasks" / "sentence_polarity", task)
    lines = (task / "train.tsv").read_text(encoding="utf-8").splitlines()
    lines[5] = lines[5].rsplit("\t", 1)[0] + "\tpositive"
    (task / "train.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert load_task_folder(task).label_names == ["0", "1", "positive"]
    text = printed(capsys)
    assert "label 'positive' occurs 1 time(s)" in text and "line 6" in text
    load_task_folder(shared_data / "tasks" / "sentence_polarity")
    assert "warning" not in printed(capsys)


def test_the_undamaged_report_renders(ws: dict[str, Path], tmp_path: Path):
    """The damaged reports' rows fail for their edit: the same report unedited renders (exit 0)."""
    r = cli("report", str(ws["REPORT_OK"]), "--out", str(tmp_path / "rep"))
    assert r.returncode == 0, r.stderr
    assert "MLM dev accuracy" in (tmp_path / "rep" / "report.md").read_text()


def test_report_checks_survive_python_O(ws: dict[str, Path], tmp_path: Path):
    """Validation never rests on ``assert`` (``python -O`` strips it): a damaged report is
    refused the same with -O, and no package module validates with assert."""
    env = {**os.environ, "LVSEARCH_QUIET": "1", "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-O", "-m", "lvsearch", "report", str(ws["REPORT_NO_FOLDER"]), "--out",
                        str(tmp_path / "rep")], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert r.returncode == 2 and "field model.folder is missing" in r.stderr and "Traceback" not in r.stderr
    asserts = [f"{p.relative_to(REPO)}:{i}" for p in sorted((REPO / "lvsearch").rglob("*.py"))
               for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if line.lstrip().startswith("assert ")]
    assert asserts == [], asserts


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS])
def test_a_full_disk_names_the_file_and_keeps_the_old_one(tmp_path: Path, monkeypatch, code: int):
    """'cannot access: No space left on device' named no file: a write that fails names the
    file being written and the fix, leaves no temporary file and the previous version intact."""
    from lvsearch.io import atomic_write_json

    target = tmp_path / "state.json"
    target.write_text('{"old": true}\n')

    def full(fd):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(LvsearchError) as err:
        atomic_write_json(target, {"new": True})
    msg = str(err.value)
    assert f"cannot write {target}: " in msg and os.strerror(code) in msg and "fix: " in msg
    assert "another --out" in msg
    assert target.read_text() == '{"old": true}\n' and sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_full_disk_in_a_copy_or_a_weights_file_names_the_file_written(tmp_path: Path, monkeypatch):
    """A copy (the run's tokenizer.json) named the file it read; safetensors' own error for a
    full disk ('I/O error: ... (os error 28)') named none."""
    import shutil

    import safetensors.torch
    from safetensors import SafetensorError

    from lvsearch.io import copy_file, save_safetensors

    src = tmp_path / "src.json"
    src.write_text("{}")

    def full_copy(a, b, *args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(a))

    monkeypatch.setattr(shutil, "copyfile", full_copy)
    with pytest.raises(LvsearchError, match=f"cannot write {tmp_path}/dst.json: the disk is full"):
        copy_file(src, tmp_path / "dst.json")

    def full_save(*args, **kwargs):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    monkeypatch.setattr(safetensors.torch, "save_file", full_save)
    with pytest.raises(LvsearchError, match=f"cannot write {tmp_path}/w.safetensors: the disk is full"):
        save_safetensors({"a": torch.zeros(2)}, tmp_path / "w.safetensors")


def test_a_full_disk_during_a_verb_is_one_message_naming_the_file(ws: dict[str, Path], tmp_path: Path, monkeypatch,
                                                                  capsys):
    """The same through the CLI (``report`` writing its heatmap): exit 2, the file named."""
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    out = tmp_path / "rep"
    assert main(["report", str(ws["REPORT_OK"]), "--out", str(out)]) == 2
    text = printed(capsys)
    assert f"cannot write {out}/alpha_" in text and "the disk is full" in text and "df -h" in text
    assert not out.exists() or not any(out.iterdir())


def test_task_fields_longer_than_csvs_default_limit_are_read(tmp_path: Path):
    """A 200,000-character text was a _csv.Error traceback (Python's default limit is 131,072);
    fields up to MAX_FIELD_CHARS are read whole, and the csv module's limit is left as it was."""
    import csv

    from lvsearch.eval.tasks import MAX_FIELD_CHARS, load_task_folder

    task = tmp_path / "task"
    task.mkdir()
    long = "x" * 200_000
    (task / "train.tsv").write_text(f"sentence\tlabel\n{long}\t0\nshort\t1\n", encoding="utf-8")
    (task / "dev.tsv").write_text("sentence\tlabel\na\t0\nb\t1\n", encoding="utf-8")
    before = csv.field_size_limit()
    data = load_task_folder(task)
    assert data.splits["train"][0].a == long and MAX_FIELD_CHARS > 200_000
    assert csv.field_size_limit() == before


# ---------------------------------------------------------------- text files in other encodings
def _finetune_scores(report: Path) -> list:
    """The fine-tuning results of a report without timings (one task)."""
    def strip(obj):
        if isinstance(obj, dict):
            return {k: strip(v) for k, v in obj.items() if "seconds" not in k and k not in ("source", "name", "task")}
        if isinstance(obj, list):
            return [strip(v) for v in obj]
        return obj

    (task,) = json.loads(report.read_text())["finetune"].values()
    return strip(task)


def test_a_bom_task_file_evaluates_exactly_as_without(ws: dict[str, Path]):
    """Spreadsheet programs save a UTF-8 byte-order mark; it was read into the first column's name."""
    assert (ws["TASK_BOM"] / "train.tsv").read_bytes().startswith(b"\xef\xbb\xbf")
    scores = []
    for key in ("TASK", "TASK_BOM"):
        out = ws["W"] / f"ev-{key.lower()}.json"
        proc = cli("evaluate", "--model", str(ws["MODEL"]), "--no-blimp", "--task", str(ws[key]), "--epochs", "1",
                   "--seeds", "1", "--out", str(out))
        assert proc.returncode == 0, proc.stderr[-3000:]
        scores.append(_finetune_scores(out))
    seed = scores[0]["per_seed"][0]  # the same dev scores and the same training loss, to the last bit
    assert seed["dev"]["accuracy"] is not None and seed["train_loss_per_epoch"], seed
    assert scores[0] == scores[1], scores


def test_every_text_reader_takes_a_bom_and_names_other_encodings(ws: dict[str, Path], tmp_path: Path):
    """Recipes, search spaces, architecture JSON, BLiMP JSONL and corpus files read with a leading
    UTF-8 byte-order mark exactly as without; UTF-16 gets one message naming the encoding and the fix."""
    from lvsearch.arch import Arch
    from lvsearch.config import SupernetConfig, load_config
    from lvsearch.data.sources import TextFileSource, check_text_file
    from lvsearch.eval.blimp import read_blimp
    from lvsearch.space import SearchSpace

    def bom(src: Path, name: str, encoding: str = "utf-8-sig") -> Path:
        dst = tmp_path / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(src.read_text(encoding="utf-8").encode(encoding))
        return dst

    recipe = REPO / "recipes" / "quickstart.yaml"
    assert load_config(SupernetConfig, str(bom(recipe, "r.yaml")))[0] == load_config(SupernetConfig, str(recipe))[0]
    space = REPO / "search_spaces" / "lvbert.yaml"
    assert SearchSpace.load(bom(space, "lvbert.yaml")).to_dict() == SearchSpace.load(space).to_dict()
    best = ws["SEARCH"] / "best.json"
    assert Arch.from_json(bom(best, "best.json")) == Arch.from_json(best)
    blimp = min((REPO.parent / "shared" / "data" / "blimp").glob("*.jsonl"))
    bom(blimp, f"blimp/{blimp.name}")
    bom(blimp, f"blimp-plain/{blimp.name}", "utf-8")
    assert (tmp_path / "blimp" / blimp.name).read_bytes().startswith(b"\xef\xbb\xbf")
    assert read_blimp(tmp_path / "blimp", limit=5)[0].pairs == read_blimp(tmp_path / "blimp-plain", limit=5)[0].pairs
    text = tmp_path / "plain.train"
    text.write_text("A first line.\nA second one.\n", encoding="utf-8")
    marked = bom(text, "marked.train")
    docs = [list(TextFileSource(p, "train", check_text_file(p)).documents()) for p in (text, marked)]
    assert check_text_file(marked).problem is None and docs[0] == docs[1]

    assert check_text_file(bom(text, "wide.train", "utf-16")).problem == "UTF-16LE text, not UTF-8"
    with pytest.raises(LvsearchError, match=r"r16\.yaml is UTF-16LE text \(byte-order mark\), not UTF-8") as err:
        load_config(SupernetConfig, str(bom(recipe, "r16.yaml", "utf-16")))
    assert "iconv -f UTF-16 -t UTF-8 r16.yaml" in str(err.value)
    with pytest.raises(LvsearchError, match=r"best16\.json is UTF-16BE text \(zero bytes between the letters\)"):
        Arch.from_json(bom(best, "best16.json", "utf-16-be"))


def test_messages_show_invisible_characters(tmp_path: Path):
    """A tab, a control character or a byte-order mark quoted from the user's data is printed
    as an escape, in errors and warnings alike."""
    import io

    from rich.console import Console

    from lvsearch import ui
    from lvsearch.io import shown
    from lvsearch.ui import escape_invisible

    assert shown("\ufeffsentence") == "'\\ufeffsentence'" and shown("a\tb") == "'a\\tb'"
    assert escape_invisible("line one\nbad\x1b[31m name\u200b") == "line one\nbad\\x1b[31m name\\u200b"
    folder = tmp_path / "odd\tname"
    folder.mkdir()
    proc = cli("evaluate", "--model", str(folder), "--no-blimp", "--out", str(tmp_path / "r.json"))
    assert proc.returncode == 2 and "odd\\tname" in proc.stderr and "odd\tname" not in proc.stderr, proc.stderr
    buf = io.StringIO()
    real = ui.console
    try:
        ui.console = Console(file=buf, width=200)
        ui.warn("label 'x\u200b' [sic]")
    finally:
        ui.console = real
    assert "label 'x\\u200b' [sic]" in buf.getvalue()


# ---------------------------------------------------------------- export: replacing a folder
def _export_cli(cwd: Path, *argv: str, kill_at: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "LVSEARCH_QUIET": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    env.pop("LVSEARCH_KILL_AT", None)
    if kill_at:
        env["LVSEARCH_KILL_AT"] = kill_at
    return subprocess.run([sys.executable, "-m", "lvsearch", "export", *argv], check=False, capture_output=True, text=True,
                          timeout=300, env=env, cwd=cwd)


def test_export_killed_between_its_renames_keeps_the_old_export(ws: dict[str, Path], tmp_path: Path):
    """A kill after the old --out was moved aside and before the new one was moved in left --out
    absent and the old export in a .NAME.*.old folder, which the next export deleted."""
    pytest.importorskip("transformers")
    out, model = tmp_path / "ex", str(ws["MODEL"])
    assert _export_cli(tmp_path, "--model", model, "--out", str(out)).returncode == 0
    (out / "note.txt").write_text("the user's own file\n")
    first = tree_digest(out)
    proc = _export_cli(tmp_path, "--model", model, "--out", str(out), "--overwrite", kill_at="replace-folder")
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists() and [p.name for p in tmp_path.glob(".ex.*.old")]
    # the next export, without --overwrite: the old export is moved back, then refused as not empty
    proc = _export_cli(tmp_path, "--model", model, "--out", str(out))
    assert proc.returncode == 2 and "restored its previous contents" in proc.stderr and "not empty" in proc.stderr
    assert "Traceback" not in proc.stderr and tree_digest(out) == first and not list(tmp_path.glob(".ex.*.old"))
    # with --overwrite: replaced, and no leftover of either write
    proc = _export_cli(tmp_path, "--model", model, "--out", str(out), "--overwrite")
    assert proc.returncode == 0, proc.stderr
    assert not (out / "note.txt").exists() and (out / "config.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ex"]


@pytest.mark.parametrize("given", [".", "", "..", "../here"])
def test_export_out_naming_the_working_folder_is_refused_before_any_rename(ws: dict[str, Path], tmp_path: Path,
                                                                           given: str):
    pytest.importorskip("transformers")
    here = tmp_path / "top" / "here"
    here.mkdir(parents=True)
    (here / "keep.txt").write_text("mine\n")
    before = tree_digest(tmp_path)
    for extra in ((), ("--overwrite",)):
        proc = _export_cli(here, "--model", str(ws["MODEL"]), "--out", given, *extra)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "current folder" in proc.stderr and "it cannot be replaced" in proc.stderr, proc.stderr
        assert tree_digest(tmp_path) == before  # no '..*.old' folder, nothing moved


# ---------------------------------------------------------------- evolve: size band, progress
def test_a_band_inside_the_size_range_that_no_architecture_fills_ends(ws: dict[str, Path]):
    from lvsearch.train.supernet import load_supernet, sandwich_extremes

    sn = load_supernet(ws["SN"]).supernet
    lo = sn.num_params(sandwich_extremes(sn)[1])  # the smallest; parameter counts step by more than 1
    proc = cli("evolve", "--supernet", str(ws["SN"]), "--out", str(ws["W"] / "band-gap"), *SEARCH_ARGS,
               "--min-params", str(lo + 1), "--max-params", str(lo + 1), timeout=300)
    err = " ".join(proc.stderr.split())
    assert proc.returncode == 2 and "Traceback" not in err, err
    assert f"within --min-params {lo + 1:,} and --max-params {lo + 1:,}" in err
    assert "lower --min-params and/or raise --max-params" in err


def test_drawing_and_scoring_a_population_report_progress_off_a_terminal():
    """A first population of 100,000 was silent for minutes off a terminal."""
    import io

    from rich.console import Console

    from lvsearch.search.evaluator import FunctionEvaluator
    from lvsearch.search.evolution import Search, SearchConfig
    from lvsearch.ui import LineProgress

    space = SearchSpace.load("lvbert").with_num_slots(6)
    seen: list[tuple[str, int, int]] = []
    ev = FunctionEvaluator(lambda a: a.ops.count("SA") / 6)
    Search(space, ev, SearchConfig(population=12, iterations=2, topk=3),
           on_progress=lambda stage, done, total: seen.append((stage, done, total))).run()
    draws = [s for s in seen if "drawing" in s[0]]
    assert draws[0] == ("iteration 1: drawing 12 architectures", 1, 12) and draws[11][1:] == (12, 12)

    buf = io.StringIO()
    bar = LineProgress(console=Console(file=buf, width=40), every=0.0, quiet_finish=True)
    t = bar.add_task("evolution: iteration 1: scoring", total=100, info="")
    bar.update(t, completed=40)
    bar.update(t, completed=100)
    quiet = LineProgress(console=Console(file=buf, width=40), every=3600.0, quiet_finish=True)
    q = quiet.add_task("short phase", total=5, info="")
    quiet.update(q, completed=5)  # finished before its first line: prints nothing
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("[progress] evolution: iteration 1: scoring: 40/100 (40%)")


# ---------------------------------------------------------------- one writer per output
#: (verb id, argv, the output the other command holds): fresh, --resume and --overwrite, every verb that writes.
WRITERS = [
    ("train-supernet-new", "train-supernet --config quickstart --data {CORPUS} --out {W}/lk-sn", "{W}/lk-sn"),
    ("train-supernet-resume", "train-supernet --data {CORPUS} --out {SN} --resume", "{SN}"),
    ("train-supernet-overwrite", "train-supernet --config quickstart --data {CORPUS} --out {SN} --overwrite", "{SN}"),
    ("few-shot-part", "train-supernet --few-shot-from {SN} --op SA --steps 4 --data {CORPUS} --out {W}/lk-part",
     "{W}/lk-part"),
    ("retrain-resume", "retrain --data {CORPUS} --out {RT} --resume", "{RT}"),
    ("retrain-finalists", "retrain --arch {SEARCH}/topk.json --finalists 2 --budget 16 --config retrain-quickstart "
                          "--data {CORPUS} --out {W}/lk-fin", "{W}/lk-fin"),
    ("evolve-new", "evolve --supernet {SN} --out {W}/lk-ev --seed 3", "{W}/lk-ev"),
    ("evolve-resume", "evolve --supernet {SN} --out {SEARCH} --resume", "{SEARCH}"),
    ("rank-check", "rank-check --supernet {SN} --archs 3 --steps 1", "{SN}/rank_check"),
    ("quickstart", "quickstart --data {CORPUS} --out {W}/lk-qs --no-blimp", "{W}/lk-qs"),
    ("data-prepare", "data prepare --input builtin:python-docs --out {W}/lk-data", "{W}/lk-data"),
    ("export", "export --model {MODEL} --out {W}/lk-export", "{W}/lk-export"),
    ("evaluate", "evaluate --model {MODEL} --out {W}/lk-eval.json --no-blimp", "{W}/lk-eval.json"),
    ("report", "report {MODEL} --out {W}/lk-report", "{W}/lk-report"),
]


@pytest.mark.parametrize("argv,held", [w[1:] for w in WRITERS], ids=[w[0] for w in WRITERS])
def test_a_second_writer_of_one_output_is_refused(ws: dict[str, Path], argv: str, held: str):
    from lvsearch.lock import OutputLock, lock_path

    held_path = Path(_fill(held, ws))
    before = {k: tree_digest(p) for k, p in ws.items() if p.is_dir()}
    with OutputLock(held_path):  # this test process is the other command
        proc = cli(*_fill(argv, ws).split())
        assert lock_path(held_path).is_file()
    err = " ".join(proc.stderr.split())
    assert proc.returncode == 2, f"exit {proc.returncode}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr
    assert f"{held_path} is being written by another lvsearch command (pid {os.getpid()}" in err, err
    assert err.count("error:") == 1
    assert not held_path.exists() or held_path.is_dir() and any(held_path.iterdir())  # nothing made
    assert not lock_path(held_path).exists()  # the holder's release removed it
    for k in before:
        assert tree_digest(ws[k]) == before[k], f"changed files under {ws[k]}"


def _hold_in_child(out: Path) -> subprocess.Popen:
    """A process (not this one) holding the lock on ``out`` until its stdin closes."""
    code = ("import sys; from lvsearch.lock import OutputLock\n"
            "with OutputLock(sys.argv[1]):\n    print('held', flush=True); sys.stdin.read()\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert child.stdout.readline().strip() == "held"
    return child


def test_the_output_lock_refuses_a_live_holder_and_takes_over_a_dead_ones(tmp_path: Path, capsys):
    from lvsearch.lock import OutputLock, lock_path

    out = tmp_path / "runs" / "sn"  # its parent does not exist yet
    child = _hold_in_child(out)
    try:
        with pytest.raises(LvsearchError, match=rf"--out {out} is being written .*pid {child.pid} on "):
            OutputLock(out).acquire()
        assert json.loads(lock_path(out).read_text())["pid"] == child.pid  # the refusal changed nothing
    finally:
        child.stdin.close()
        child.wait()
    assert not (tmp_path / "runs").exists()  # the holder removed its lock file and the folder it made for it

    # a lock file left by a killed command (its pid is gone; nobody holds the flock): taken over with a warning
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out.parent.mkdir(parents=True)
    lock_path(out).write_text(json.dumps({"pid": dead.pid, "host": os.uname().nodename, "command": "lvsearch x"}))
    with OutputLock(out):
        assert json.loads(lock_path(out).read_text())["pid"] == os.getpid()
        with OutputLock(out):  # re-entrant in one process (a job calling a job on the same output)
            pass
        assert lock_path(out).is_file()
    assert not lock_path(out).exists()
    assert f"took over the lock {lock_path(out)} of a command that is no longer running (pid {dead.pid}" in printed(capsys)


def test_two_training_runs_into_one_folder(prepared_corpus: Path, tmp_path: Path):
    """The issue's reproduction: a second train-supernet into the folder of a running one (new,
    --overwrite, --resume) is refused; after the first is killed, --overwrite takes its stale
    lock over and trains alone."""
    from lvsearch.lock import lock_path

    run = tmp_path / "sn"
    base = ["train-supernet", "--config", "quickstart", "--data", str(prepared_corpus), *_sets(SN_SETS)]
    env = {**os.environ, "LVSEARCH_QUIET": "1", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    env.pop("LVSEARCH_KILL_AT", None)
    # the first run: many steps, so it is still training when the others start; killed below
    first = subprocess.Popen([sys.executable, "-m", "lvsearch", *base, "--out", str(run), "--set", "train.steps=100000"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    try:
        for _ in range(600):
            if (run / "checkpoints").is_dir() or first.poll() is not None:
                break
            subprocess.run(["sleep", "0.2"])
        assert first.poll() is None and json.loads(lock_path(run).read_text())["pid"] == first.pid
        for extra in ([], ["--overwrite"]):
            proc = cli(*base, "--out", str(run), *extra)
            assert proc.returncode == 2 and f"pid {first.pid}" in proc.stderr, proc.stderr[-2000:]
        proc = cli("train-supernet", "--data", str(prepared_corpus), "--out", str(run), "--resume")
        assert proc.returncode == 2 and "is being written by another lvsearch command" in " ".join(proc.stderr.split())
        assert first.poll() is None  # untouched: still training
    finally:
        first.kill()  # as a crash would: its lock file stays behind, stale
        first.wait()
    assert json.loads(lock_path(run).read_text())["pid"] == first.pid
    proc = cli(*base, "--out", str(run), "--overwrite")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"took over the lock {lock_path(run)} of a command that is no longer running (pid {first.pid}" in \
        " ".join(proc.stderr.split())
    steps = [r["step"] for r in _metrics_lines(run, "metrics.jsonl") if "eval" not in r]
    assert steps == sorted(set(steps)) and steps[-1] == 12  # one writer: each step logged once
    assert not lock_path(run).exists()


def test_nsga2_example_runs_without_racing(ws: dict[str, Path], tmp_path: Path):
    """The documented ``evolve --strategy nsga2 --max-params 5000000`` exited 2 with
    "--racing ranks a batch by one fitness" although --racing was never given (the unset default
    was truthy). NSGA-II now runs unraced by default; an explicit --racing is still refused."""
    out = tmp_path / "nsga"
    assert main(["evolve", "--supernet", str(ws["SN"]), "--out", str(out), "--strategy", "nsga2",
                 "--max-params", "5000000", *SEARCH_ARGS]) == 0
    assert (out / "best.json").is_file()
    # the front's objectives name the fitness it ranks on (the default: −loss), not "accuracy"
    assert json.loads((out / "pareto.json").read_text())["objectives"][0] == "fitness: −(mean dev MLM loss) (max)"
    assert main(["evolve", "--supernet", str(ws["SN"]), "--out", str(tmp_path / "raced"), "--strategy", "nsga2",
                 "--racing", "8", *SEARCH_ARGS]) == 2


def test_evaluate_rerun_into_the_model_folder_asks_for_overwrite(ws: dict[str, Path], tmp_path: Path, capsys):
    """The second ``evaluate --model M`` said its own
    M/results.md was "not a previous output of this command (refused with or without
    --overwrite)"; it is one: without --overwrite the message asks for it, with it the report is replaced."""
    model = tmp_path / "model"
    shutil.copytree(ws["MODEL"], model)
    argv = ["evaluate", "--model", str(model), "--no-blimp", "--mlm-data", str(ws["CORPUS"]), "--dev-sequences", "8"]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(argv) == 2
    text = printed(capsys)
    assert "already exists" in text and "--overwrite" in text and "not a previous output" not in text
    assert main([*argv, "--overwrite"]) == 0


def test_supernet_panel_lines_are_explained(prepared_corpus: Path, tmp_path: Path, capsys):
    """The console's "panel NAME: dev MLM accuracy" lines after a supernet run were
    unexplained; one line now says what the panel is."""
    assert main(["train-supernet", "--config", "quickstart", "--data", str(prepared_corpus), "--out",
                 str(tmp_path / "sn"), *_sets([*SUPERNET_TINY, "train.steps=2", "train.eval_every=0",
                                                "eval.panel=[bert]"])]) == 0
    text = printed(capsys)
    assert "panel bert: dev MLM accuracy" in text
    assert text.index("panel: the recipe's fixed reference architectures") < text.index("panel bert:")


def test_rehashed_export_edit_is_not_blamed_on_another_version(ws: dict[str, Path]):
    """An export whose modeling file and recorded sha256 were both edited said 'another lvsearch
    version exported it', with --trust-remote-code as the fix: now the message says
    the files do not match what this version writes (edited, or another version), and the fix
    is the re-export, --trust-remote-code only for a source the user trusts."""
    if "HF_EXPORT_REHASHED" not in ws:
        pytest.skip("transformers is not installed")
    from lvsearch.eval.hf import inspect_hf_source

    with pytest.raises(LvsearchError) as e:
        inspect_hf_source(f"hf:{ws['HF_EXPORT_REHASHED']}")
    msg, fix = str(e.value), e.value.fix
    assert "another lvsearch version exported it" not in msg
    assert "it was edited, its recorded sha256 with it, or another lvsearch version wrote it" in msg
    assert fix.startswith("re-export the model with this lvsearch: lvsearch export --model MODEL_DIR")
    assert "pass it only if you trust where the folder came from" in fix


def test_report_takes_a_quickstarts_folders(ws: dict[str, Path], tmp_path: Path, capsys):
    """``lvsearch report QS/retrain/ea QS/retrain/bert`` exited 2 ('has no evaluation report'):
    the quickstart writes its reports to QS/eval/NAME.json. Its arm runs and the quickstart folder
    itself are now valid sources (one column per run, named after it); a run whose report is
    not written yet is named as such."""
    qs = tmp_path / "qs"
    for name in ("ea", "bert"):
        (qs / "retrain" / name / "model").mkdir(parents=True)
    (qs / "eval").mkdir()
    (qs / "quickstart.json").write_text(json.dumps({"format": "lvsearch.quickstart/v1", "settings": {},
                                                    "plan": {"arms": ["ea", "bert"], "seeds": 1}, "stages": {}}))
    for name in ("ea", "bert"):
        (qs / "eval" / f"{name}.json").write_text(json.dumps(edited_report(ws["MODEL"])))
    for i, sources in enumerate(([qs / "retrain" / "ea", qs / "retrain" / "bert" / "model"], [qs])):
        out = tmp_path / f"rep{i}"
        assert main(["report", *map(str, sources), "--out", str(out)]) == 0, printed(capsys)
        text = (out / "report.md").read_text()
        assert f"**ea** (`{qs / 'eval' / 'ea.json'}`)" in text and f"**bert** (`{qs / 'eval' / 'bert.json'}`)" in text
        assert (out / "alpha_ea.png").is_file() and (out / "alpha_bert.png").is_file()
    (qs / "eval" / "bert.json").unlink()
    capsys.readouterr()
    assert main(["report", str(qs / "retrain" / "bert"), "--out", str(tmp_path / "rep3")]) == 2
    msg = printed(capsys)
    assert f"quickstart folder {qs / 'retrain' / 'bert'}: no evaluation report yet at {qs / 'eval' / 'bert.json'}" in msg
    assert "re-run the same 'lvsearch quickstart' command" in msg and not (tmp_path / "rep3").exists()


def test_a_search_on_an_unfinished_supernet_warns(ws: dict[str, Path], tmp_path: Path, capsys):
    """A fresh user's pass: ``evolve`` on a supernet killed (or still training) part-way exited
    0 without a word; it now warns with the step reached and how to finish the supernet."""
    sn = tmp_path / "sn"
    shutil.copytree(ws["SN"], sn)
    rec = json.loads((sn / "config.json").read_text())
    rec["config"]["train"]["steps"] *= 10  # the recipe's target is beyond the latest checkpoint
    (sn / "config.json").write_text(json.dumps(rec))
    assert main(["evolve", "--supernet", str(sn), "--out", str(tmp_path / "s"), *SEARCH_ARGS]) == 0
    text = printed(capsys)
    assert "train-supernet --resume" in text and "is at step 12 of 120" in text


def test_report_refuses_a_report_written_into_another_models_folder(ws: dict[str, Path], tmp_path: Path, capsys):
    """A fresh user's pass: ``evaluate --model A --out B/model/results.json --overwrite`` then
    ``report B`` showed A's numbers under B's name; the report in a folder must be its model's."""
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(ws["MODEL"], a)
    shutil.copytree(ws["MODEL"], b)
    rec = json.loads((b / "config.json").read_text())
    rec["lvsearch_note"] = "another model"  # any difference in the recorded model config
    (b / "config.json").write_text(json.dumps(rec))
    assert main(["evaluate", "--model", str(a), "--no-blimp", "--mlm-data", str(ws["CORPUS"]),
                 "--dev-sequences", "8"]) == 0
    shutil.copy(a / "results.json", b / "results.json")
    capsys.readouterr()
    assert main(["report", str(b), "--out", str(tmp_path / "rep")]) == 2
    text = printed(capsys)
    assert "is the evaluation of another model" in text and "Traceback" not in text
    assert not (tmp_path / "rep").exists()
    assert main(["report", str(a), "--out", str(tmp_path / "rep2")]) == 0  # its own report still renders


def test_evolve_holds_its_output_lock_while_it_searches(ws: dict[str, Path], tmp_path: Path, monkeypatch):
    """The lock is held for the whole search, not only while the options are checked (a helper
    between the decorator and ``evolve`` once took it over: a second evolve could then write the
    same folder while the first was searching)."""
    from lvsearch.lock import lock_path
    from lvsearch.search import job
    from lvsearch.search.evolution import SearchConfig

    out = tmp_path / "ev"
    held = []

    class Stop(Exception):
        pass

    def run(self, **kwargs):
        held.append(lock_path(out).is_file())
        raise Stop

    monkeypatch.setattr(job.Search, "run", run)
    with pytest.raises(Stop):
        job.evolve(job.EvolveOptions(supernet=ws["SN"], out=out, dev_sequences=8),
                   SearchConfig(population=4, iterations=1, topk=2), show_progress=False)
    assert held == [True]
    assert not lock_path(out).exists()  # released when evolve ends


def test_a_checkpoint_state_with_fields_of_the_wrong_type_is_one_clear_error(tmp_path: Path):
    """state.json read through its schema: a tensor file name with a folder part, a step as a
    string, or optimizer.safetensors without the optimizer's parameter groups (a KeyError
    traceback at load) name the file and the field."""
    from lvsearch.train.checkpoint import load_checkpoint, save_checkpoint

    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    folder = save_checkpoint(tmp_path, 1, model, opt, {})
    state = json.loads((folder / "state.json").read_text())
    pointer = tmp_path / "checkpoints" / "latest.json"
    pointer.write_text(json.dumps({"step": 1, "dir": folder.name}))  # no recorded sha256: the state is read as it is
    for edit, field in ((lambda s: s.pop("optimizer"), "'optimizer' is missing while optimizer.safetensors"),
                        (lambda s: s.update(step="1"), "field step: input should be a valid integer"),
                        (lambda s: s["files"].update({"../model.safetensors": "0" * 64}), "field files.../model")):
        bad = json.loads(json.dumps(state))
        edit(bad)
        (folder / "state.json").write_text(json.dumps(bad))
        with pytest.raises(LvsearchError, match="checkpoint state .*state.json is malformed") as e:
            load_checkpoint(folder)
        assert field in str(e.value), str(e.value)
    (folder / "state.json").write_text(json.dumps(state))
    assert load_checkpoint(folder).step == 1
