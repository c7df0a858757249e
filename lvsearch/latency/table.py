"""The latency table: per slot choice, per mixing width and fixed overhead, measured on one device.

A table is measured from a trained supernet run (``lvsearch latency measure --supernet RUN``):
its model sizes and search space say which layers exist; the weights do not change the time.
Every entry is the forward time of one module in eval mode under ``torch.inference_mode``
on a ``(batch, seq_len)`` input with a padding mask of real tokens, in milliseconds per batch:

* ``ops_ms[choice]``: slot layer of one choice (op, residual, LayerNorm, dropout off), keyed by
  :func:`choice_key`: one entry per op at its default size and one per variant of a space with
  variants (``SA(h2)``, ``FF(i0.5)``, ``DC(k3)``: a standalone layer built at the variant's size,
  as an extracted model runs it);
* ``mixing_ms[k]``: ELC-BERT mixing of ``k ≥ 2`` inputs (softmax of the α̂ row and the weighted
  sum, Charpentier & Samuel 2023 eq. 1);
* ``overhead_ms``: embeddings plus the output stage (weighted output, final LayerNorm).

Each time is the median over ``repeats`` timed blocks after ``warmup`` untimed calls, timed
with :class:`torch.utils.benchmark.Timer` (which synchronises CUDA); a block repeats the call
until it lasts at least 10 ms, so timer resolution does not matter. The per-entry spread
(interquartile range over blocks, ms) is kept beside it.

The file (``lvsearch.latency-table/v1``) records the device kind, its name, the threads, the
torch version, batch, sequence length, dtype and model sizes it was measured with;
:func:`check_table` refuses a table that does not fit the search it is given to.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Callable, Literal

from lvsearch.errors import LvsearchError
from pydantic import Field

from lvsearch.schema import FileModel

if TYPE_CHECKING:  # pragma: no cover
    from lvsearch.arch import Arch
    from lvsearch.space import SearchSpace

TABLE_FORMAT = "lvsearch.latency-table/v1"
MEASURE_COMMAND = "lvsearch latency measure --supernet RUN --out TABLE.json"
#: Shortest timed block, seconds.
MIN_BLOCK_S = 0.01
#: The largest time a table entry or a calibration intercept may hold (ms per batch: 1000 s;
#: a measured entry that large would take days to time), and the largest calibration slope.
MAX_MS, MAX_SLOPE = 1e6, 100.0
#: The largest ``--batch`` a table may be measured (and timed) at, and the most threads,
#: warm-up calls and timed blocks it may record.
MAX_BATCH, MAX_THREADS, MAX_CALLS = 65536, 4096, 1_000_000
#: The largest table file :func:`load_table` reads (a 1024-slot elastic table is < 1 MB).
MAX_TABLE_BYTES = 16 << 20
_Ms = Annotated[float, Field(allow_inf_nan=False, gt=0, le=MAX_MS)]


class Calibration(FileModel):
    """The table sum's linear correction, fitted on end-to-end timings of sampled architectures:
    ``measured ≈ intercept_ms + slope · table sum`` (least squares over ``archs`` architectures
    drawn with ``seed``; :func:`lvsearch.latency.predict.calibrate`). ``raw_median_ape`` and
    ``median_ape`` are the median absolute percentage errors of the sum and of the corrected
    sum on those architectures (in sample; ``lvsearch latency validate`` measures others)."""

    intercept_ms: Annotated[float, Field(allow_inf_nan=False, ge=-MAX_MS, le=MAX_MS)]
    slope: Annotated[float, Field(allow_inf_nan=False, gt=0, le=MAX_SLOPE)]
    archs: Annotated[int, Field(ge=2, le=MAX_CALLS)]
    seed: int
    raw_median_ape: Annotated[float, Field(allow_inf_nan=False, ge=0)]
    median_ape: Annotated[float, Field(allow_inf_nan=False, ge=0)]


class LatencyTable(FileModel):
    """A latency table file (module docstring). Times in milliseconds per batch."""

    format: Literal["lvsearch.latency-table/v1"]
    device: Literal["cpu", "cuda"]
    device_name: Annotated[str, Field(max_length=200)]
    threads: Annotated[int, Field(ge=1, le=MAX_THREADS)]
    torch: Annotated[str, Field(max_length=100)]
    batch: Annotated[int, Field(ge=1, le=MAX_BATCH)]
    seq_len: Annotated[int, Field(ge=1)]
    dtype: Literal["float32", "bfloat16"]
    supernet: str
    space: dict
    dims: dict
    warmup: Annotated[int, Field(ge=0, le=MAX_CALLS)]
    repeats: Annotated[int, Field(ge=1, le=MAX_CALLS)]
    ops_ms: dict[str, _Ms]
    mixing_ms: dict[str, _Ms]
    overhead_ms: _Ms
    spread_ms: dict[str, Annotated[float, Field(allow_inf_nan=False, ge=0)]] = {}
    measured_at: str = ""
    calibration: Calibration | None = None

    @property
    def where(self) -> str:
        """``cpu (Intel Xeon …, 2 threads, torch 2.13.0)``: where it was measured, for messages."""
        from lvsearch.ui import plural

        return f"{self.device} ({self.device_name}, {plural(self.threads, 'thread')}, torch {self.torch})"

    def search_space(self, path: str | os.PathLike | None = None) -> "SearchSpace":
        """The search space the table was measured for (``path``: the table file, for messages).

        Raises:
            LvsearchError: the recorded space is malformed or over a bound (``num_slots``).
        """
        from lvsearch.space import SearchSpace

        return SearchSpace.from_dict(self.space, source=f"{path} (field space)" if path else "latency table")


def check_recorded(table: LatencyTable, path: str | os.PathLike) -> None:
    """Re-check on load what :func:`measure_table` and :func:`calibrate
    <lvsearch.latency.predict.calibrate>` guarantee of a table they write, beyond its field
    types: the recorded space and model sizes are valid (and bounded), the sequence length
    fits the model, the entries are exactly the space's choices and mixing widths, and a
    calibration predicts more than 0 ms for the space's fastest architecture.

    Raises:
        LvsearchError: naming the file, the field and the command that measures a new table.
    """
    from lvsearch.model.dims import ModelDims

    fix = f"measure it again: {MEASURE_COMMAND}"
    space = table.search_space(path)
    dims = ModelDims.from_dict(table.dims, source=f"{path} (field dims)")
    if table.seq_len > dims.max_len:
        raise LvsearchError(f"latency table {path} is malformed: field seq_len {table.seq_len} is longer than its "
                            f"model's {dims.max_len} positions", fix=fix)
    for field, found, want in (("ops_ms", set(table.ops_ms), set(choice_keys(space))),
                               ("mixing_ms", set(table.mixing_ms),
                                {str(k) for k in range(2, space.num_slots + 1)} if space.searchable_inputs else set())):
        extra = sorted(found - want)
        if extra:
            raise LvsearchError(f"latency table {path} is malformed: field {field} has entries its space "
                                f"{space.name!r} has no choice for ({', '.join(map(repr, extra[:4]))}"
                                f"{' …' if len(extra) > 4 else ''})", fix=fix)
    c = table.calibration
    if c is not None and set(choice_keys(space)) <= set(table.ops_ms):
        cheapest = min(table.ops_ms[k] for k in choice_keys(space))
        fastest = c.intercept_ms + c.slope * (table.overhead_ms + space.num_slots * cheapest)
        if not fastest > 0:
            raise LvsearchError(
                f"latency table {path} is malformed: its calibration ({c.intercept_ms:+.6g} ms + {c.slope:.6g} × table "
                f"sum) predicts {fastest:.6g} ms for the space's fastest architecture; 'latency measure' refuses such "
                "a fit", fix=fix)


def choice_key(arch: "Arch", n: int) -> str:
    """The table key of slot ``n``'s choice (1-based): the op code (``"SA"``), with the
    variant's compact suffix when it has one (``"SA(h2)"``, :func:`lvsearch.arch.variant_suffix`)."""
    return arch.slot_code(n)


def space_choices(space: "SearchSpace") -> list[tuple[str, tuple]]:
    """Every ``(op, variant)`` a table for ``space`` measures: each op at its default, then each
    of its variants in the space (:meth:`SearchSpace.choices`)."""
    out = [(op, ()) for op in space.ops]
    return out + [c for c in space.choices() if c[1]]


def choice_keys(space: "SearchSpace") -> list[str]:
    """The :func:`choice_key` of every entry of :func:`space_choices`."""
    from lvsearch.arch import variant_suffix

    return [op + variant_suffix(op, v) for op, v in space_choices(space)]


def device_name(device) -> str:
    """Human name of a ``torch.device``: the GPU's name, or the CPU model (``/proc/cpuinfo``
    on Linux, :func:`platform.processor` elsewhere)."""
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


@dataclass(frozen=True)
class Timing:
    """One measured entry: median and interquartile range over blocks, ms per call."""

    median_ms: float
    iqr_ms: float


def time_call(fn: Callable[[], object], *, threads: int, warmup: int, repeats: int) -> Timing:
    """Time ``fn()``: ``warmup`` untimed calls, then ``repeats`` blocks of ``number`` calls each
    (``number`` doubled until a block lasts :data:`MIN_BLOCK_S`), per-call median and IQR over
    the blocks in milliseconds. :class:`torch.utils.benchmark.Timer` sets ``threads`` and
    synchronises CUDA around each block."""
    import numpy as np
    from torch.utils.benchmark import Timer

    for _ in range(warmup):
        fn()
    timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=threads)
    number = 1
    while number < (1 << 16):
        per_call = timer.timeit(number).median
        if per_call * number >= MIN_BLOCK_S:
            break
        number *= 2
    times = np.array([timer.timeit(number).median for _ in range(repeats)]) * 1e3
    q1, med, q3 = np.percentile(times, [25, 50, 75])
    return Timing(float(med), float(q3 - q1))


@dataclass(frozen=True)
class MeasureOptions:
    """How to measure: ``device`` (``cpu``/``cuda``/``cuda:N``/``auto``), ``batch`` sequences of
    ``seq_len`` tokens (None: the supernet's training length), ``threads`` (None: torch's
    default), ``warmup`` untimed calls and ``repeats`` timed blocks per entry, ``dtype``
    (``float32`` or ``bfloat16``); ``calibrate`` architectures (drawn with ``calibration_seed``)
    timed end to end to fit the table sum's linear correction (0: none, the raw sum)."""

    device: str = "cpu"
    batch: int = 8
    seq_len: int | None = None
    threads: int | None = None
    warmup: int = 10
    repeats: int = 15
    dtype: str = "float32"
    calibrate: int = 20
    calibration_seed: int = 1


DTYPES = ("float32", "bfloat16")


def resolve_device(device: str):
    """``torch.device`` for a ``--device`` value (``auto``: CUDA when present)."""
    import torch

    from lvsearch.device import check_device

    device = check_device(device)
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device)


def bench_bytes(space: "SearchSpace", dims, batch: int, seq_len: int, itemsize: int) -> int:
    """Rough upper bound (bytes) of what timing ``space`` at ``batch`` × ``seq_len`` holds at
    once: the slot states of an end-to-end forward (``num_slots + 1`` of ``batch × seq_len ×
    hidden``) plus the largest intermediate of one slot (attention scores of the most heads,
    the widest FF inner layer, the widest DC kernel) and the embeddings."""
    from lvsearch.model.encoder import slot_sizes

    tokens = batch * seq_len
    widest = {"heads": dims.heads, "inner": dims.ff_inner, "kernel": dims.conv_kernel}
    for op in space.ops:
        for name, values in space.variant_values(op).items():
            for v in values:
                widest[name] = max(widest[name], slot_sizes(op, dims, ((name, v),))[name])
    slot = max(3 * widest["heads"] * seq_len, 2 * widest["inner"], 2 * dims.heads * widest["kernel"] + dims.hidden)
    return int(itemsize * tokens * (dims.hidden * (space.num_slots + 8) + slot + dims.embedding))


def check_bench_memory(space: "SearchSpace", dims, batch: int, seq_len: int, itemsize: int, device) -> None:
    """Refuse a timing whose tensors (:func:`bench_bytes`) would not fit ``device``'s memory,
    before any is allocated.

    Raises:
        LvsearchError: naming ``--batch``, ``--seq-len``, the estimate and the memory.
    """
    from lvsearch.device import device_memory_bytes

    need = bench_bytes(space, dims, batch, seq_len, itemsize)
    have, where = device_memory_bytes(device)
    if have is not None and need > have:
        fit = max(1, int(batch * have / need))
        raise LvsearchError(f"--batch {batch} × --seq-len {seq_len}: timing the {space.num_slots}-slot models of "
                            f"{space.name!r} needs ~{need / (1 << 30):,.1f} GB, more than {where}",
                            fix=f"use --batch {fit} or less (or a shorter --seq-len)")


def out_of_memory(err: BaseException, batch: int, seq_len: int) -> LvsearchError | None:
    """The :class:`LvsearchError` for an allocator failure while timing (``torch.OutOfMemoryError``,
    or a CPU allocator's ``RuntimeError``), or None for another error."""
    import torch

    text = str(err)
    if not (isinstance(err, (torch.OutOfMemoryError, MemoryError)) or "can't allocate memory" in text
            or "out of memory" in text.lower()):
        return None
    return LvsearchError(f"out of memory while timing at --batch {batch} × --seq-len {seq_len} "
                         f"({text.splitlines()[0][:160] if text else type(err).__name__})",
                         fix="use a smaller --batch (or --seq-len), or free memory on the device")


class Bench:
    """A loaded supernet set up for timing: eval mode, the dtype, fixed random inputs.

    Attributes:
        loaded: the :class:`~lvsearch.train.supernet.LoadedSupernet`.
        ids: ``(batch, seq_len)`` token ids (uniform over the vocabulary, special ids aside).
        mask: ``(batch, seq_len)`` bool, all True (real tokens).
        x: ``(batch, seq_len, H)`` a slot input (the embeddings of ``ids``).

    Raises:
        LvsearchError: an unsupported dtype, a bad run or device, a ``seq_len`` longer than
            the model's positions, or a batch whose tensors would not fit the device's memory
            (:func:`check_bench_memory`).
    """

    def __init__(self, run: str | os.PathLike, opts: MeasureOptions):
        import torch

        from lvsearch.train.supernet import load_supernet

        if opts.dtype not in DTYPES:
            raise LvsearchError(f"--dtype {opts.dtype!r} is not supported", fix=f"use one of {', '.join(DTYPES)}")
        self.opts, self.run = opts, run
        self.device = resolve_device(opts.device)
        self.loaded = load_supernet(run, device=self.device)
        self.dtype = getattr(torch, opts.dtype)
        self.loaded.supernet.to(dtype=self.dtype).eval()
        self.threads = opts.threads or torch.get_num_threads()
        self.seq_len = opts.seq_len or int(self.loaded.config.train.seq_len)
        dims = self.loaded.dims
        if self.seq_len > dims.max_len:
            raise LvsearchError(f"--seq-len {self.seq_len} is longer than the model's {dims.max_len} positions",
                                fix=f"use --seq-len {dims.max_len} or less")
        check_bench_memory(self.loaded.space, dims, opts.batch, self.seq_len, self.dtype.itemsize, self.device)
        gen = torch.Generator().manual_seed(0)
        self.ids = torch.randint(5, dims.vocab_size, (opts.batch, self.seq_len), generator=gen).to(self.device)
        self.mask = torch.ones(opts.batch, self.seq_len, dtype=torch.bool, device=self.device)
        with torch.inference_mode():
            self.x = self.loaded.supernet.embed(self.ids)

    def time(self, fn: Callable[[], object]) -> Timing:
        """:func:`time_call` of ``fn`` under ``torch.inference_mode`` with this bench's settings.

        Raises:
            LvsearchError: the device ran out of memory (:func:`out_of_memory`).
        """
        import torch

        def run():
            with torch.inference_mode():
                return fn()

        try:
            return time_call(run, threads=self.threads, warmup=self.opts.warmup, repeats=self.opts.repeats)
        except (RuntimeError, MemoryError) as e:
            oom = out_of_memory(e, self.opts.batch, self.seq_len)
            if oom is None:
                raise
            raise oom from None


def _entries(bench: Bench) -> dict[str, Callable[[], object]]:
    """Every entry of the table as a thunk: ``op:CHOICE``, ``mix:K`` and ``overhead``."""
    from lvsearch.model.mixing import mix_inputs

    from lvsearch import ops as op_registry
    from lvsearch.arch import variant_suffix

    net, space = bench.loaded.supernet, bench.loaded.space
    n_slots, x, mask = space.num_slots, bench.x, bench.mask
    out: dict[str, Callable[[], object]] = {}
    for op, variant in space_choices(space):
        if not space.variant_values(op):  # no variants: the supernet's layer is the op's layer
            layer = net.slots["1"][op]
        else:  # a standalone layer at the variant's size (what an extracted model runs)
            layer = op_registry.get(op).make(bench.loaded.dims, variant).to(device=x.device, dtype=x.dtype).eval()
        out[f"op:{op}{variant_suffix(op, variant)}"] = lambda layer=layer: layer(x, mask)
    if net.mixing is not None:
        states = [x] * n_slots
        for k in range(2, n_slots + 1):
            inputs = tuple(range(n_slots - k, n_slots))  # slot N reads N-1 and k-1 earlier outputs
            out[f"mix:{k}"] = lambda inputs=inputs: mix_inputs(net.mixing, n_slots, inputs, states, space.ops[0])
    all_states = [x] * (n_slots + 1)
    out["overhead"] = lambda: (net.embed(bench.ids), net.finish(all_states))
    return out


def measure_table(bench: "Bench", *, show_progress: bool = True) -> LatencyTable:
    """Measure the latency table of ``bench``'s supernet (a :class:`Bench`, which names the
    run, device and timing settings; building it raises for a bad run, device, dtype or
    ``seq_len``). The table has no calibration yet (:func:`lvsearch.latency.predict.calibrate`).

    Returns:
        The table (not yet written; :func:`save_table`).
    """
    import torch

    from lvsearch.ui import progress

    opts, run = bench.opts, bench.run
    entries = _entries(bench)
    times: dict[str, Timing] = {}
    with progress(enabled=show_progress) as bar:
        task = bar.add_task("latency table", total=len(entries), info="")
        for name, fn in entries.items():
            bar.update(task, info=name)
            times[name] = bench.time(fn)
            bar.advance(task)
    loaded = bench.loaded
    return LatencyTable(
        format=TABLE_FORMAT, device=bench.device.type, device_name=device_name(bench.device),
        threads=bench.threads, torch=torch.__version__, batch=opts.batch, seq_len=bench.seq_len, dtype=opts.dtype,
        supernet=str(Path(run).resolve()), space=loaded.space.to_dict(),
        dims=loaded.dims.to_dict(), warmup=opts.warmup, repeats=opts.repeats,
        ops_ms={k.removeprefix("op:"): t.median_ms for k, t in times.items() if k.startswith("op:")},
        mixing_ms={k.removeprefix("mix:"): t.median_ms for k, t in times.items() if k.startswith("mix:")},
        overhead_ms=times["overhead"].median_ms,
        spread_ms={k: t.iqr_ms for k, t in times.items()},
        measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def save_table(table: LatencyTable, path: str | os.PathLike) -> None:
    """Write ``table`` atomically as JSON."""
    from lvsearch.io import atomic_write_json

    atomic_write_json(path, table.model_dump(mode="json"))


def load_table(path: str | os.PathLike) -> LatencyTable:
    """Read and check a latency table file through the bounded reader (at most
    :data:`MAX_TABLE_BYTES`), as strictly as :func:`measure_table` writes one: field types
    and bounds (:class:`LatencyTable`), then :func:`check_recorded`.

    Raises:
        LvsearchError: missing, a special file, too large, not JSON, a field of the wrong type
            or out of bounds, or a table no measurement writes (:func:`check_recorded`);
            naming the file, the field and the command that measures a new table.
    """
    from lvsearch.io import read_checked

    data = read_checked(path, LatencyTable, what="latency table", fix=f"measure it again: {MEASURE_COMMAND}",
                        regenerate=MEASURE_COMMAND, max_bytes=MAX_TABLE_BYTES)
    table = LatencyTable.model_validate(data)
    check_recorded(table, path)
    return table


def check_entries(table: LatencyTable, path: str | os.PathLike, space: "SearchSpace") -> None:
    """Refuse a table without an entry for one of ``space``'s choices (every op and variant, and
    every mixing width when the connectivity is searchable), so that :func:`predict_ms
    <lvsearch.latency.predict.predict_ms>` finds every key it needs.

    Raises:
        LvsearchError: naming the file, the first missing entries and the command that measures one.
    """
    missing = [key for key in choice_keys(space) if key not in table.ops_ms]
    if space.searchable_inputs:
        missing += [f"mixing of {k} inputs" for k in range(2, space.num_slots + 1) if str(k) not in table.mixing_ms]
    if missing:
        raise LvsearchError(f"latency table {path} has no entry for {', '.join(missing[:4])}"
                            f"{' …' if len(missing) > 4 else ''} (space {space.name!r})",
                            fix=f"measure a table for this supernet: {MEASURE_COMMAND}")


def check_table(table: LatencyTable, path: str | os.PathLike, *, space: "SearchSpace", dims, device=None,
                any_device: bool = False) -> None:
    """Refuse a table that cannot predict latency for this search.

    Args:
        table: the loaded table; ``path`` its file (for messages).
        space: the search space; every op needs an entry, and every mixing width when the
            connectivity is searchable.
        dims: the supernet's :class:`~lvsearch.model.dims.ModelDims`; the table must be measured
            with the same sizes.
        device: the ``torch.device`` the search runs on, or None to skip the device check.
        any_device: accept a table measured on another device (``--latency-any-device``).

    Raises:
        LvsearchError: the table was measured for another space (slots, connectivity, ops and
            variants; the name is not compared), sizes differ, an op or mixing width is missing, or (without
            ``any_device``) the table was measured on another device kind or another GPU/CPU model.
    """
    mine = table.search_space(path)
    shape = lambda sp: (sp.num_slots, sp.connectivity, sp.to_dict()["ops"])  # noqa: E731 - the name is free text
    if shape(mine) != shape(space):
        raise LvsearchError(
            f"latency table {path} was measured for space {mine.name!r} ({mine.num_slots} slots, {mine.connectivity}, "
            f"ops {', '.join(choice_keys(mine))}), not for this supernet's {space.name!r} ({space.num_slots} slots, "
            f"{space.connectivity}, ops {', '.join(choice_keys(space))})",
            fix=f"measure a table for this supernet: {MEASURE_COMMAND}")
    if table.dims != dims.to_dict():
        diff = sorted(k for k in set(table.dims) | set(dims.to_dict()) if table.dims.get(k) != dims.to_dict().get(k))
        raise LvsearchError(f"latency table {path} was measured for other model sizes ({', '.join(diff)} differ "
                            f"from the supernet's)", fix=f"measure a table for this supernet: {MEASURE_COMMAND}")
    check_entries(table, path, space)
    if device is not None and not any_device:
        here = device_name(device)
        if table.device != device.type or table.device_name != here:
            raise LvsearchError(
                f"latency table {path} was measured on {table.where}; this command runs on {device.type} ({here})",
                fix=f"measure a table on this device ({MEASURE_COMMAND} --device {device.type}), or pass "
                    "--latency-any-device to use it anyway")
