"""Search strategies, one module each, behind the :class:`Strategy` contract (``base.py``).

:data:`STRATEGIES` maps each ``--strategy`` name to its class; :class:`Search` looks the
configured one up here and runs the loop around it. Adding a strategy: a module with a
:class:`Strategy` subclass and its entry below.
"""

from __future__ import annotations

from lvsearch.search.strategies.aging import Aging
from lvsearch.search.strategies.base import Strategy
from lvsearch.search.strategies.evolution import Evolution
from lvsearch.search.strategies.nsga2 import NSGA2
from lvsearch.search.strategies.random_search import RandomSearch

#: ``--strategy`` name → :class:`Strategy` subclass (the order of the CLI's choices).
STRATEGIES: dict[str, type[Strategy]] = {
    "evolution": Evolution,
    "random": RandomSearch,
    "nsga2": NSGA2,
    "aging": Aging,
}
#: The strategy of a search that names none (LV-BERT's).
DEFAULT_STRATEGY = "evolution"

__all__ = ["DEFAULT_STRATEGY", "STRATEGIES", "Aging", "Evolution", "NSGA2", "RandomSearch", "Strategy"]
