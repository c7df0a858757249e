"""Atomic file writes and safe reads shared by every job.

All state that lvsearch writes (manifests, checkpoints, search state) goes through
:func:`atomic_write_bytes`: data is written to a temporary file in the same folder, flushed
and fsynced, then renamed over the target, so a crash never leaves a half-written file and
never destroys the previous version. Reads of JSON state raise :class:`LvsearchError` naming
the file when it is missing or not valid JSON. Nothing is ever loaded with pickle.

Every input file that is read whole goes through one bounded reader: :func:`read_bytes`
(regular files and pipes only, at most a per-kind byte cap), then :func:`read_text` (UTF-8),
then :func:`read_json` (depth capped) or :func:`read_yaml` / :func:`parse_yaml` (node count,
depth and alias expansion capped on the composed node graph, before any value is built).
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable

from lvsearch.errors import LvsearchError
from lvsearch.faults import kill_point


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file in the same folder + fsync + rename).

    Raises:
        LvsearchError: the write fails (disk full, quota, read-only file system, permissions:
            :func:`write_error`); the message names ``path``, the temporary file is removed and
            an earlier ``path`` is left as it was.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise write_error(path, e) from None
    try:
        os.fchmod(fd, 0o666 & ~umask())  # mkstemp creates 0600; give the usual permissions
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(e, OSError):
            raise write_error(path, e) from None
        raise
    remove_stale_temps(path.parent, f".{path.name}.", (".tmp",))


#: What a failed write's errno means for the user, and the fix (:func:`write_error`).
_WRITE_ERRNOS = {
    errno.ENOSPC: ("the disk is full", "free space on that disk (df -h {folder}) or choose another --out"),
    errno.EDQUOT: ("your disk quota is exceeded", "free space within your quota (quota -s) or choose another --out"),
    errno.EFBIG: ("the file is too large for its file system", "choose another --out on a file system that holds it"),
    errno.EROFS: ("the file system is read-only", "choose another --out on a writable file system"),
    errno.EACCES: ("permission denied", "make {folder} writable for you, or choose another --out"),
    errno.EPERM: ("permission denied", "make {folder} writable for you, or choose another --out"),
}


def write_error(path: str | os.PathLike, err: OSError) -> LvsearchError:
    """The :class:`LvsearchError` for an ``OSError`` raised while writing ``path``: names the
    file (an ``ENOSPC`` from ``write()`` names none), what the errno means (disk full, quota,
    read-only file system, permissions) and the fix, and says that finished work is kept."""
    path = Path(path)
    reason, fix = _WRITE_ERRNOS.get(err.errno, (err.strerror or str(err), "check the path and its permissions"))
    return LvsearchError(f"cannot write {path}: {reason} ({err.strerror or err})",
                         fix=fix.format(folder=path.parent) + "; then re-run the command (with --resume where it has "
                             "one): what was finished before is kept")


def remove_stale_temps(folder: str | os.PathLike, prefix: str, suffixes: tuple[str, ...] = ("",)) -> list[Path]:
    """Delete leftovers of interrupted writes in ``folder``: entries whose name starts with
    ``prefix`` and ends with one of ``suffixes`` (files or whole folders). Each writer calls it
    after its own write succeeded, with the temp-name pattern only it uses for that target
    (a SIGKILL between creating a temp and renaming it leaves one behind; lvsearch writes each
    target from a single process, so a matching temp can only be such a leftover).

    Returns the paths removed."""
    folder = Path(folder)
    removed = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for entry in entries:
        name = entry.name
        if name.startswith(prefix) and any(name.endswith(s) for s in suffixes):
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def replace_folder(tmp: str | os.PathLike, folder: str | os.PathLike) -> Path:
    """Move the finished temporary folder ``tmp`` (a sibling named ``.NAME.*.tmp``) to
    ``folder``, replacing an existing ``folder`` only at this last step (it is first moved into
    a ``.NAME.*.old`` sibling, removed after the rename), then remove leftovers of earlier
    writes of ``folder`` that were killed before their rename. Returns ``folder``.

    A kill between the two renames leaves ``folder`` absent and its old contents in the
    ``.old`` sibling: the next call first moves them back (:func:`restore_replaced_folder`), so
    that a leftover is deleted only while ``folder`` holds a complete version.

    Raises:
        LvsearchError: ``folder`` is the current folder or above it (:func:`check_replaceable`).
        OSError: the renames fail (``tmp`` is left for the caller to remove).
    """
    tmp, folder = Path(tmp), Path(folder)
    check_replaceable(folder)
    restore_replaced_folder(folder)
    old = None
    if folder.exists():
        old = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.", suffix=".old"))
        os.replace(folder, old / "x")
        kill_point("replace-folder")
    os.replace(tmp, folder)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    remove_stale_temps(folder.parent, f".{folder.name}.", (".tmp", ".old"))
    return folder


def check_replaceable(folder: str | os.PathLike, flag: str = "--out") -> None:
    """Refuse to replace ``folder`` when it names no folder of its own (``.``, ``..``, an
    empty path) or is the current folder or one above it: renaming it away would pull the
    working folder from under the user (and ``.``/``..`` cannot be renamed at all, which left
    empty ``..*.old`` folders behind). Called before anything is renamed.

    Raises:
        LvsearchError: naming ``flag``, the path and the fix.
    """
    given = str(folder)
    path = Path(os.path.abspath(folder))
    cwd = Path(os.getcwd())
    if Path(given).name in ("", ".", "..") or path == cwd or path in cwd.parents:
        where = "is the current folder" if path == cwd else "contains the current folder"
        raise LvsearchError(f"{flag} {given!r} {where} ({path}); it cannot be replaced",
                            fix=f"pass a named folder for {flag}, e.g. {flag} {cwd / 'export'}")


def restore_replaced_folder(folder: str | os.PathLike) -> Path | None:
    """Undo a replacement of ``folder`` killed between its two renames (:func:`replace_folder`):
    when ``folder`` is absent and a ``.NAME.*.old`` sibling holds its old contents, move them
    back, with a warning, and return ``folder``; else return None and change nothing. Writers
    call it before they look at ``folder``, so the user's only copy is never taken for a
    leftover.

    Raises:
        OSError: the move fails (nothing is deleted).
    """
    folder = Path(folder)
    if folder.exists() or folder.is_symlink() or not folder.parent.is_dir():
        return None
    prefix = f".{folder.name}."
    kept = sorted((p for p in folder.parent.iterdir()
                   if p.name.startswith(prefix) and p.name.endswith(".old") and (p / "x").exists()),
                  key=lambda p: p.stat().st_mtime_ns)
    if not kept:
        return None
    os.replace(kept[-1] / "x", folder)
    shutil.rmtree(kept[-1], ignore_errors=True)
    from lvsearch import ui

    ui.warn(f"{folder} was missing after an interrupted replacement; restored its previous contents "
            f"from {kept[-1].name}")
    return folder


def check_writable_folder(path: str | os.PathLike, flag: str = "--out", *, shown: str | None = None) -> Path:
    """Make sure the folder ``path`` can be created and written before any work starts, without
    creating it: the nearest existing ancestor must be a folder in which a temporary folder can
    be made (and removed again). Returns ``path`` as given (a :class:`~pathlib.Path`).

    Raises:
        LvsearchError: ``path`` or an ancestor is a file, or the location is not writable
            (permissions, a read-only or virtual file system such as /proc); the message names
            ``flag`` and the path (``shown`` instead, e.g. the file that goes into ``path``).
    """
    path = Path(path)
    name = shown or str(path)
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        where = "is a file" if probe == path and shown is None else f"is under {probe}, which is a file"
        raise LvsearchError(f"{flag} {name} {where}", fix=f"choose a folder path for {flag}")
    if path.is_dir():
        probe = path
    try:
        tmp = tempfile.mkdtemp(prefix=".lvsearch-write-probe.", dir=probe)
        os.rmdir(tmp)
    except OSError as e:
        raise LvsearchError(f"{flag} {name} cannot be written ({e.strerror or e} in {probe})",
                            fix=f"choose a writable location for {flag}") from None
    return path


#: Marker files that say what a folder holds, checked in this order (:func:`folder_kind`).
_KINDS: tuple[tuple[str, str], ...] = (
    ("optimizer.safetensors", "a training checkpoint"),  # before state.json, which a checkpoint holds too
    ("state.json", "a search"),
    ("checkpoints", "a training run"),
    ("manifest.json", "a prepared dataset"),
    ("model.safetensors", "a model directory"),
    ("pytorch_model.bin", "a model directory"),
    ("train.tsv", "a task folder"),
    ("rank_check.json", "a rank check"),
    ("quickstart.json", "a quickstart run"),
    ("faster.json", "an lvsearch faster run"),
)


def folder_kind(folder: str | os.PathLike) -> str | None:
    """What ``folder`` holds by its marker files (``"a training run"``, ``"a model directory"``,
    ``"a prepared dataset"``, ``"a search"``, ``"a task folder"``, …), or None."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    for name, kind in _KINDS:
        if (folder / name).exists():
            return kind
    return None


def guard_output(out: str | os.PathLike, *, flag: str = "--out", inputs: Iterable[tuple[str, Any]] = (),
                 overwrite: bool = False, is_file: bool = False,
                 own: Callable[[Path], bool] | None = None, writes: Iterable[str] | None = None) -> Path:
    """The output-safety rule every verb applies to what it writes, before anything is written,
    renamed or deleted: ``--overwrite`` replaces only a previous output of the same verb.

    Refused, with or without ``overwrite``:

    * ``out`` is one of the command's ``inputs`` (``(flag, path)`` pairs; None paths are
      skipped), or a folder that contains one (replacing it would delete the input);
    * an existing file ``out`` of a model directory, training run, dataset, search or task
      folder (:func:`folder_kind`) that is not a previous output of this verb (``own``), e.g.
      ``evaluate --model M --out M/model.safetensors``;
    * with ``overwrite``, a folder ``out`` that is the current folder or one above it
      (``cd RUN && train-supernet --out . --overwrite`` deleted the run it stood in);
    * with ``overwrite`` and ``writes`` (glob patterns of the names the verb writes at the top
      of its folder), a folder ``out`` that also holds anything else (a user's notes, a search
      or rank check saved inside a run): replacing the folder would delete it. Names starting
      with ``.`` (the tools' own temporaries and locks) are not counted.

    A file ``out`` that exists is replaced only with ``overwrite`` and only when ``own(out)``
    says it is a previous output of this verb (any existing file when ``own`` is None). Folder
    outputs keep their verb's own check of what the folder holds. Returns ``out`` as a Path.

    Raises:
        LvsearchError: naming ``flag``, the path, the input it would destroy and the fix.
    """
    out = Path(out)
    target = Path(os.path.abspath(out))
    for in_flag, path in inputs:
        if path is None:
            continue
        src = Path(os.path.abspath(path))
        if target == src:
            raise LvsearchError(f"{flag} {out} is the input {in_flag} {path} of this command; writing there would "
                                "destroy it (refused with or without --overwrite)",
                                fix=f"pass another {flag}")
        if target in src.parents:
            raise LvsearchError(f"{flag} {out} contains the input {in_flag} {path} of this command; replacing it would "
                                "delete that input (refused with or without --overwrite)",
                                fix=f"pass an {flag} outside {target}")
    if is_file:
        kind = folder_kind(target.parent)
        if kind is not None and target.exists() and not (own is not None and target.is_file() and own(target)):
            raise LvsearchError(f"{flag} {out} is a file of {target.parent}, which holds {kind}, and not a previous "
                                "output of this command (refused with or without --overwrite)",
                                fix=f"write {flag} to a new file")
        if target.exists() and not target.is_file():
            raise LvsearchError(f"{flag} {out} is a folder", fix=f"pass a file path for {flag}")
        if target.is_file():
            if not overwrite:
                raise LvsearchError(f"{flag} {out} already exists", fix="pass --overwrite to replace it, or another path")
            if own is not None and not own(target):
                raise LvsearchError(f"{flag} {out} exists and is not a previous output of this command; --overwrite "
                                    "replaces only those", fix=f"pass another {flag}")
        return out
    cwd = Path(os.getcwd())
    if overwrite and target.exists() and (target == cwd or target in cwd.parents):
        where = "is the current folder" if target == cwd else "contains the current folder"
        raise LvsearchError(f"{flag} {out} {where} ({target}); --overwrite would delete the folder you are working in",
                            fix=f"run from another folder, or pass a named {flag} elsewhere")
    if overwrite and writes is not None and target.is_dir():
        import fnmatch

        pats = tuple(writes)
        foreign = sorted(e.name + ("/" if e.is_dir() else "") for e in target.iterdir()
                         if not e.name.startswith(".") and not any(fnmatch.fnmatch(e.name, p) for p in pats))
        if foreign:
            shown_names = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise LvsearchError(f"{flag} {out} also holds {shown_names}, which this command did not write; "
                                "--overwrite replaces the whole folder and would delete them",
                                fix=f"move them out of {out} first, or pass another {flag}")
    return out


def save_safetensors(tensors: dict, path: str | os.PathLike, *, metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` (name -> torch tensor, no two sharing memory) to the safetensors file
    ``path`` with the usual permissions (``0666 & ~umask``, 0644 by default), like every other
    file lvsearch writes: ``safetensors.torch.save_file`` itself creates 0600 files. Callers
    write into a temporary folder that is renamed into place, so the write is atomic.

    Raises:
        LvsearchError: an ``OSError`` while writing (:func:`write_error`, naming ``path``)."""
    from safetensors.torch import save_file

    from safetensors import SafetensorError

    try:
        save_file(tensors, str(path), metadata=metadata)
        os.chmod(path, 0o666 & ~umask())
    except OSError as e:
        raise write_error(path, e) from None
    except SafetensorError as e:  # its I/O errors end in "(os error N)"
        code = re.search(r"\(os error (\d+)\)", str(e))
        if code is None:
            raise
        raise write_error(path, OSError(int(code.group(1)), os.strerror(int(code.group(1))))) from None


def copy_file(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """``shutil.copyfile(src, dst)``, a failed write named by ``dst`` (a full disk during a copy
    raised an OSError naming ``src``, the file being read).

    Raises:
        LvsearchError: writing ``dst`` failed (:func:`write_error`).
        OSError: ``src`` cannot be read.
    """
    try:
        shutil.copyfile(src, dst)
    except OSError as e:
        if e.errno not in _WRITE_ERRNOS or (e.errno in (errno.EACCES, errno.EPERM) and e.filename == str(src)):
            raise
        raise write_error(dst, e) from None


def umask() -> int:
    """The process umask (read without changing it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def dumps_json(obj: Any) -> str:
    """Canonical JSON text used for every file lvsearch writes (sorted keys, 2-space indent)."""
    return json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Serialise ``obj`` with :func:`dumps_json` and write it atomically to ``path``."""
    atomic_write_bytes(path, dumps_json(obj).encode("utf-8"))


# ------------------------------------------------------------------ reading text files
#: Byte-order marks of the encodings that are recognisable from a file's first bytes (UTF-32
#: before UTF-16: the UTF-32 LE mark starts with the UTF-16 LE one). Their iconv names.
_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32LE"), (codecs.BOM_UTF32_BE, "UTF-32BE"),
         (codecs.BOM_UTF16_LE, "UTF-16LE"), (codecs.BOM_UTF16_BE, "UTF-16BE"))


def sniff_encoding(head: bytes) -> str | None:
    """The encoding of a text file whose first bytes are ``head`` (a few hundred suffice) when
    it is recognisably not UTF-8: ``"UTF-16LE"``, ``"UTF-16BE"``, ``"UTF-32LE"`` or
    ``"UTF-32BE"`` (from a byte-order mark, or for UTF-16 without one, from the zero byte every
    other byte that mostly-ASCII text has there); else None. A UTF-8 byte-order mark is UTF-8."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    pairs = len(head) // 2
    if pairs >= 2:
        even, odd = head[0:2 * pairs:2], head[1:2 * pairs:2]
        if odd.count(0) >= pairs / 2 and even.count(0) == 0:
            return "UTF-16LE"
        if even.count(0) >= pairs / 2 and odd.count(0) == 0:
            return "UTF-16BE"
    return None


def eight_bit_guess(byte: int) -> str:
    """What a byte that is not valid UTF-8 most likely is: a Latin-1 / Windows-1252 character
    (what spreadsheet programs and older editors write), shown with its escape."""
    try:
        char = bytes([byte]).decode("cp1252")
    except UnicodeDecodeError:
        return "a byte no common 8-bit encoding uses there"
    return f"{char!r} in Latin-1 / Windows-1252"


def decode_text(data: bytes, path: str | os.PathLike, *, what: str = "text file") -> str:
    """Decode the bytes of a text file that lvsearch reads (corpora, task files, BLiMP JSONL,
    architecture JSON, recipes): UTF-8, with or without a leading byte-order mark (which is
    dropped: ``utf-8-sig``), as many spreadsheet programs write it.

    Raises:
        LvsearchError: the bytes are in another encoding; the message names ``what``, the file
            and the encoding found (UTF-16/32 from its byte-order mark or zero bytes; otherwise
            the first byte that is not UTF-8, its line, and that byte in Latin-1 / Windows-1252)
            and the fix (save it as UTF-8, with the ``iconv`` command that does it).
    """
    if sniff_encoding(data[:512]) is not None:  # UTF-16 of ASCII text is valid UTF-8 (with NUL bytes)
        raise encoding_error(path, data[:512], what=what)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise encoding_error(path, data[:512], e, what=what) from None


def encoding_error(path: str | os.PathLike, head: bytes, err: UnicodeDecodeError | None = None, *,
                   what: str = "text file", data: bytes | None = None) -> LvsearchError:
    """The :class:`LvsearchError` for a file that is not UTF-8 (see :func:`decode_text`);
    ``head`` is its first bytes, ``err`` the decode error (its ``object`` holds the bytes
    decoded, ``data`` overrides them)."""
    found = sniff_encoding(head)
    if found is not None:
        marked = any(head.startswith(b) for b, _ in _BOMS)
        source = "byte-order mark" if marked else "zero bytes between the letters"
        # iconv reads the mark of UTF-16/UTF-32; without one it must be told the byte order
        desc, iconv = f"is {found} text ({source}), not UTF-8", found[:-2] if marked else found
    elif err is not None:
        data = err.object if data is None else data
        bad = data[err.start]
        line = data.count(b"\n", 0, err.start) + 1
        desc = (f"is not UTF-8: byte 0x{bad:02x} on line {line} is {eight_bit_guess(bad)}, "
                "probably the file's encoding")
        iconv = "WINDOWS-1252"
    else:
        desc, iconv = "is not UTF-8 text", "YOUR-ENCODING"
    name = Path(path).name
    return LvsearchError(f"{what} {path} {desc}",
                         fix=f"save it as UTF-8 (in a spreadsheet program: 'CSV UTF-8'), e.g. "
                             f"iconv -f {iconv} -t UTF-8 {name} > utf8-{name}")


# ------------------------------------------------------------------ the bounded reader
#: The largest text file :func:`read_text` reads whole (corpora are streamed, not read whole;
#: task files, BLiMP JSONL and learning curves are far smaller).
MAX_TEXT_BYTES = 1 << 30
#: The largest JSON file :func:`read_json` reads (a search state of 100k evaluations is ~50 MB).
MAX_JSON_BYTES = 256 << 20
#: The largest YAML file :func:`read_yaml` reads (recipes and search spaces are a few KB).
MAX_YAML_BYTES = 1 << 20
#: The most nodes a YAML document may expand to, aliases counted at every use (a 1 KB
#: "billion laughs" file of nested anchors expands to 10^9; lvsearch's own have < 500).
MAX_YAML_NODES = 100_000
#: The deepest nesting :func:`read_json` and :func:`parse_yaml` accept (lvsearch's own files
#: nest fewer than 10 levels).
MAX_JSON_DEPTH = 64


def _size(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB" if n >= 1 << 20 else f"{n:,} bytes"


def read_bytes(path: str | os.PathLike, *, what: str = "file", max_bytes: int = MAX_TEXT_BYTES) -> bytes:
    """The bytes of ``path``, read with a bound: the one reader of every input file lvsearch
    reads whole (JSON, YAML, text). Only regular files are read (a symbolic link to one is),
    at most ``max_bytes`` bytes (checked by size, and by reading at most ``max_bytes + 1``
    for a file that grows or a ``/proc`` file whose size says 0).

    Raises:
        LvsearchError: ``path`` is a device (``/dev/zero``), named pipe, socket or other special file, or
            holds more than ``max_bytes`` bytes; the message names ``what`` and the file.
        OSError: the file cannot be opened (``FileNotFoundError``, ``IsADirectoryError``,
            ``PermissionError``, ...), for the caller to word.
    """
    import stat

    path = Path(path)
    st = os.stat(path)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    if not stat.S_ISREG(st.st_mode):  # a named pipe without a writer would block the open for ever
        kind = ("a character device" if stat.S_ISCHR(st.st_mode) else "a block device" if stat.S_ISBLK(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "a named pipe" if stat.S_ISFIFO(st.st_mode)
                else "a special file")
        raise LvsearchError(f"{what} {path} is {kind}, not a regular file", fix="pass the path of a regular file")
    too_big = LvsearchError(f"{what} {path} is larger than {_size(max_bytes)}, the most lvsearch reads for a {what}",
                            fix=f"check that {path} is the {what} meant; no file lvsearch writes is that large")
    if stat.S_ISREG(st.st_mode) and st.st_size > max_bytes:
        raise too_big
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise too_big
    return data


def read_text(path: str | os.PathLike, *, what: str = "text file", max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The text of the UTF-8 file ``path`` (a leading byte-order mark dropped), read whole with
    :func:`read_bytes`'s bound.

    Raises:
        LvsearchError: another encoding (see :func:`decode_text`); a special file or one over
            ``max_bytes`` (:func:`read_bytes`).
        OSError: the file cannot be read (``FileNotFoundError``, ``IsADirectoryError``, ...),
            for the caller to word.
    """
    return decode_text(read_bytes(path, what=what, max_bytes=max_bytes), path, what=what)


def _yaml_loader():
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        """PyYAML's safe loader (no Python objects); :func:`parse_yaml` checks its node graph."""

    return BoundedLoader


def _yaml_duplicate_key(root) -> str | None:
    """The first key given twice in one mapping of a composed YAML node graph (PyYAML keeps
    the last silently), or None; each distinct node is visited once."""
    import yaml

    seen_nodes, stack = set(), [root]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys = set()
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    if (k.tag, k.value) in keys:
                        return k.value
                    keys.add((k.tag, k.value))
                stack.extend((k, v))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return None


def _yaml_expansion(root) -> tuple[int, int]:
    """``(nodes, depth)`` of a composed YAML node graph with every alias expanded where it is
    used, computed on the shared graph (each distinct node once, memoised), so a bomb is
    measured without being expanded; ``(-1, -1)`` for a node that contains itself."""
    import yaml

    size: dict[int, tuple[int, int]] = {}
    dup = _yaml_duplicate_key(root)
    if dup is not None:
        raise _DuplicateKey(dup)
    on_path: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in size and not done:
            continue
        kids = ([x for pair in node.value for x in pair] if isinstance(node, yaml.MappingNode)
                else list(node.value) if isinstance(node, yaml.SequenceNode) else [])
        if not done:
            if id(node) in on_path:
                return -1, -1
            on_path.add(id(node))
            stack.append((node, True))
            for k in kids:
                if id(k) in on_path:
                    return -1, -1
                if id(k) not in size:
                    stack.append((k, False))
            continue
        on_path.discard(id(node))
        n = 1 + sum(size[id(k)][0] for k in kids)
        d = 1 + max((size[id(k)][1] for k in kids), default=0)
        size[id(node)] = (min(n, 1 << 62), d)
    return size[id(root)]


_RAISE = object()


def parse_yaml(text: str, source: str | os.PathLike, *, what: str = "YAML file", fix: str = "repair the file",
               if_invalid: Any = _RAISE) -> Any:
    """Parse YAML ``text`` (from ``source``, for messages) with PyYAML's safe loader after
    checking its node graph: at most :data:`MAX_YAML_NODES` nodes with every alias expanded,
    nesting at most :data:`MAX_JSON_DEPTH` deep, no alias that contains itself, no key given
    twice in one mapping. The check runs
    on the composed graph, before any Python value is built, so an anchor bomb costs
    microseconds and never memory.

    ``if_invalid``: returned for text that is not valid YAML (``--set`` takes such a value as
    a string) instead of raising.

    Raises:
        LvsearchError: invalid YAML (without ``if_invalid``), or a bound exceeded; the message
            names ``what`` and ``source``, the fix is ``fix``.
    """
    import yaml

    loader = _yaml_loader()(text)
    try:
        try:
            node = loader.get_single_node()
        except yaml.YAMLError as e:
            if if_invalid is not _RAISE:
                return if_invalid
            raise LvsearchError(f"{what} {source} is not valid YAML: {e}", fix=fix) from None
        except RecursionError:
            node, nodes, depth = None, 0, MAX_JSON_DEPTH + 1
        else:
            try:
                nodes, depth = _yaml_expansion(node) if node is not None else (0, 0)
            except _DuplicateKey as e:
                raise LvsearchError(f"{what} {source} gives the key {shown(e.args[0])[:60]} twice in one mapping "
                                    "(YAML keeps only the last)", fix="keep one of them") from None
        if nodes < 0:
            raise LvsearchError(f"{what} {source} has an alias that contains itself (a recursive anchor)",
                                fix="write the value out instead of the &anchor / *alias")
        if depth > MAX_JSON_DEPTH:
            raise LvsearchError(f"{what} {source} nests deeper than {MAX_JSON_DEPTH} levels", fix=fix)
        if nodes > MAX_YAML_NODES:
            raise LvsearchError(f"{what} {source} expands to {nodes:,} values through its &anchors and *aliases, "
                                f"more than the {MAX_YAML_NODES:,} lvsearch reads (an alias bomb)",
                                fix="write the values out instead of nesting aliases")
        if node is None:
            return None
        try:
            return loader.construct_document(node)
        except yaml.YAMLError as e:
            if if_invalid is not _RAISE:
                return if_invalid
            raise LvsearchError(f"{what} {source} is not valid YAML: {e}", fix=fix) from None
    finally:
        loader.dispose()


def read_yaml(path: str | os.PathLike, *, what: str = "YAML file", fix: str = "repair the file",
              max_bytes: int = MAX_YAML_BYTES) -> Any:
    """Read a YAML file through the bounded reader: :func:`read_text` (at most ``max_bytes``,
    UTF-8) then :func:`parse_yaml` (node count, depth and alias expansion capped).

    Raises:
        LvsearchError: missing, a folder, a special file, too large, not UTF-8, not valid YAML
            or over a bound; naming ``what`` and the file.
    """
    path = Path(path)
    return parse_yaml(read_input(path, what=what, max_bytes=max_bytes), path, what=what, fix=fix)


def read_input(path: str | os.PathLike, *, what: str, max_bytes: int) -> str:
    """:func:`read_text` of an input file, every ``OSError`` worded for the user.

    Raises:
        LvsearchError: missing, a folder, unreadable, or as :func:`read_text`.
    """
    path = Path(path)
    try:
        return read_text(path, what=what, max_bytes=max_bytes)
    except FileNotFoundError:
        raise LvsearchError(f"{what} not found: {path}", fix="check the path") from None
    except IsADirectoryError:
        raise LvsearchError(f"{what} expected, but {path} is a folder", fix="pass the file") from None
    except OSError as e:
        raise LvsearchError(f"{what} {path} cannot be read ({e.strerror or e})",
                            fix="check the path and its permissions") from None


def shown(text: str) -> str:
    """``text`` from the user's data (a column name, a label, a file name) as a message quotes
    it: with ``repr`` escapes, so that a byte-order mark (``\\ufeff``), a tab or a control
    character is visible: ``'sentence'``, ``'\\ufeffsentence'``, ``'a\\tb'``."""
    return repr(str(text))


def read_json(path: str | os.PathLike, *, what: str = "JSON file", regenerate: str | None = None,
              max_bytes: int = MAX_JSON_BYTES) -> Any:
    """Read a JSON file through the bounded reader (:func:`read_bytes`: at most ``max_bytes``).

    ``regenerate``: the command that writes the file again (``"lvsearch evolve --supernet
    SUPERNET --out OUT --overwrite"``), named by the fix when the file is damaged; without it
    the fix says only to restore or regenerate the file.

    Raises:
        LvsearchError: the file is missing, unreadable, a special file, larger than
            ``max_bytes``, not valid UTF-8 JSON, an object with a key given twice (JSON would
            keep the last silently), or nested deeper than :data:`MAX_JSON_DEPTH`
            (a recursion bomb); the message names the file and
            ``what`` it was supposed to be, the fix ``regenerate``.
    """
    path = Path(path)
    text = read_input(path, what=what, max_bytes=max_bytes)
    damaged_fix = (f"restore it from a copy, or write it again: {regenerate}" if regenerate
                   else "restore it from a copy, or regenerate it with the command that wrote it")
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as e:
        raise LvsearchError(f"{what} {path} gives the key {shown(e.args[0])[:60]} twice in one object (JSON keeps "
                            "only the last)", fix="keep one of them; " + damaged_fix) from None
    except json.JSONDecodeError as e:
        raise LvsearchError(
            f"{what} {path} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})",
            fix=damaged_fix,
        ) from None
    except RecursionError:
        data = None
    except ValueError as e:  # an integer of more than sys.get_int_max_str_digits() digits
        raise LvsearchError(f"{what} {path} is not valid JSON for lvsearch ({e})", fix=damaged_fix) from None
    if data is None and text.lstrip()[:1] in ("[", "{") or json_depth(data) > MAX_JSON_DEPTH:
        raise LvsearchError(f"{what} {path} nests deeper than {MAX_JSON_DEPTH} levels; no file lvsearch writes does",
                            fix=damaged_fix)
    return data


class _DuplicateKey(ValueError):
    """A JSON object with a key given twice (:func:`read_json`)."""


def _unique_keys(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return out


def check_fields(data: Any, schema: type, path: str | os.PathLike, *, what: str, fix: str) -> Any:
    """Check parsed JSON ``data`` read from ``path`` against ``schema`` (a pydantic model class;
    lvsearch's file models use :class:`FileModel`) and return ``data`` unchanged.

    Raises:
        LvsearchError: ``data`` does not fit ``schema``; one message naming ``what``, the file
            and the first field that does not fit (as a dotted path, ``model.folder``,
            ``finetune.rte.aggregate``), what was expected and what was found, with ``fix``
            (the command that regenerates the file).
    """
    from pydantic import ValidationError

    try:
        schema.model_validate(data)
    except ValidationError as e:
        raise LvsearchError(f"{what} {path} is malformed: {field_problem(e.errors()[0])}", fix=fix) from None
    return data


def field_problem(error: dict) -> str:
    """One pydantic error (an item of ``ValidationError.errors()``) as ``field X is missing`` /
    ``field X: <what was expected> (found <value>)``, the value cut to 60 characters."""
    loc = ".".join(str(x) for x in error["loc"])
    if error["type"] == "missing":
        return f"field {loc} is missing"
    msg = error["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    msg = re.sub(r" or instance of \w+$", "", msg)  # "a valid dictionary or instance of Blimp": a class name
    found = repr(error.get("input"))
    found = found if len(found) <= 60 else found[:57] + "..."
    msg = f"{msg[:1].lower() + msg[1:]} (found {found})"
    return f"field {loc}: {msg}" if loc else msg


def read_checked(path: str | os.PathLike, schema: type, *, what: str, fix: str, regenerate: str | None = None,
                 max_bytes: int = MAX_JSON_BYTES) -> Any:
    """:func:`read_json` (with ``regenerate`` and ``max_bytes``) then :func:`check_fields`: the
    parsed JSON of ``path``, checked against the pydantic model ``schema``. Raises
    LvsearchError as those two."""
    return check_fields(read_json(path, what=what, regenerate=regenerate, max_bytes=max_bytes), schema, path,
                        what=what, fix=fix)


def json_depth(obj: Any) -> int:
    """Nesting depth of parsed JSON (a scalar is 0), computed without recursion."""
    depth, stack = 0, [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if isinstance(o, dict):
            o = list(o.values())
        if isinstance(o, list):
            depth = max(depth, d)
            if d > MAX_JSON_DEPTH:
                return d
            stack.extend((x, d + 1) for x in o)
    return depth


def save_figure(fig, path: str | os.PathLike, *, dpi: int | None = None) -> None:
    """Write a matplotlib figure as PNG atomically (rendered in memory, then
    :func:`atomic_write_bytes`), and close it."""
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def iter_jsonl(path: str | os.PathLike, text: str, *, fix: str):
    """Yield ``(line number, object)`` for every non-blank line of JSONL ``text`` read from ``path``.

    Raises:
        LvsearchError: a line is not valid JSON or not a JSON object (names file and line).
    """
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise LvsearchError(f"{path}, line {lineno}: not valid JSON ({e.msg})", fix=fix) from None
        if not isinstance(obj, dict):
            raise LvsearchError(f"{path}, line {lineno}: expected a JSON object", fix=fix)
        yield lineno, obj


def differing_keys(old: dict, new: dict) -> list[str]:
    """Sorted keys whose values differ between two settings mappings (missing counts as None);
    used by every job that refuses to resume with other settings, to name what changed."""
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def differing_leaves(old: dict, new: dict, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """``(dotted key, old value, new value)`` for every leaf that differs between two nested
    configs (``train.steps``; missing counts as None), sorted by key."""
    out = []
    for k in sorted(set(old) | set(new)):
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += differing_leaves(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append((f"{prefix}{k}", a, b))
    return out


def check_same_settings(out: str | os.PathLike, what: str, recorded: dict, wanted: dict, *, fix: str,
                        max_value_chars: int = 40) -> None:
    """Refuse to resume the job in folder ``out`` with other settings than it recorded.

    The one refusal of every folder job that resumes by re-running its command (quickstart,
    the finalist job): the message names ``out`` and each differing key, as
    ``key: recorded → wanted`` when both values print in ``max_value_chars`` characters, as
    ``key: −removed +added`` for two longer lists (``--set`` pairs), else the bare key (a whole
    recipe section would drown the message).

    Args:
        out: the job folder (as given to ``--out``).
        what: the job, with its article ("a quickstart", "a finalist job").
        recorded, wanted: the settings in the folder's state file and the ones asked for now.
        fix: how to go on (re-run with the recorded settings, overwrite, another folder).

    Raises:
        LvsearchError: the settings differ (missing keys count as None).
    """
    if recorded == wanted:
        return
    parts = []
    for k in differing_keys(recorded, wanted):
        old, new = recorded.get(k), wanted.get(k)
        a, b = repr(old), repr(new)
        if max(len(a), len(b)) <= max_value_chars:
            parts.append(f"{k}: {a} → {b}")
        elif isinstance(old, list) and isinstance(new, list):  # a --set list: the items that differ
            changed = [f"−{x}" for x in old if x not in new] + [f"+{x}" for x in new if x not in old]
            parts.append(f"{k}: {' '.join(changed) if changed else 'same items, another order'}")
        else:
            parts.append(k)
    raise LvsearchError(f"--out {out} holds {what} with other settings ({', '.join(parts)})", fix=fix)


def sha256_file(path: str | os.PathLike, chunk_bytes: int = 1 << 20) -> str:
    """Hex SHA-256 of a file's bytes, read in ``chunk_bytes`` chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(chunk_bytes):
            h.update(chunk)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()
