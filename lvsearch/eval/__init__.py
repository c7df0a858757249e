"""Evaluation of trained models: BLiMP zero-shot (pseudo-log-likelihood), fine-tuning on
classification / regression tasks, and MLM dev metrics. The CLI is ``lvsearch evaluate``
(:mod:`lvsearch.eval.cli`, over the job :func:`lvsearch.eval.job.evaluate`)."""
