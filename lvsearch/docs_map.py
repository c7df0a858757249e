"""The file map of ``docs/architecture.md``, generated from the package's module docstrings.

One table row per module under ``lvsearch/``: its path, its line count and the first sentence
of its module docstring, written between ``<!-- filemap:begin -->`` and ``<!-- filemap:end -->``.
``tests/test_docs_map.py`` checks that the committed file equals :func:`render`; regenerate it
with ``python -m lvsearch.docs_map``.
"""

import ast
import re
from pathlib import Path

BEGIN = "<!-- filemap:begin (python -m lvsearch.docs_map) -->"
END = "<!-- filemap:end -->"
PACKAGE = Path(__file__).resolve().parent
DOC = PACKAGE.parent / "docs" / "architecture.md"


def first_sentence(docstring: str) -> str:
    """The first sentence of a docstring's first paragraph, on one line, with its reST code
    (double backquotes, roles such as ``:func:``) as Markdown code. The sentence ends at a
    ``.``, ``!`` or ``?`` outside brackets followed by whitespace and a capital letter or a
    backquote (so ``eq. 6`` and ``e.g. a`` do not end it), or at the paragraph's end."""
    para = " ".join(docstring.strip().split("\n\n")[0].split())
    para = re.sub(r":[a-z]+:`~?([^`]+)`", r"``\1``", para).replace("``", "`")  # reST roles -> Markdown code
    depth = 0
    for i, ch in enumerate(para):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        elif ch in ".!?" and depth == 0 and re.match(r"\s+[A-Z`:]", para[i + 1:]):
            return para[:i + 1]
    return para


def modules(package: Path = PACKAGE) -> list[tuple[str, int, str]]:
    """``(path relative to the repository, line count, first docstring sentence)`` of every
    ``.py`` file under ``package``, a package's ``__init__.py`` first, then its modules and
    sub-packages in name order.

    Raises:
        ValueError: a module without a docstring (give it one: the map is made of them).
    """
    rows = []
    root = package.parent
    files = sorted(package.rglob("*.py"), key=lambda p: (p.parent.relative_to(package).parts,
                                                          p.name != "__init__.py", p.name))
    for path in files:
        text = path.read_text(encoding="utf-8")
        doc = ast.get_docstring(ast.parse(text))
        if not doc:
            raise ValueError(f"{path.relative_to(root)} has no module docstring: give it one (its first "
                             "sentence is its line in docs/architecture.md's file map)")
        rows.append((path.relative_to(root).as_posix(), len(text.splitlines()), first_sentence(doc)))
    return rows


def file_map_markdown(package: Path = PACKAGE) -> str:
    """The generated block, markers included, as a Markdown table (no trailing newline)."""
    lines = [BEGIN, "| file | lines | what it is (first sentence of its docstring) |", "|---|---:|---|"]
    for path, n, sentence in modules(package):
        escaped = sentence.replace("|", r"\|")
        lines.append(f"| `{path}` | {n} | {escaped} |")
    lines.append(END)
    return "\n".join(lines)


def render(text: str, package: Path = PACKAGE) -> str:
    """``text`` (docs/architecture.md) with its file-map block replaced by a fresh one.

    Raises:
        ValueError: the markers are missing, repeated or out of order.
    """
    start, end = text.find("<!-- filemap:begin"), text.find(END)
    if start < 0 or end < start or text.count("<!-- filemap:begin") != 1 or text.count(END) != 1:
        raise ValueError(f"docs/architecture.md needs exactly one '{BEGIN}' ... '{END}' block")
    return text[:start] + file_map_markdown(package) + text[end + len(END):]


def write_file_map(path: str | Path | None = None) -> None:
    """Rewrite the file-map block of ``docs/architecture.md`` of the checkout (or ``path``)."""
    from lvsearch.io import atomic_write_bytes

    target = Path(path) if path else DOC
    atomic_write_bytes(target, render(target.read_text(encoding="utf-8")).encode("utf-8"))


if __name__ == "__main__":
    write_file_map()
