"""``lvsearch quickstart``: corpus → tokenizer → supernet → evolution → retrain → evaluation →
report, in one resumable command (see :mod:`lvsearch.quickstart.job`)."""
