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

``LVSEARCH_KILL_SIGNAL=USR2`` (or another signal name) sends that signal instead of ``SIGKILL``:
``USR2`` is what Slurm sends before a timeout or a preemption, which a job dispatched through
submitit (:mod:`lvsearch.dispatch`) answers by checkpointing and requeueing itself. A requeued
attempt of a dispatched job runs with both variables cleared (:func:`clear`).
``LVSEARCH_KILL_SIGNAL=HANG`` sends no signal: the process prints ``lvsearch.faults: hanging at
POINT`` to stderr and sleeps until something outside ends it (``tests/test_slurm.py`` finds a
Slurm job there, mid-run, and requeues or cancels it).

Unset (the default) this costs one dictionary lookup per call. ``tests/test_reliability.py``
uses it; it is documented for anyone who wants to reproduce a kill.
"""

from __future__ import annotations

import os
import signal

ENV = "LVSEARCH_KILL_AT"
SIGNAL_ENV = "LVSEARCH_KILL_SIGNAL"


def kill_point(name: str) -> None:
    """SIGKILL this process (or send it ``$LVSEARCH_KILL_SIGNAL``) when ``$LVSEARCH_KILL_AT``
    equals ``name``; otherwise do nothing."""
    if os.environ.get(ENV) == name:
        sig = os.environ.get(SIGNAL_ENV, "KILL").upper()
        if sig == "HANG":
            import sys
            import time

            print(f"lvsearch.faults: hanging at {name} (pid {os.getpid()})", file=sys.stderr, flush=True)
            while True:  # signals that do not end the process (a bypassed SIGTERM) leave it here
                time.sleep(3600)
        os.kill(os.getpid(), getattr(signal, sig if sig.startswith("SIG") else f"SIG{sig}"))


def clear() -> None:
    """Remove the fault injection from this process's environment (a requeued job's retry)."""
    os.environ.pop(ENV, None)
    os.environ.pop(SIGNAL_ENV, None)
