"""``python -m lvsearch``: the ``lvsearch`` command line (:func:`lvsearch.cli.main`)."""

from lvsearch.cli import main

raise SystemExit(main())
