"""Data pipeline on real text: prepare, tokenizer, shards, loader, masking, bad inputs."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from _shared import run_cli

from lvsearch.data.loader import BatchStream, fixed_dev_set
from lvsearch.data.masking import IGNORE_INDEX, MaskingConfig, MLMMasker
from lvsearch.data.prepare import PrepareSettings, prepare
from lvsearch.data.shards import PreparedData
from lvsearch.data.tokenizer import SpecialIds, load_tokenizer
from lvsearch.errors import LvsearchError
from lvsearch.io import sha256_file

SMALL = ["--vocab-size", "1000", "--min-frequency", "1"]


def write_docs(path: Path, lines: list[str], doc_lines: int = 20) -> Path:
    """Write real lines as documents of ``doc_lines`` lines separated by blank lines."""
    path.parent.mkdir(parents=True, exist_ok=True)
    chunks = ["\n".join(lines[i : i + doc_lines]) for i in range(0, len(lines), doc_lines)]
    path.write_text("\n\n".join(chunks) + "\n", encoding="utf-8")
    return path


def tree_digest(folder: Path) -> dict[str, str]:
    return {p.name: sha256_file(p) for p in sorted(folder.iterdir()) if p.is_file()}


# ----------------------------------------------------------------------------------------
# The whole shared corpus
# ----------------------------------------------------------------------------------------


def test_prepare_shared_corpus_counts_and_manifest(prepared_corpus: Path, corpora: Path):
    data = PreparedData.open(prepared_corpus)
    m = data.manifest
    files = sorted(p for p in corpora.rglob("*") if p.suffix in (".train", ".dev"))
    assert len(m["sources"]) == len(files)
    for src in m["sources"]:
        assert src["sha256"] == sha256_file(src["path"])
        assert src["split"] == Path(src["path"]).suffix[1:]
    assert m["tokenizer"]["sha256"] == sha256_file(prepared_corpus / "tokenizer.json")
    assert m["tokenizer"]["vocab_size"] == 16384
    assert m["dtype"] == "uint16"
    for split in ("train", "dev"):
        s = m["splits"][split]
        assert s["documents"] > 0 and s["words"] > 0
        # The bound: tokens within 10% of words × 1.1–1.6.
        assert 0.9 * 1.1 * s["words"] <= s["tokens"] <= 1.1 * 1.6 * s["words"], (split, s)
        assert sum(sh["tokens"] for sh in s["shards"]) == s["tokens"]
        for sh in s["shards"]:
            assert sh["sha256"] == sha256_file(prepared_corpus / sh["file"])
    assert m["splits"]["train"]["tokens"] >= 4_000_000
    assert m["splits"]["train"]["words"] > 4_000_000  # the README's 4.05M words
    assert data.verify() == []


def test_prepare_rerun_is_byte_identical(prepared_corpus: Path, corpora: Path, tmp_path: Path):
    again = tmp_path / "again"
    prepare([str(corpora)], again, show_progress=False)
    assert tree_digest(again) == tree_digest(prepared_corpus)


def test_packed_sequences_are_cls_tokens_sep(prepared_corpus: Path):
    data = PreparedData.open(prepared_corpus)
    ids = data.special_ids
    seqs = data.sequences("train", 64)
    assert len(seqs) == data.num_tokens("train") // 62
    batch = seqs[np.array([0, 1, len(seqs) - 1])]
    assert batch.shape == (3, 64) and batch.dtype == np.int64
    assert (batch[:, 0] == ids.cls).all() and (batch[:, -1] == ids.sep).all()
    # consecutive sequences continue the same token stream
    stream = np.asarray(data.shards("train")[0][: 2 * 62])
    assert (batch[0, 1:-1] == stream[:62]).all() and (batch[1, 1:-1] == stream[62:124]).all()
    # documents are separated by [SEP] inside sequences; no padding anywhere
    assert (seqs[np.arange(200)][:, 1:-1] == ids.sep).any()
    assert not (batch == ids.pad).any()


# ----------------------------------------------------------------------------------------
# Tokenizer
# ----------------------------------------------------------------------------------------


def _squash(text: str) -> str:
    return "".join(text.split())


def test_tokenizer_round_trip_real_sentences(prepared_corpus: Path, real_lines: list[str]):
    tok = load_tokenizer(prepared_corpus / "tokenizer.json")
    ids = SpecialIds.of(tok)
    checked = 0
    for line in real_lines[:500]:
        enc = tok.encode(line)
        if ids.unk in enc.ids:
            continue
        assert enc.ids[0] == ids.cls and enc.ids[-1] == ids.sep
        # lower-cased, accent-stripped text comes back up to whitespace
        normalized = tok.normalizer.normalize_str(line)
        assert _squash(tok.decode(enc.ids)) == _squash(normalized)
        checked += 1
    assert checked > 400


def test_tokenizer_pair_template(prepared_corpus: Path):
    tok = load_tokenizer(prepared_corpus / "tokenizer.json")
    ids = SpecialIds.of(tok)
    enc = tok.encode("the cat sat .", "on the mat .")
    assert enc.ids[0] == ids.cls and enc.ids[-1] == ids.sep
    assert enc.ids.count(ids.sep) == 2
    first_sep = enc.ids.index(ids.sep)
    assert set(enc.type_ids[: first_sep + 1]) == {0} and set(enc.type_ids[first_sep + 1 :]) == {1}


def test_tokenizer_missing_special_tokens_is_clear(tmp_path: Path, prepared_corpus: Path, capsys):
    spec = json.loads((prepared_corpus / "tokenizer.json").read_text())
    vocab = spec["model"]["vocab"]
    del vocab["[MASK]"]
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] != "[MASK]"]
    bad = tmp_path / "bad-tokenizer.json"
    bad.write_text(json.dumps(spec))
    with pytest.raises(LvsearchError, match=r"lacks the special token\(s\) \[MASK\]"):
        load_tokenizer(bad)
    text = write_docs(tmp_path / "c" / "a.txt", ["some real text here ."] * 50)
    code, out = run_cli(capsys, "data", "prepare", "--input", str(text), "--out", str(tmp_path / "o"), "--tokenizer", str(bad))
    assert code == 2 and str(bad) in out and "[MASK]" in out and "Traceback" not in out
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------------------------------------
# Masking
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["token", "span"])
def test_masking_statistics(prepared_corpus: Path, strategy: str):
    data = PreparedData.open(prepared_corpus)
    seqs = data.sequences("train", 128)
    x = torch.from_numpy(seqs[np.arange(800)])  # 102,400 tokens
    masker = MLMMasker(MaskingConfig(strategy=strategy), data.vocab_size, data.special_ids)
    corrupted, labels = masker(x, torch.Generator().manual_seed(0))
    selected = labels != IGNORE_INDEX
    eligible = masker.eligible(x)
    special = torch.tensor(data.special_ids.all())
    assert not (selected & ~eligible).any(), "a special token was masked"
    assert abs(selected.sum().item() / eligible.sum().item() - 0.15) < 0.005
    assert torch.equal(labels[selected], x[selected])
    assert torch.equal(corrupted[~selected], x[~selected])
    n = selected.sum().item()
    to_mask = (corrupted == data.special_ids.mask) & selected
    kept = (corrupted == x) & selected
    replaced = selected & ~to_mask & ~kept
    assert abs(to_mask.sum().item() / n - 0.8) < 0.02
    # a random draw can hit the original id by chance (p ≈ 1/V): counted as kept
    assert abs(replaced.sum().item() / n - 0.1) < 0.02
    assert abs(kept.sum().item() / n - 0.1) < 0.02
    assert not torch.isin(corrupted[replaced], special).any(), "a random replacement drew a special token"
    if strategy == "span":
        # spans: selected positions cluster (mean run length well above token masking's ~1.2)
        runs = (selected[:, 1:] & ~selected[:, :-1]).sum().item() + selected[:, 0].sum().item()
        assert n / runs > 2.0


DEV_HASH_SCRIPT = """
import hashlib, sys
from lvsearch.data.loader import fixed_dev_set
from lvsearch.data.shards import PreparedData
d = fixed_dev_set(PreparedData.open(sys.argv[1]), num_sequences=128, seed=7)
h = hashlib.sha256(d.input_ids.numpy().tobytes() + d.labels.numpy().tobytes()).hexdigest()
print(h)
"""


def test_dev_masks_identical_across_processes(prepared_corpus: Path):
    hashes = [
        subprocess.run(
            [sys.executable, "-c", DEV_HASH_SCRIPT, str(prepared_corpus)], capture_output=True, text=True, check=True
        ).stdout.strip()
        for _ in range(2)
    ]
    d = fixed_dev_set(PreparedData.open(prepared_corpus), num_sequences=128, seed=7)
    here = hashlib.sha256(d.input_ids.numpy().tobytes() + d.labels.numpy().tobytes()).hexdigest()
    assert hashes[0] == hashes[1] == here
    assert (d.labels != IGNORE_INDEX).any(dim=1).all(), "every dev sequence has prediction targets"
    other = fixed_dev_set(PreparedData.open(prepared_corpus), num_sequences=128, seed=8)
    assert not torch.equal(other.labels, d.labels)


# ----------------------------------------------------------------------------------------
# Loader
# ----------------------------------------------------------------------------------------


def test_batch_stream_resumable_and_sharded(prepared_corpus: Path):
    seqs = PreparedData.open(prepared_corpus).sequences("train", 32)
    stream = BatchStream(seqs, 16, seed=3)
    first = [stream.batch(s) for s in range(5)]
    resumed = BatchStream(seqs, 16, seed=3)
    assert torch.equal(resumed.batch(3), first[3])  # no state besides the step
    assert not torch.equal(first[0], first[1])
    assert not torch.equal(BatchStream(seqs, 16, seed=4).batch(0), first[0])
    ranks = [BatchStream(seqs, 8, seed=3, rank=r, world_size=2) for r in range(2)]
    assert torch.equal(torch.cat([r.batch(2) for r in ranks]), first[2])
    # one epoch visits distinct sequences; the next epoch reshuffles
    spe = stream.steps_per_epoch
    assert not torch.equal(stream.batch(spe), stream.batch(0))


def test_batch_stream_too_small_is_clear(prepared_corpus: Path):
    seqs = PreparedData.open(prepared_corpus).sequences("dev", 128)
    with pytest.raises(LvsearchError, match="fewer than one global batch"):
        BatchStream(seqs, len(seqs) + 1, seed=0)


# ----------------------------------------------------------------------------------------
# Other sources
# ----------------------------------------------------------------------------------------


def test_builtin_python_docs(tmp_path: Path, capsys):
    code, out = run_cli(capsys, "data", "prepare", "--input", "builtin:python-docs", "--out", str(tmp_path / "py"), "--vocab-size", "4096")
    assert code == 0, out
    m = PreparedData.open(tmp_path / "py").manifest
    assert m["sources"][0]["kind"] == "builtin" and "technical-English" in m["sources"][0]["note"]
    assert m["splits"]["train"]["words"] > 150_000
    dev_frac = m["splits"]["dev"]["documents"] / (m["splits"]["dev"]["documents"] + m["splits"]["train"]["documents"])
    assert 0.005 < dev_frac < 0.05  # seeded 2% of documents


def test_hf_local_jsonl_and_save_to_disk(tmp_path: Path, real_lines: list[str], capsys):
    import datasets

    rows = [{"text": "\n".join(real_lines[i : i + 10]), "id": i} for i in range(0, 2000, 10)]
    jsonl = tmp_path / "docs.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code, out = run_cli(capsys, "data", "prepare", "--input", str(jsonl), "--out", str(tmp_path / "j"), *SMALL, "--dev-fraction", "0.1")
    assert code == 0, out
    m = PreparedData.open(tmp_path / "j").manifest
    assert m["sources"][0]["kind"] == "hf"
    assert m["splits"]["train"]["documents"] + m["splits"]["dev"]["documents"] == len(rows)

    ds = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_list(rows[:180]),
            "validation": datasets.Dataset.from_list(rows[180:]),
            "test": datasets.Dataset.from_list(rows[:5]),
        }
    )
    ds.save_to_disk(str(tmp_path / "saved"))
    code, out = run_cli(capsys, "data", "prepare", "--input", str(tmp_path / "saved"), "--out", str(tmp_path / "s"), *SMALL)
    assert code == 0, out
    m = PreparedData.open(tmp_path / "s").manifest
    assert m["splits"]["dev"]["documents"] == 20 and m["splits"]["train"]["documents"] == 180  # test split ignored

    code, out = run_cli(capsys, "data", "prepare", "--input", str(jsonl), "--out", str(tmp_path / "x"), "--text-column", "body")
    assert code == 2 and "no column 'body'" in out and "text, id" in out and "Traceback" not in out


# ----------------------------------------------------------------------------------------
# Bad input: one clear message, exit 2, nothing overwritten
# ----------------------------------------------------------------------------------------


def test_missing_path(tmp_path: Path, capsys):
    code, out = run_cli(capsys, "data", "prepare", "--input", str(tmp_path / "nope"), "--out", str(tmp_path / "o"))
    assert code == 2 and "input not found" in out and str(tmp_path / "nope") in out and "Traceback" not in out


def test_empty_corpus_and_empty_split(tmp_path: Path, real_lines: list[str], capsys):
    blank = tmp_path / "blank" / "a.txt"
    blank.parent.mkdir()
    blank.write_text("\n\n   \n", encoding="utf-8")
    code, out = run_cli(capsys, "data", "prepare", "--input", str(blank.parent), "--out", str(tmp_path / "o"))
    assert code == 2 and "no text" in out and not (tmp_path / "o").exists()

    one_doc = write_docs(tmp_path / "one" / "a.txt", real_lines[:15], doc_lines=15)
    code, out = run_cli(capsys, "data", "prepare", "--input", str(one_doc), "--out", str(tmp_path / "o"), *SMALL)
    assert code == 2 and "dev split is empty" in out and "--dev-fraction" in out
    assert not (tmp_path / "o").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".o.tmp")], "temporary folder left behind"


def test_binary_and_non_utf8_files(tmp_path: Path, real_lines: list[str], capsys):
    folder = tmp_path / "mixed"
    write_docs(folder / "good.txt", real_lines[:600])
    (folder / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (folder / "latin1.txt").write_bytes("café au lait, naïve\n".encode("latin-1"))
    code, out = run_cli(capsys, "data", "prepare", "--input", str(folder), "--out", str(tmp_path / "o"), *SMALL, "--dev-fraction", "0.2")
    assert code == 2 and "image.txt: binary" in out and "latin1.txt: not UTF-8" in out and "--skip-bad-files" in out
    assert not (tmp_path / "o").exists()
    code, out = run_cli(
        capsys, "data", "prepare", "--input", str(folder), "--out", str(tmp_path / "o"), *SMALL, "--dev-fraction", "0.2", "--skip-bad-files"
    )
    assert code == 0, out
    assert "skipped" in out and "latin1.txt" in out
    assert len(PreparedData.open(tmp_path / "o").manifest["skipped_files"]) == 2


def test_out_holding_dataset_is_refused_unless_overwrite(tmp_path: Path, real_lines: list[str], capsys):
    corpus = write_docs(tmp_path / "c" / "a.txt", real_lines[:1000])
    out_dir = tmp_path / "o"
    args = ["data", "prepare", "--input", str(corpus), "--out", str(out_dir), *SMALL, "--dev-fraction", "0.1"]
    assert run_cli(capsys, *args)[0] == 0
    before = tree_digest(out_dir)
    code, out = run_cli(capsys, *args)
    assert code == 2 and "already holds a prepared dataset" in out and "unchanged" in out and "--overwrite" in out
    assert tree_digest(out_dir) == before

    # the source changes: refusal says so, and 'data verify' detects it by hash
    write_docs(corpus, real_lines[1000:2000])
    code, out = run_cli(capsys, *args)
    assert code == 2 and "changed since tokenisation" in out and str(corpus) in out
    assert tree_digest(out_dir) == before
    code, out = run_cli(capsys, "data", "verify", str(out_dir))
    assert code == 2 and "sha256 differs" in out and str(corpus) in out

    code, out = run_cli(capsys, *args, "--overwrite")
    assert code == 0, out
    assert tree_digest(out_dir) != before
    assert run_cli(capsys, "data", "verify", str(out_dir))[0] == 0


def test_out_with_other_files_is_refused(tmp_path: Path, real_lines: list[str], capsys):
    corpus = write_docs(tmp_path / "c" / "a.txt", real_lines[:1000])
    out_dir = tmp_path / "o"
    out_dir.mkdir()
    (out_dir / "notes.md").write_text("mine")
    code, out = run_cli(capsys, "data", "prepare", "--input", str(corpus), "--out", str(out_dir), "--overwrite")
    assert code == 2 and "also holds notes.md" in out  # named, with the reason (was: "not empty")
    assert (out_dir / "notes.md").read_text() == "mine" and len(list(out_dir.iterdir())) == 1


def test_truncated_shard_is_detected(tmp_path: Path, real_lines: list[str]):
    corpus = write_docs(tmp_path / "c" / "a.txt", real_lines[:1000])
    out_dir = tmp_path / "o"
    prepare([str(corpus)], out_dir, PrepareSettings(vocab_size=1000, min_frequency=1, dev_fraction=0.1), show_progress=False)
    shard = out_dir / "train-00000.bin"
    shard.write_bytes(shard.read_bytes()[:-10])
    with pytest.raises(LvsearchError, match="truncated"):
        PreparedData.open(out_dir)


def test_not_a_dataset_folder(tmp_path: Path):
    with pytest.raises(LvsearchError, match="not a prepared dataset"):
        PreparedData.open(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(LvsearchError, match="not valid JSON"):
        PreparedData.open(tmp_path)


def test_cli_subprocess_has_no_traceback(tmp_path: Path):
    proc = subprocess.run(
        [sys.executable, "-m", "lvsearch", "data", "prepare", "--input", str(tmp_path / "missing"), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "input not found" in proc.stderr and "Traceback" not in proc.stderr


def test_tokenizer_training_is_byte_identical_across_processes(corpora: Path, tmp_path: Path):
    """``data prepare`` on the first 40 kB of each shared training file gave a
    different tokenizer.json in each run (Hugging Face's trainer numbers the ``##c`` pieces in
    a per-process hash order, and ties between equal-count merges follow those numbers). Two
    runs in fresh processes (other hash seeds) now give the same bytes; 8192 pieces are more
    than this text fills, so every merge down to --min-frequency counts, ties included."""
    import os

    src = tmp_path / "src"
    for split in ("train", "dev"):
        (src / split).mkdir(parents=True)
        for f in sorted((corpora / split).glob(f"*.{split}")):
            (src / split / f.name).write_bytes(f.read_bytes()[:40_000].decode("utf-8", "ignore").encode("utf-8"))
    digests = []
    for run in range(2):
        out = tmp_path / f"out{run}"
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": str(run),
               "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        proc = subprocess.run([sys.executable, "-m", "lvsearch", "data", "prepare", "--input", str(src), "--out", str(out),
                               "--vocab-size", "8192"], capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        digests.append({p.name: sha256_file(p) for p in sorted(out.iterdir()) if p.suffix in (".json", ".bin")
                        and p.name != "manifest.json"})
    assert digests[0]["tokenizer.json"] == digests[1]["tokenizer.json"]
    assert digests[0] == digests[1]


def test_a_vocab_size_the_corpus_cannot_fill_is_said(tmp_path: Path, real_lines: list[str], capsys):
    """--vocab-size above what the train split yields: the vocabulary is smaller, and the run
    says so (it was silent)."""
    corpus = write_docs(tmp_path / "c" / "a.txt", real_lines[:1000])
    code, out = run_cli(capsys, "data", "prepare", "--input", str(corpus), "--out", str(tmp_path / "o"),
                        "--vocab-size", "70000", "--dev-fraction", "0.1")
    assert code == 0, out
    vocab = json.loads((tmp_path / "o" / "manifest.json").read_text())["tokenizer"]["vocab_size"]
    assert code == 0 and vocab < 70000
    assert f"--vocab-size 70000: the train split yields {vocab} WordPiece tokens" in " ".join(out.split())
