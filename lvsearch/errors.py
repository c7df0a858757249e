"""The one exception type a user can cause.

Every error that bad input can trigger (a missing path, bad JSON, an unknown op, an empty
corpus, a tokenizer/checkpoint mismatch, ...) is raised as :class:`LvsearchError` with a
message that names the file involved and the fix. The CLI prints the message and exits with
status 2, without a traceback. Anything else escaping to the CLI is a bug in lvsearch.
"""

from __future__ import annotations


class LvsearchError(Exception):
    """A user-facing error: the message names the file and says how to fix it."""

    def __init__(self, message: str, *, fix: str | None = None):
        self.message, self.fix = message, fix
        super().__init__(message if fix is None else f"{message}\n  fix: {fix}")
