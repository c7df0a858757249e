"""Arch, SearchSpace and reference architectures."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from lvsearch.arch import ARCH_FORMAT, Arch, check_arch_spec, reference_arch, resolve_arch
from lvsearch.errors import LvsearchError
from lvsearch.space import SearchSpace, available_spaces


@pytest.fixture(scope="module")
def lvbert():
    return SearchSpace.load("lvbert")


@pytest.fixture(scope="module")
def elc():
    return SearchSpace.load("lvbert-elc")


def write(tmp_path, obj, name="arch.json"):
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return p


# ------------------------------------------------------------------ Arch basics
def test_compact_and_sequential():
    a = Arch.sequential("csf")
    assert a.ops == ("DC", "SA", "FF")
    assert a.inputs == ((0,), (1,), (2,))
    assert a.compact == "csf" and a.key == "csf" and a.is_sequential
    assert Arch.sequential(["DC", "SA", "FF"]) == a
    assert hash(Arch.sequential("csf")) == hash(a)


def test_key_distinguishes_inputs():
    a = Arch("csf", [[0], [0, 1], [2]])
    b = Arch("csf", [[0], [1], [0, 2]])
    assert a.key == "csf|0;0,1;2" and b.key == "csf|0;1;0,2"
    assert len({a, b, Arch.sequential("csf")}) == 3
    # inputs are normalised (sorted, de-duplicated), so equal sets give equal keys
    assert Arch("csf", [[0], [1, 0, 1], [2]]) == a


def test_json_roundtrip(tmp_path, elc):
    a = elc.sample(random.Random(1))
    p = tmp_path / "best.json"
    a.to_json(p, space="lvbert-elc", meta={"fitness": 0.5})
    d = json.loads(p.read_text())
    assert d["format"] == ARCH_FORMAT and d["ops"] == a.compact and d["num_slots"] == 24
    assert Arch.from_json(p) == a
    assert resolve_arch(p, elc) == a


@pytest.mark.parametrize(
    "obj, needle",
    [
        ({"ops": "csf"}, "no format tag"),
        ({"strategy": "regularized", "iteration": 3, "topk": [{"key": "csf"}]}, "--finalists K"),
        ({"format": "lvsearch.arch/v0", "ops": "csf"}, "expected 'lvsearch.arch/v1'"),
        ({"format": ARCH_FORMAT, "ops": "csq"}, "unknown op letter 'q'"),
        ({"format": ARCH_FORMAT, "ops": ["DC", "XX"]}, "unknown op 'XX'"),
        ({"format": ARCH_FORMAT, "ops": "csf", "inputs": [[0], [1]]}, "2 input lists for 3 slots"),
        ({"format": ARCH_FORMAT, "ops": "csf", "inputs": [[0], [2], [1]]}, "slot 2 reads input 2, which is itself"),
        ({"format": ARCH_FORMAT, "ops": "csf", "inputs": [[0], [3], [1]]}, "which is a later slot"),
        ({"format": ARCH_FORMAT, "ops": "csf", "inputs": [[0], [], [1]]}, "slot 2 has no inputs"),
        ({"format": ARCH_FORMAT, "ops": "csf", "num_slots": 4}, "num_slots is 4"),
        ({"format": ARCH_FORMAT, "ops": "csf", "input": [[0], [1], [2]]}, "did you mean 'inputs'"),
        ([1, 2], "must hold a JSON object"),
    ],
)
def test_bad_arch_files_name_the_file(tmp_path, obj, needle):
    p = write(tmp_path, obj)
    with pytest.raises(LvsearchError) as e:
        Arch.from_json(p)
    assert needle in str(e.value)
    assert str(p) in str(e.value)


def test_missing_and_invalid_json(tmp_path):
    with pytest.raises(LvsearchError, match="not found"):
        Arch.from_json(tmp_path / "nope.json")
    p = tmp_path / "bad.json"
    p.write_text("{")
    with pytest.raises(LvsearchError, match="not valid JSON"):
        Arch.from_json(p)


def test_validate_against_space(tmp_path, lvbert, elc):
    short = write(tmp_path, Arch.sequential("sf").to_dict())
    with pytest.raises(LvsearchError, match=r"has 2 slots, but search space 'lvbert'.* has 24") as e:
        resolve_arch(short, lvbert)
    assert str(short) in str(e.value)
    no_sa = SearchSpace.load("dc-ff")
    with pytest.raises(LvsearchError, match="slot 1 uses op SA, which search space 'dc-ff'"):
        no_sa.validate(reference_arch("bert", lvbert))
    mixed = Arch("s" * 24, [[0]] + [[0, n - 1] for n in range(2, 25)])
    elc.validate(mixed)
    with pytest.raises(LvsearchError, match="is sequential"):
        lvbert.validate(mixed)
    skip = Arch("s" * 24, [[0]] + [[0] for _ in range(2, 25)])
    with pytest.raises(LvsearchError, match="does not read the previous output"):
        elc.validate(skip)


# ------------------------------------------------------------------ search spaces
def test_all_spaces_load():
    names = available_spaces()
    assert {"lvbert", "lvbert-elc", "sa-ff", "dc-ff", "dc-sa"} <= set(names)
    expected = {"sa-ff": ("SA", "FF"), "dc-ff": ("FF", "DC"), "dc-sa": ("SA", "DC"), "lvbert-local": ("SA", "FF", "DC", "LA")}
    for n in names:
        s = SearchSpace.load(n)
        assert s.num_slots == 24
        assert s.ops == expected.get(n, ("SA", "FF", "DC"))
        assert s.searchable_inputs == (n in ("lvbert-elc", "lvbert-elastic"))
        assert bool(s.elastic) == (n == "lvbert-elastic")


def test_space_errors(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("num_slots: 4\nops: [SA, FF]\nconectivity: elc\n")
    with pytest.raises(LvsearchError) as e:
        SearchSpace.load(p)
    assert "unknown key 'conectivity'" in str(e.value) and "did you mean 'connectivity'" in str(e.value)
    assert str(p) in str(e.value)
    p.write_text("num_slots: 4\nops: [SA, XX]\n")
    with pytest.raises(LvsearchError, match="unknown op 'XX'"):
        SearchSpace.load(p)
    p.write_text("num_slots: 4\nops: [SA]\nconnectivity: dense\n")
    with pytest.raises(LvsearchError, match="unknown connectivity 'dense'"):
        SearchSpace.load(p)
    with pytest.raises(LvsearchError, match="did you mean 'lvbert'"):
        SearchSpace.load("lvbrt")


def test_with_num_slots_roundtrips_by_name():
    s = SearchSpace.load("lvbert-elc").with_num_slots(6)
    assert s.num_slots == 6 and s.name == "lvbert-elc@6"
    assert SearchSpace.load(s.name) == s


# ------------------------------------------------------------------ sampling
def test_sampling_is_uniform_per_slot(lvbert):
    from scipy.stats import chisquare

    rng = random.Random(0)
    n = 3000
    counts = [Counter() for _ in range(lvbert.num_slots)]
    for _ in range(n):
        a = lvbert.sample(rng)
        lvbert.validate(a)
        for c, op in zip(counts, a.ops):
            c[op] += 1
    for c in counts:
        assert set(c) == {"SA", "FF", "DC"}
        p = chisquare([c[o] for o in lvbert.ops]).pvalue
        assert p > 1e-4, c  # 24 tests; a fixed seed keeps this deterministic


def test_sampling_connectivity(elc):
    rng = random.Random(1)
    kept = total = 0
    for _ in range(200):
        a = elc.sample(rng, keep_input_prob=0.3)
        elc.validate(a)
        for n, inp in enumerate(a.inputs, start=1):
            kept += len(inp) - 1
            total += n - 1
    assert 0.25 < kept / total < 0.35
    dense = elc.sample(random.Random(2), dense_prob=1.0)
    assert all(inp == tuple(range(n)) for n, inp in enumerate(dense.inputs, start=1))
    # sequential spaces ignore the connectivity arguments
    assert SearchSpace.load("lvbert").sample(random.Random(3), dense_prob=1.0).is_sequential


def test_sampling_is_seeded(elc):
    assert elc.sample(random.Random(7)) == elc.sample(random.Random(7))


def test_mutation(lvbert, elc):
    a = lvbert.sample(random.Random(0))
    assert lvbert.mutate(a, random.Random(0), 0.0) == a
    m = lvbert.mutate(a, random.Random(0), 1.0)
    lvbert.validate(m)
    assert m != a  # with p=1 every op is re-drawn: some change (seeded)
    b = elc.sample(random.Random(0))
    mb = elc.mutate(b, random.Random(1), 1.0)
    elc.validate(mb)
    # with p=1 every optional input flips
    for n, (i0, i1) in enumerate(zip(b.inputs, mb.inputs), start=1):
        assert set(i0) ^ set(i1) == set(range(n - 1))


# ------------------------------------------------------------------ references
def test_reference_archs(lvbert):
    assert reference_arch("bert", lvbert).compact == "sf" * 12
    assert reference_arch("sandwich", lvbert).compact == "s" * 6 + "sf" * 6 + "f" * 6
    assert reference_arch("lvbert-paper", lvbert).compact == "ccsffscffsccsfcfscfcssfs"
    assert reference_arch("random:5", lvbert) == lvbert.sample(random.Random(5))
    small = lvbert.with_num_slots(5)
    assert reference_arch("bert", small).compact == "sfsfs"
    assert reference_arch("sandwich", small).compact == "s" + "s" + "sf" + "f"
    with pytest.raises(LvsearchError, match="'lvbert-paper' has 24 slots"):
        reference_arch("lvbert-paper", small)
    with pytest.raises(LvsearchError, match="did you mean 'sandwich'"):
        resolve_arch("sandwch", lvbert)
    with pytest.raises(LvsearchError, match="not an integer"):
        resolve_arch("random:x", lvbert)
    with pytest.raises(LvsearchError, match="not allow"):
        reference_arch("lvbert-paper", SearchSpace.load("sa-ff"))


def test_check_arch_spec_without_a_space(tmp_path, monkeypatch):
    """What ``retrain`` and ``arch show`` check before any data folder, supernet or space: a
    file spec is read (text with a path separator or ``.json`` is a file, even when missing),
    anything else must be a reference name; each bad spec is one message."""
    monkeypatch.chdir(tmp_path)
    a = Arch(("DC", "SA", "FF"))
    a.to_json(tmp_path / "a.json")
    assert check_arch_spec(tmp_path / "a.json") == tmp_path / "a.json"
    assert all(check_arch_spec(n) is None for n in ("bert", "sandwich", "lvbert-paper", "random:3"))
    (tmp_path / "adir").mkdir()
    for spec, message in [("", "the architecture is empty"), ("   ", "the architecture is empty"),
                          ("runs/best", "architecture file not found: runs/best"),
                          ("nope.json", "architecture file not found"), ("adir", "adir is a folder"),
                          ("zzz", "unknown reference architecture 'zzz'"),
                          ("random:x", "seed 'x' is not an integer")]:
        with pytest.raises(LvsearchError, match=message):
            check_arch_spec(spec)
    with pytest.raises(LvsearchError, match="comma-separated") as e:
        check_arch_spec("bert,sandwich")
    assert "--finalists K" in e.value.fix
    with pytest.raises(LvsearchError, match="the architecture is empty"):  # resolve_arch gives the same
        resolve_arch("", SearchSpace.load("lvbert"))


def test_another_lvsearch_file_as_an_architecture_is_named_as_such(tmp_path):
    """A dataset manifest (or any other lvsearch file) passed as an architecture is not told to
    be regenerated: the fix says it is not an architecture file."""
    (tmp_path / "manifest.json").write_text(json.dumps({"format": "lvsearch.dataset/v1"}))
    with pytest.raises(LvsearchError, match="has format 'lvsearch.dataset/v1'") as e:
        Arch.from_json(tmp_path / "manifest.json")
    assert "not an architecture" in e.value.fix
    (tmp_path / "old.json").write_text(json.dumps({"format": "lvsearch.arch/v0", "ops": ["SA"]}))
    with pytest.raises(LvsearchError) as e:
        Arch.from_json(tmp_path / "old.json")
    assert "regenerate" in e.value.fix
