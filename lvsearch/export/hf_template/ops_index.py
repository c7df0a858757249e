"""The op registry as ``modeling_lvsearch.py`` sees it: ``OPS`` (op code -> ``OpSpec``, in
canonical order) and ``SlotLayer``.

Inside lvsearch (the installed template, which ``lvsearch evaluate --model hf:`` runs for a
verified export) this module reads :mod:`lvsearch.ops`. ``lvsearch export`` does not copy this
file: it writes in its place a static ``ops_index.py`` that imports the op modules it ships
next to it (:func:`lvsearch.export.ops_index_source`), so the folder needs no lvsearch.
"""

from lvsearch.ops import specs
from lvsearch.ops.base import SlotLayer

OPS = specs()

__all__ = ["OPS", "SlotLayer"]
