"""Shared fixtures: the real data in ../shared/data (skipped with a reason when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest
from _shared import shared_data_dir


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """Test models are tiny and gain nothing from 2 threads; on a shared, oversubscribed
    2-core machine OpenMP spin-waiting made a tiny training step ~70× slower (2 s vs 30 ms)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if path is None:
        pytest.skip("real data folder ../shared/data (or $LVSEARCH_SHARED_DATA) is absent")
    return path


@pytest.fixture(scope="session")
def corpora(shared_data: Path) -> Path:
    path = shared_data / "corpora"
    if not (path / "train").is_dir():
        pytest.skip(f"{path} has no BabyLM-style train/ folder")
    return path


@pytest.fixture(scope="session")
def prepared_corpus(corpora: Path, tmp_path_factory) -> Path:
    """The whole shared corpus prepared once per test session (about 15 s on 2 cores)."""
    from lvsearch.data.prepare import prepare

    out = tmp_path_factory.mktemp("prepared") / "corpus"
    prepare([str(corpora)], out, show_progress=False)
    return out


@pytest.fixture(scope="session")
def real_lines(corpora: Path) -> list[str]:
    """Real English lines from the shared corpus (brown train, first 3000 non-blank lines)."""
    lines = []
    with open(corpora / "train" / "brown.train", encoding="utf-8") as f:
        for line in f:
            if line.strip():
                lines.append(line.strip())
            if len(lines) >= 3000:
                break
    return lines


@pytest.fixture(scope="session")
def small_corpus(corpora: Path, tmp_path_factory) -> Path:
    """A slice of the shared corpus (brown + movie_reviews, first 12k train lines each, full
    dev files) prepared with a 2000-piece vocabulary and 64-token sequences (a few seconds);
    shared by test_eval and test_floors."""
    from lvsearch.data.prepare import PrepareSettings, prepare

    src = tmp_path_factory.mktemp("slice")
    for split in ("train", "dev"):
        (src / split).mkdir()
        for name in ("brown", "movie_reviews"):
            lines = (corpora / split / f"{name}.{split}").read_text(encoding="utf-8").splitlines()
            (src / split / f"{name}.{split}").write_text("\n".join(lines[:12000]) + "\n", encoding="utf-8")
    out = tmp_path_factory.mktemp("prepared_small") / "corpus"
    prepare([str(src)], out, PrepareSettings(vocab_size=2000, seq_len=64), show_progress=False)
    return out
