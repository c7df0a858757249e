"""The HF template's copies of lvsearch.model stay in step with their sources.

``lvsearch/export/hf_template/modeling_lvsearch.py`` re-implements the embeddings, mixing, output
stage and heads on purpose (an exported folder imports nothing from lvsearch); the slot ops are
not re-implemented: the export ships lvsearch's op modules themselves (lvsearch/ops). Each
copied function or method carries a marker on the line above its ``def``, as transformers does:

- ``# Copied from lvsearch.model.X.f with a->b``: the block must
  equal its source after the renames (whole identifiers, applied to the source), compared as
  ASTs without docstrings, type annotations or argument defaults (comments and line breaks
  never count). The function's own name may differ.
- ``# Adapted from lvsearch.model.mixing.LayerMixing.forward [sha:0123456789ab] (why)``: the
  block differs on purpose; the hash is of the source's normalised AST, so a change to the
  source fails here, naming the block to review, before parity numbers move. After review,
  put the hash the failure prints into the marker.

Constructors are not marked: the parameter names and shapes they build are checked by the
state-dict mapping and the parity tests in test_export.py.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
import re
from pathlib import Path

import pytest
from _shared import REPO

TEMPLATE = REPO / "lvsearch" / "export" / "hf_template" / "modeling_lvsearch.py"
MARKER = re.compile(r"^\s*# (Copied|Adapted) from (lvsearch(?:\.\w+)+)(.*)$")
RENAMES = re.compile(r"^\s+with\s+(.+)$")
SHA = re.compile(r"\[sha:([0-9a-f]{12})\]")


def _normalised(fn: ast.FunctionDef, renames: dict[str, str] | None = None) -> str:
    """``fn`` without its name, docstring, annotations and defaults, identifiers renamed."""
    fn = ast.parse(ast.unparse(fn)).body[0]  # a private copy
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        body = body[1:] or [ast.Pass()]
    fn.body, fn.name, fn.returns, fn.decorator_list = body, "_", None, []
    fn.args.defaults, fn.args.kw_defaults = [], [None] * len(fn.args.kwonlyargs)
    renames = renames or {}
    for node in ast.walk(fn):
        if isinstance(node, ast.arg):
            node.annotation = None
            node.arg = renames.get(node.arg, node.arg)
        elif isinstance(node, ast.Name):
            node.id = renames.get(node.id, node.id)
        elif isinstance(node, ast.Attribute):
            node.attr = renames.get(node.attr, node.attr)
    return ast.unparse(fn)


def _source_function(qualname: str, texts: dict[Path, str]) -> ast.FunctionDef:
    """The function or method ``lvsearch.pkg.module[.Class].name`` in the repository."""
    parts = qualname.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        path = REPO.joinpath(*parts[:cut]).with_suffix(".py")
        if path.is_file():
            break
    else:
        raise LookupError(f"no module file for {qualname}")
    node: ast.AST = ast.parse(texts.get(path) or path.read_text(encoding="utf-8"))
    for name in parts[cut:]:
        found = [c for c in ast.iter_child_nodes(node)
                 if isinstance(c, (ast.FunctionDef, ast.ClassDef)) and c.name == name]
        if not found:
            raise LookupError(f"{qualname}: no {name!r} in {path.relative_to(REPO)}")
        node = found[0]
    if not isinstance(node, ast.FunctionDef):
        raise TypeError(f"{qualname} is not a function")
    return node


def _blocks(template_text: str) -> list[tuple[str, str, str, str, ast.FunctionDef]]:
    """``(kind, source qualname, rest of the marker, template block name, block)`` per marker."""
    lines = template_text.splitlines()
    defs = {}
    tree = ast.parse(template_text)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for c in node.body:
                if isinstance(c, ast.FunctionDef):
                    defs[c.lineno] = (f"{node.name}.{c.name}", c)
        elif isinstance(node, ast.FunctionDef) and node in tree.body:
            defs[node.lineno] = (node.name, node)
    out = []
    for i, line in enumerate(lines, start=1):
        m = MARKER.match(line)
        if not m:
            continue
        j = i + 1
        while MARKER.match(lines[j - 1]):
            j += 1
        if j not in defs:
            raise AssertionError(f"{TEMPLATE.name}:{i}: the marker is not followed by a def")
        out.append((m.group(1), m.group(2), m.group(3), *defs[j]))
    return out


def drifted(source_texts: dict[Path, str] | None = None) -> list[str]:
    """One message per marked block that no longer matches its source (``source_texts``
    replaces files' text, to test the check itself)."""
    texts = source_texts or {}
    problems = []
    for kind, qualname, rest, name, block in _blocks(TEMPLATE.read_text(encoding="utf-8")):
        try:
            src = _source_function(qualname, texts)
        except (LookupError, TypeError) as e:
            problems.append(f"{name}: its source is gone ({e})")
            continue
        if kind == "Copied":
            renames = {}
            m = RENAMES.match(rest)
            if m:
                for pair in m.group(1).split(","):
                    a, b = (x.strip() for x in pair.split("->"))
                    renames[a] = b
            want, got = _normalised(src, renames), _normalised(block)
            if want != got:
                diff = "\n".join(difflib.unified_diff(want.splitlines(), got.splitlines(), qualname, name, lineterm=""))
                problems.append(f"{name} drifted from {qualname} (copied with {renames or 'no renames'}):\n{diff}")
        else:
            sha = hashlib.sha256(_normalised(src).encode()).hexdigest()[:12]
            m = SHA.search(rest)
            if m is None or m.group(1) != sha:
                problems.append(f"{name} is adapted from {qualname}, which changed (sha {sha}, marker "
                                f"{m.group(1) if m else 'none'}): review the block, then put [sha:{sha}] in its marker")
    return problems


def test_every_marked_block_matches_its_source():
    blocks = _blocks(TEMPLATE.read_text(encoding="utf-8"))
    names = {b[3] for b in blocks}
    # every computation outside the shipped op modules is marked
    assert {"LvsearchEmbeddings.forward", "LvsearchMLMHead.forward", "LvsearchModel._mix",
            "LvsearchModel.forward", "LvsearchPreTrainedModel._init_weights"} <= names
    problems = drifted()
    assert not problems, "\n\n".join(problems)


@pytest.mark.parametrize("path,old,new,block", [
    ("lvsearch/model/embeddings.py", "x = self.dropout(self.norm(x))", "x = self.norm(x)", "LvsearchEmbeddings.forward"),
    ("lvsearch/model/mixing.py", "term = w[j].to(h.dtype) * h\n            x = term if x is None else x + term\n        return x\n\n\ndef mix_inputs",
     "term = w[j] * h\n            x = term if x is None else x + term\n        return x\n\n\ndef mix_inputs", "LvsearchModel._mix"),
])
def test_a_changed_source_fails_naming_the_block(path, old, new, block):
    file = REPO / path
    text = file.read_text(encoding="utf-8")
    assert text.count(old) == 1
    problems = drifted({file: text.replace(old, new)})
    assert len(problems) == 1 and problems[0].startswith(block), problems
