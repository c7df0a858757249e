"""One reader of a search folder (``lvsearch evolve --out``): the state, top-k, pick and noise
files, each checked against its file model before use.

Every reader of a search's files goes through :class:`SearchFolder` (evolve's resume, the
quickstart's stages and report, the reports), so a damaged or hand-edited file is one
:class:`~lvsearch.errors.LvsearchError` naming the file, the field and the command that writes
it again, and what a missing recorded fitness means is decided once
(:meth:`lvsearch.search.fitness.Fitness.of_record`).

Files (written by :class:`lvsearch.search.evolution.Search` and :mod:`lvsearch.search.job`):
``state.json`` (config, iteration, curve, evaluator settings under ``extra``), ``topk.json``
(the best complete candidates, best first), ``best.json`` (the pick: an architecture file with
the search's ``meta``), ``noise.json`` (the fitness noise of the final top-k), and ``random/``
(the ``--compare-random`` control, a search folder itself).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from lvsearch.schema import Count, FileModel
from lvsearch.search.fitness import Fitness

STATE = "state.json"
TOPK = "topk.json"
BEST = "best.json"
NOISE = "noise.json"
RANDOM_DIR = "random"  # the --compare-random control inside a search folder

Score = Optional[float]


class PickMeta(FileModel):
    fitness: Score = None


class SearchPick(FileModel):
    """A search's ``best.json`` (an architecture file with the search's ``meta``)."""

    ops: object
    meta: PickMeta


class CurvePoint(FileModel):
    topk_mean: Score = None


class SearchStateConfig(FileModel):
    iterations: Optional[Count] = None


class SearchExtra(FileModel):
    fitness: Optional[str] = None


class SearchState(FileModel):
    """The fields of a search's ``state.json`` its readers use (the rest is the search's own,
    checked by :meth:`lvsearch.search.evolution.Search.load_state`)."""

    iteration: Optional[Count] = None
    config: Optional[SearchStateConfig] = None
    extra: Optional[SearchExtra] = None
    curve: Optional[list[CurvePoint]] = None


class SearchTopK(FileModel):
    """A search's ``topk.json``: its best complete candidates, best first (objects; readers take
    their fields)."""

    topk: list[dict]


class SearchNoise(FileModel):
    """A search's ``noise.json`` (the fields the reports read)."""

    targets: Optional[Count] = None


def search_command(out: str | Path) -> str:
    """The command that writes the search in ``out`` anew (named by the fix for a damaged file)."""
    return f"lvsearch evolve --supernet SUPERNET --out {out} --overwrite (runs the search again)"


class SearchFolder:
    """The files of one search folder.

    Args:
        path: the ``evolve --out`` folder (or its ``random/`` control).
        regenerate: how a damaged file is written again, for the fix (default
            :func:`search_command`; the quickstart names its own).
    """

    def __init__(self, path: str | Path, *, regenerate: str | None = None):
        self.path = Path(path)
        self.regenerate = regenerate or search_command(self.path)

    def _read(self, name: str, schema: type, what: str) -> dict:
        from lvsearch.io import read_checked

        return read_checked(self.path / name, schema, what=what, regenerate=self.regenerate,
                            fix=f"restore the file from a copy, or {self.regenerate}")

    @property
    def has_state(self) -> bool:
        return (self.path / STATE).is_file()

    def finished(self) -> bool:
        """Whether the search ran all its iterations and wrote its pick."""
        if not self.has_state or not (self.path / BEST).is_file():
            return False
        s = self.state()
        return (s.get("iteration") or 0) >= ((s.get("config") or {}).get("iterations") or 1 << 30)

    def state(self) -> dict:
        """``state.json``, checked. Raises LvsearchError: missing, not JSON or malformed."""
        return self._read(STATE, SearchState, "search state")

    def topk_record(self) -> dict:
        """``topk.json``: ``{"strategy", "iteration", "space", "topk": [entries, best first]}``."""
        return self._read(TOPK, SearchTopK, "search top-k")

    def topk(self) -> list[dict]:
        """The entries of ``topk.json``, best first."""
        return self.topk_record()["topk"]

    def best(self) -> dict:
        """``best.json`` (the pick)."""
        return self._read(BEST, SearchPick, "search pick")

    def noise(self) -> dict | None:
        """``noise.json``, or None when the search wrote none (not finished, or older)."""
        return self._read(NOISE, SearchNoise, "search fitness noise") if (self.path / NOISE).is_file() else None

    def fitness(self, state: dict | None = None) -> Fitness:
        """The fitness the search scored with (``state.extra.fitness``; a state from before it
        was recorded: accuracy)."""
        return Fitness.of_record((state if state is not None else self.state()).get("extra"))

    def curve(self, state: dict | None = None) -> list[dict]:
        """The per-iteration curve (``[]`` before the first iteration)."""
        return list((state if state is not None else self.state()).get("curve") or [])

    def control(self) -> "SearchFolder":
        """The ``--compare-random`` control (``random/``), with the same fix."""
        return SearchFolder(self.path / RANDOM_DIR, regenerate=self.regenerate)
