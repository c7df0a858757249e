"""The compute device a verb runs on: one check, shared by every verb, before any model loads.

``--device`` takes ``auto`` (CUDA when torch can use it, else the CPU), ``cpu``, ``cuda`` or
``cuda:N``. Anything torch cannot use here is one :class:`~lvsearch.errors.LvsearchError`
naming the devices that exist (before, ``--device cuda`` on a machine without CUDA ended in an
``AttributeError`` from ``torch.cuda.set_device``, a ``pin_memory`` error or a safetensors one,
depending on the verb).
"""

from __future__ import annotations

from lvsearch.errors import LvsearchError


def available_devices() -> list[str]:
    """The devices torch can use here: ``cpu`` and ``cuda:0`` … ``cuda:N-1``."""
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return ["cpu", *(f"cuda:{i}" for i in range(n))]


def check_device(device: str, flag: str = "--device") -> str:
    """``device`` unchanged when torch can use it here (``auto`` always can).

    Raises:
        LvsearchError: an unknown device name, CUDA asked for where torch has none (a CPU
            build or no GPU), or a CUDA index beyond the GPUs present; the message lists the
            devices that exist.
    """
    import torch

    if device in ("auto", "cpu"):
        return device
    here = ", ".join(available_devices())
    kind, _, index = str(device).partition(":")
    if kind != "cuda" or (index and not index.isdigit()):
        raise LvsearchError(f"{flag} {device!r} is not a device lvsearch runs on (devices here: {here})",
                            fix="use auto, cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        build = f"CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        raise LvsearchError(f"{flag} {device}: torch cannot use CUDA here (torch {torch.__version__}, {build}; "
                            f"devices here: {here})", fix="pass --device cpu (or auto)")
    if index and int(index) >= torch.cuda.device_count():
        raise LvsearchError(f"{flag} {device}: there are {torch.cuda.device_count()} CUDA devices (devices here: {here})",
                            fix="pass a device that exists, e.g. --device cuda:0")
    return device


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 matmuls natively (AVX512-BF16 or AMX), where bf16
    autocast is faster than fp32 (measured: benchmarks/learning_efficiency.py --speed);
    without it bf16 is emulated and slower."""
    import torch

    cpu = torch.cpu
    return bool(getattr(cpu, "_is_avx512_bf16_supported", lambda: False)()
                or getattr(cpu, "_is_amx_tile_supported", lambda: False)())


def physical_memory_bytes() -> int | None:
    """This machine's physical memory (bytes), or None where the OS does not say."""
    import os

    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def device_memory_bytes(device=None) -> tuple[int | None, str]:
    """``(bytes, "this machine's 23 GB")``: the memory a tensor on ``device`` (a
    ``torch.device``, a string or None for the CPU) can at most use: a CUDA device's total
    memory, else the physical memory (None where unknown)."""
    import torch

    device = torch.device(device or "cpu")
    if device.type == "cuda" and torch.cuda.is_available():
        total = torch.cuda.get_device_properties(device).total_memory
        return int(total), f"the {total / (1 << 30):.0f} GB of {torch.cuda.get_device_name(device)}"
    ram = physical_memory_bytes()
    return ram, (f"this machine's {ram / (1 << 30):.0f} GB" if ram else "this machine's memory")
