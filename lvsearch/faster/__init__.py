"""``lvsearch faster``: supernet + latency table → NSGA-II and random-search picks → retrained →
timed end to end → side-by-side report, in one resumable command (see :mod:`lvsearch.faster.job`)."""
