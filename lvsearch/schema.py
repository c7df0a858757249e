"""The base of lvsearch's file models (pydantic), checked by :func:`lvsearch.io.check_fields`.

A file model declares the fields a reader relies on, with their JSON types; fields it does not
declare are kept (``extra="allow"``), so a file written by a newer lvsearch with more fields
still reads. Types are strict (JSON ``"5"`` is not an integer and ``true`` is not a number;
an integer is a valid float). :func:`lvsearch.io.check_fields` turns the first mismatch into one
:class:`~lvsearch.errors.LvsearchError` naming the file and the field.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["FileModel", "Finite", "PositiveFinite", "Count", "needs_when_done"]


class FileModel(BaseModel):
    """Base of every file model: strict JSON types, undeclared fields kept."""

    model_config = ConfigDict(strict=True, extra="allow")


Finite = Annotated[float, Field(allow_inf_nan=False)]
"""A finite number (JSON integer or float; ``NaN`` / ``Infinity`` refused)."""

PositiveFinite = Annotated[float, Field(allow_inf_nan=False, gt=0)]
"""A finite number > 0 (a measured time, a size)."""

Count = Annotated[int, Field(ge=0)]
"""A non-negative JSON integer."""


def needs_when_done(*names: str):
    """A model validator: when the model's ``status`` is ``"done"``, each field in ``names``
    must be present and not null (a finished stage records its results; a skipped one only
    its reason)."""

    @model_validator(mode="after")
    def check(self):
        if getattr(self, "status", None) == "done":
            fields = type(self).model_fields
            missing = [fields[n].alias or n for n in names if getattr(self, n, None) is None]
            if missing:
                raise ValueError(f"status 'done' needs {', '.join(repr(n) for n in missing)}")
        return self

    return check
