"""Every command example in a verb's ``--help`` epilog and in README.md's ``bash`` blocks runs.

The examples are extracted, not copied: an example added to an epilog or to the README is run
here too, so one that cannot run fails this test. Each runs in a fresh copy of a workspace
laid out as the examples expect (``data/corpus``, ``runs/sn``, ``runs/search``, ``runs/best``,
``hf/best``, ``../shared/data/...``) with tiny sizes: :func:`tiny` appends, per verb, the options
that shrink the work (later options win in argparse), never options that change what the
example does. The only substitutions are the README's placeholders, ``torchrun`` (this Python's
``torch.distributed.run``, at most 2 processes) and ``--device cuda`` on a machine without it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lvsearch.cli import _subparsers, build_parser, main

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

#: README placeholders -> a path of the workspace
PLACEHOLDERS = {"CORPUS": "../shared/data/corpora", "TASK_DIR": "../shared/data/tasks/sentence_polarity",
                "D": "data/corpus"}
#: arguments that need the Hugging Face hub (offline here): such an example must either run (the
#: model is in the local cache) or end in one message, exit 2, no traceback
NEEDS_HUB = ("hf:bert-base-uncased", "hf:glue:rte")

SN_TINY = ["num_slots=4", "model.hidden=32", "model.embedding=16", "model.ff_inner=64", "model.heads=2",
           "train.seq_len=32", "train.batch_size=8", "train.log_every=5", "eval.dev_sequences=32",
           "eval.batch_size=32", "train.steps=6", "train.checkpoint_every=3", "train.warmup_steps=2",
           "train.eval_every=0", "eval.panel=[bert]"]
RT_TINY = ["num_slots=4", "model.hidden=32", "model.embedding=16", "model.ff_inner=64", "model.heads=2",
           "train.seq_len=32", "train.batch_size=8", "train.log_every=5", "eval.dev_sequences=32",
           "eval.batch_size=32", "train.steps=24", "train.checkpoint_every=8", "train.warmup_steps=2",
           "train.eval_every=2"]  # 12 curve points: enough for scaling fit's M1-M4
#: a top-k of 4: the retrain examples take 4 finalists from topk.json
SEARCH_TINY = ["--population", "6", "--iterations", "2", "--topk", "4", "--crossover", "3", "--mutation", "3",
               "--dev-sequences", "16"]
#: how often a ``latency measure`` runs when its calibration is refused as too noisy (the
#: machine was busy: :func:`lvsearch.latency.predict.calibrate`) before the example is skipped
BUSY_TRIES = 3
#: the refusal's words, as the CLI prints them (whitespace collapsed)
BUSY = "the machine was probably busy"
#: reference architectures with a fixed number of slots (no num_slots=4 for them)
FIXED_DEPTH = ("lvbert-paper",)


# ------------------------------------------------------------------------ extraction
def _logical_lines(text: str) -> list[str]:
    """Lines with ``\\`` continuations joined."""
    out, buf = [], ""
    for line in text.splitlines():
        s = line.strip()
        buf = f"{buf} {s}" if buf else s
        if buf.endswith("\\"):
            buf = buf[:-1].rstrip()
            continue
        out.append(buf)
        buf = ""
    return out


def _command(line: str) -> str | None:
    """The command of an example line (a trailing ``# comment`` dropped), or None."""
    line = re.sub(r"\s+#.*$", "", line).strip()
    if re.match(r"^(lvsearch|torchrun)\s", line) and re.search(r"(^|\s)(-m\s+)?lvsearch\s", line):
        return line
    return None


def documented_examples() -> list[tuple[str, str]]:
    """``(where, command)`` of every example, deduplicated, in document order: each verb's
    ``--help`` epilog, then README.md's ``bash`` code blocks."""
    found: list[tuple[str, str]] = []
    for name, sub in _subparsers(build_parser()):
        found += [(f"{name} --help", c) for c in map(_command, _logical_lines(sub.epilog or "")) if c]
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.S):
        found += [("README.md", c) for c in map(_command, _logical_lines(block)) if c]
    seen, out = set(), []
    for where, cmd in found:
        if cmd not in seen:
            seen.add(cmd)
            out.append((where, cmd))
    return out


def test_examples_are_found():
    """The extraction itself: the examples this issue is about are among them."""
    cmds = [c for _, c in documented_examples()]
    assert "lvsearch evolve --supernet runs/sn --out runs/nsga --strategy nsga2 --max-params 5000000" in cmds
    assert any(c.startswith("torchrun ") for c in cmds)
    assert any(c.startswith("lvsearch quickstart") for c in cmds)
    assert len(cmds) >= 40


# ------------------------------------------------------------------------ tiny sizes
def _sets(values: list[str]) -> list[str]:
    return [x for v in values for x in ("--set", v)]


def _verb(argv: list[str]) -> tuple[str, ...]:
    return tuple(argv[:2]) if argv[0] in ("data", "arch", "scaling", "latency") else (argv[0],)


def tiny(argv: list[str], ws: Path) -> list[str]:
    """Options appended to an example's ``lvsearch`` argv so that it runs in seconds."""
    verb, has = _verb(argv), set(argv)
    if verb == ("data", "prepare"):
        return ["--vocab-size", "500"]
    if verb == ("train-supernet",):
        if "--resume" in has:
            return []
        if "--few-shot-from" in has:
            return ["--steps", "2"]
        return _sets(SN_TINY)
    if verb == ("retrain",):
        if "--resume" in has:
            return []
        fixed = any(argv[i + 1] in FIXED_DEPTH for i, a in enumerate(argv[:-1]) if a == "--arch")
        extra = _sets([v for v in RT_TINY if not (fixed and v.startswith("num_slots="))])
        return extra + (["--budget", "24"] if "--finalists" in has else [])
    if verb == ("evolve",):
        return [] if "--resume" in has else SEARCH_TINY
    if verb in (("latency", "measure"), ("latency", "validate")):
        return ["--repeats", "2", "--warmup", "1"] + (["--archs", "4"] if verb[1] == "validate" else ["--calibrate", "3"])
    if verb == ("evaluate",):
        if "--compare" in has:
            return []
        extra = ["--train-limit", "16", "--epochs", "1", "--dev-sequences", "16", "--blimp-limit", "2"]
        return extra + ([] if "--no-blimp" in has else ["--blimp", str(ws.parent / "shared" / "data" / "blimp")])
    if verb == ("faster",):  # the tiny supernet's width (RT_TINY) and a search of 4 x 2 per arm
        return ["--population", "4", "--iterations", "2", "--dev-sequences", "16", "--eval-dev-sequences", "16",
                "--rounds", "1", *_sets(RT_TINY)]
    if verb == ("quickstart",):
        from test_quickstart import MINUTES, _recipes

        sn, rt = _recipes(ws.parent)
        return ["--minutes", MINUTES, "--supernet-config", sn, "--retrain-config", rt,
                "--blimp", str(ws.parent / "shared" / "data" / "blimp")]
    return []


def runnable(cmd: str, ws: Path) -> tuple[list[str], bool]:
    """``(argv, torchrun)``: the example as it runs here. For a torchrun example, ``argv`` is
    the whole command line; else the argv of ``lvsearch``."""
    words = [PLACEHOLDERS.get(w, w) for w in shlex.split(cmd)]
    if words[0] == "torchrun":
        at = words.index("lvsearch")
        launcher = words[1:at - 1]  # options of torchrun, without "-m"
        for i, w in enumerate(launcher[:-1]):
            if w == "--nproc_per_node":
                launcher[i + 1] = str(min(int(launcher[i + 1]), 2))
        argv = words[at + 1:]
        argv = argv + tiny(argv, ws)
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", *launcher, "-m", "lvsearch",
                *argv], True
    argv = words[1:]
    import torch

    if not torch.cuda.is_available():
        argv = ["cpu" if a == "cuda" and argv[i - 1] == "--device" else a for i, a in enumerate(argv)]
    return argv + tiny(argv, ws), False


# ------------------------------------------------------------------------ workspace
def _slice(src: Path, dst: Path, lines: int) -> None:
    for split in ("train", "dev"):
        (dst / split).mkdir(parents=True)
        for name in ("brown", "movie_reviews"):
            text = (src / split / f"{name}.{split}").read_text(encoding="utf-8").splitlines()[:lines]
            (dst / split / f"{name}.{split}").write_text("\n".join(text) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def examples_ws(shared_data: Path, corpora: Path, small_corpus: Path, tmp_path_factory) -> Path:
    """``ROOT/ws``: what the examples read, built at tiny sizes; ``ROOT/shared/data`` is a tiny
    copy of the shared data (so ``../shared/data/...`` resolves from a case folder ``ROOT/N``)."""
    root = tmp_path_factory.mktemp("examples")
    shared = root / "shared" / "data"
    _slice(corpora, shared / "corpora", 1500)
    for task in ("sentence_polarity", "rte"):
        (shared / "tasks" / task).mkdir(parents=True)
        for split in ("train", "dev"):
            rows = (shared_data / "tasks" / task / f"{split}.tsv").read_text(encoding="utf-8").splitlines()[:17]
            (shared / "tasks" / task / f"{split}.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (shared / "blimp").mkdir()
    for f in sorted((shared_data / "blimp").glob("*.jsonl"))[:2]:
        (shared / "blimp" / f.name).write_text("".join(f.read_text(encoding="utf-8").splitlines(True)[:4]))
    ws = root / "ws"
    (ws / "data").mkdir(parents=True)
    (ws / "data" / "corpus").symlink_to(small_corpus, target_is_directory=True)
    for name in ("recipes", "search_spaces"):  # the examples run in the checkout
        (ws / name).symlink_to(REPO / name, target_is_directory=True)
    blimp = str(shared / "blimp")

    def run(*argv: str) -> None:
        assert main(list(argv)) == 0, argv

    def measure_latency(*argv: str) -> None:
        """``latency measure``, again when a busy machine's timings were refused (it times real
        runs: on a loaded CI machine a 3-architecture calibration can fit a negative time)."""
        for _ in range(BUSY_TRIES - 1):
            if main(list(argv)) == 0:
                return
        run(*argv)

    old = os.getcwd()
    os.chdir(ws)
    try:
        run("train-supernet", "--config", "quickstart", "--data", "data/corpus", "--out", "runs/sn",
            *_sets([*SN_TINY, "space=lvbert-elc"]))
        for op in ("SA", "FF", "DC"):
            run("train-supernet", "--few-shot-from", "runs/sn", "--slot", "1", "--op", op, "--steps", "2",
                "--data", "data/corpus", "--out", f"runs/part-{op}")
        # the supernet and its parts live outside ws, linked: a copy of ws is then a search on the
        # same supernet (a search records the supernet's real path, and --resume checks it)
        (root / "store").mkdir()
        for name in ("sn", "part-SA", "part-FF", "part-DC"):
            shutil.move(ws / "runs" / name, root / "store" / name)
            (ws / "runs" / name).symlink_to(root / "store" / name, target_is_directory=True)
        run("evolve", "--supernet", "runs/sn", "--out", "runs/search", *SEARCH_TINY)
        measure_latency("latency", "measure", "--supernet", "runs/sn", "--out", "runs/latency-cpu.json", "--repeats",
                        "2", "--warmup", "1", "--calibrate", "3")
        rt = ["--config", "retrain-quickstart", "--data", "data/corpus", *_sets(RT_TINY)]
        for arch, out in (("runs/search/best.json", "runs/best"), ("bert", "runs/bert"),
                          ("random:1", "runs/random-best"), ("runs/search/best.json", "runs/small")):
            run("retrain", "--arch", arch, "--out", out, *rt, "--set", "objective=mlm")
        run("retrain", "--arch", "bert", "--out", "runs/electra", *rt, "--set", "objective=electra")
        ev = ["--mlm-data", "data/corpus", "--dev-sequences", "16", "--blimp", blimp, "--blimp-limit", "2"]
        for run_dir in ("runs/best", "runs/bert", "runs/random-best"):
            run("evaluate", "--model", f"{run_dir}/model", *ev)
        run("evaluate", "--model", "runs/small/model", *ev, "--out", "small.json")
        run("evaluate", "--model", "runs/bert/model", *ev, "--out", "medium.json")
        run("export", "--model", "runs/best/model", "--out", "hf/best")
        run("export", "--model", "runs/small/model", "--out", "hf/small")
        run("evaluate", "--model", "hf:hf/best", *ev, "--out", "hf-best.json")
        run("evaluate", "--model", "runs/bert/model", *ev, "--out", "bert-base.json")  # stands for BERT-base
    finally:
        os.chdir(old)
    return ws


def _case_folder(ws: Path, name: str) -> Path:
    """A fresh copy of the workspace (the prepared corpus linked, not copied)."""
    case = ws.parent / name
    shutil.copytree(ws, case, symlinks=True)
    return case


def outputs(argv: list[str]) -> list[str]:
    """What an example writes: its ``--out`` (with an evaluation's Markdown twin), or, for
    ``evaluate`` without ``--out``, its default report in the model directory."""
    def value(flag):
        return argv[argv.index(flag) + 1] if flag in argv[:-1] else None

    out = value("--out")
    if argv[0] == "evaluate" and "--compare" not in argv:
        if out is None:
            model = value("--model") or argv[1]
            return [] if model.startswith("hf:") else [f"{model}/results.json", f"{model}/results.md"]
        return [out, str(Path(out).with_suffix(".md"))]
    return [out] if out else []


def _fresh(case: Path, rel: str, resume: bool) -> None:
    """Make ``case/rel`` absent (a new output), or a real copy of what it links to (``--resume``)."""
    target = case / rel
    if resume:
        if target.is_symlink():
            real = target.resolve()
            target.unlink()
            shutil.copytree(real, target, symlinks=True)
        return
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.exists() or target.is_symlink():
        target.unlink()


EXAMPLES = documented_examples()


@pytest.mark.slow
@pytest.mark.parametrize("where,cmd", EXAMPLES, ids=[f"{i:02d}" for i in range(len(EXAMPLES))])
def test_documented_example_runs(examples_ws: Path, where: str, cmd: str, monkeypatch, capsys):
    case = _case_folder(examples_ws, f"case-{EXAMPLES.index((where, cmd)):02d}")
    argv, launcher = runnable(cmd, examples_ws)
    lv = argv[argv.index("lvsearch") + 1:] if launcher else argv
    if "--overwrite" not in lv:
        for rel in outputs(lv):
            _fresh(case, rel, "--resume" in lv)
    monkeypatch.setenv("LVSEARCH_QUIET", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    if launcher:
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=case, env=env, timeout=600)
        assert proc.returncode == 0, f"{where}: {cmd}\n{proc.stderr[-4000:]}"
        return
    monkeypatch.chdir(case)
    code = main(argv)
    text = " ".join("".join(capsys.readouterr()).split())
    if _verb(argv) == ("latency", "measure"):
        for _ in range(BUSY_TRIES - 1):  # timings refused as too noisy: time again
            if code != 2 or BUSY not in text:
                break
            code = main(argv)
            text = " ".join("".join(capsys.readouterr()).split())
        if code == 2 and BUSY in text and "Traceback" not in text:
            pytest.skip(f"{where}: {cmd}: timings refused as too noisy {BUSY_TRIES} times on this busy machine "
                        f"(the refusal itself is tested in test_latency.py): {text[-300:]}")
    if any(w in cmd for w in NEEDS_HUB) and code == 2:
        assert re.search(r"hub|offline|internet|download|cache", text, re.I), f"{where}: {cmd}\n{text[-3000:]}"
        return
    assert code == 0, f"{where}: {cmd}\n{text[-3000:]}"
