"""Fault injection for the kill-and-resume tests: SIGKILL the process at a named point.

Set ``LVSEARCH_KILL_AT=POINT`` (one point) and the process kills itself with ``SIGKILL`` the
first time it reaches that point, exactly as a crash, an OOM kill or a pre-empted node would:
no ``finally`` block, no flush. The points are where a kill is most likely to leave a record
half-written:

=============================  ==============================================================
``step:N``                     after optimizer step ``N`` (before its logs and checkpoint)
``checkpoint-write:N``         inside the checkpoint write of step ``N``: tensors written to
                               the temporary folder, not yet renamed into place
``before-summary``             after a training run's final checkpoint, before ``summary.json``
``search-save:N``              inside the search's save after iteration ``N``: ``state.json``
                               written, ``history.jsonl`` and ``topk.json`` not yet
``finalists-round:N``          after finalist round ``N`` was trained, before it is recorded
``quickstart-stage:NAME``      after quickstart stage ``NAME`` ran, before it is marked done
``replace-folder``             inside a folder replacement (an ``--overwrite`` export, a model
                               directory): the old folder moved aside, the new one not yet in place
=============================  ==============================================================

Unset (the default) this costs one dictionary lookup per call. ``tests/test_reliability.py``
uses it; it is documented for anyone who wants to reproduce a kill.
"""

from __future__ import annotations

import os
import signal

ENV = "LVSEARCH_KILL_AT"


def kill_point(name: str) -> None:
    """SIGKILL this process when ``$LVSEARCH_KILL_AT`` equals ``name``; otherwise do nothing."""
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
