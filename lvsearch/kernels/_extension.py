"""Build and load the fused dynamic-convolution CUDA extension (``kernels/csrc/``).

:func:`load_extension` compiles the extension with ``torch.utils.cpp_extension.load`` on
first use and caches the build: ``$LVSEARCH_KERNEL_CACHE`` or
``~/.cache/lvsearch/kernels/<sources hash>-torch<version>-cu<cuda>``, so a second process
with the same sources and torch only loads the ``.so`` (the first build takes minutes on a
small machine). ``TORCH_CUDA_ARCH_LIST`` (e.g. ``"9.0"``) selects the GPU architectures as
for any torch extension (default: the visible GPUs); ``MAX_JOBS`` limits parallel compiles.

:func:`compile_objects` is the compile-only check used by the ``cuda_build`` test marker:
it compiles the two translation units to object files with ``nvcc`` and the host compiler
against torch's headers, links nothing, and so also runs where torch is a CPU build.

The sources are split so that this works: ``dynamic_conv_kernels.cu`` is plain CUDA C++
(no torch headers) exposing C-ABI launchers declared in ``dynamic_conv_launch.h``;
``dynamic_conv_binding.cpp`` is the PyTorch binding (checks, allocation, current stream).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from lvsearch.errors import LvsearchError

CSRC = Path(__file__).resolve().parent / "csrc"
KERNELS_CU = "dynamic_conv_kernels.cu"
BINDING_CPP = "dynamic_conv_binding.cpp"
LAUNCH_H = "dynamic_conv_launch.h"

#: Kernel sizes instantiated in ``dynamic_conv_kernels.cu`` (``LVDC_DISPATCH_K``).
SUPPORTED_KERNEL_SIZES = (3, 5, 7, 9, 15, 31)

_loaded = None            # the extension module, once built
_load_error: LvsearchError | None = None  # the first failure, re-raised without rebuilding


def sources_hash() -> str:
    """12 hex digits over the three source files (changes force a rebuild)."""
    h = hashlib.sha256()
    for name in (LAUNCH_H, KERNELS_CU, BINDING_CPP):
        h.update(name.encode())
        h.update((CSRC / name).read_bytes())
    return h.hexdigest()[:12]


def build_directory() -> Path:
    """Where the built extension is cached (created on demand)."""
    import torch

    root = os.environ.get("LVSEARCH_KERNEL_CACHE")
    if root:
        base = Path(root)
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        base = Path(cache) / "lvsearch" / "kernels"
    tag = re.sub(r"[^A-Za-z0-9.]+", "_", f"torch{torch.__version__}-cu{torch.version.cuda}")
    return base / f"dc-{sources_hash()}-{tag}"


def cuda_unavailable_reason() -> str | None:
    """Why the extension cannot be built or run here, or None when it can be tried."""
    import torch

    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is a CPU-only build"
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME is None:
        return "no CUDA toolkit found (nvcc not on PATH and CUDA_HOME unset)"
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def load_extension(verbose: bool = False):
    """The compiled extension module, building it on first use.

    Returns:
        The module with ``forward``, ``backward_value``, ``backward_weights`` and
        ``supported_kernel_size`` (see ``csrc/dynamic_conv_binding.cpp``).

    Raises:
        LvsearchError: torch is a CPU build, no CUDA toolkit / device, or the build failed
            (the message says why; the same error is re-raised on later calls without
            rebuilding).
    """
    global _loaded, _load_error
    if _loaded is not None:
        return _loaded
    if _load_error is not None:
        raise _load_error
    fix = "install a CUDA build of torch and the CUDA toolkit (set CUDA_HOME), or set LVSEARCH_DC_IMPL=torch"
    reason = cuda_unavailable_reason()
    if reason is not None:
        _load_error = LvsearchError(f"cannot build the fused dynamic-conv CUDA extension: {reason}", fix=fix)
        raise _load_error
    from torch.utils.cpp_extension import load

    directory = build_directory()
    directory.mkdir(parents=True, exist_ok=True)
    try:
        _loaded = load(
            name=f"lvsearch_dc_{sources_hash()}",
            sources=[str(CSRC / BINDING_CPP), str(CSRC / KERNELS_CU)],
            extra_include_paths=[str(CSRC)],
            extra_cflags=["-O3"],
            extra_cuda_cflags=["-O3", "-lineinfo"],
            build_directory=str(directory),
            verbose=verbose,
        )
    except Exception as e:  # compiler / linker / import failure
        _load_error = LvsearchError(
            f"building the fused dynamic-conv CUDA extension in {directory} failed: {e}",
            fix="run with verbose build output (python -c 'from lvsearch.kernels._extension import "
                "load_extension; load_extension(verbose=True)') to see the compiler error, "
                "or set LVSEARCH_DC_IMPL=torch",
        )
        raise _load_error from e
    return _loaded


# --------------------------------------------------------------------------------------
# compile-only check (no GPU, no CUDA torch needed)


def find_cuda_home() -> Path | None:
    """The CUDA toolkit root (with ``bin/nvcc`` and ``include/cuda_runtime.h``): ``$CUDA_HOME``,
    ``$CUDA_PATH``, the toolkit of the ``nvcc`` on PATH (following symlinks), or
    ``/usr/local/cuda``; None when there is none."""
    candidates = [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    on_path = shutil.which("nvcc")
    if on_path:
        candidates.append(Path(on_path).resolve().parent.parent)
    candidates.append(Path("/usr/local/cuda"))
    for home in candidates:
        if (home / "bin" / "nvcc").is_file() and (home / "include" / "cuda_runtime.h").is_file():
            return home
    return None


def find_nvcc() -> str | None:
    """``nvcc`` of :func:`find_cuda_home`, or None."""
    home = find_cuda_home()
    return None if home is None else str(home / "bin" / "nvcc")


def arch_flags(arch_list: str | None = None) -> list[str]:
    """nvcc ``-gencode`` flags for ``arch_list`` (``TORCH_CUDA_ARCH_LIST`` syntax, e.g.
    ``"8.0;9.0+PTX"``); default ``$TORCH_CUDA_ARCH_LIST`` or ``"9.0"`` (H100/H200).

    Raises:
        LvsearchError: an entry that is not ``major.minor[a][+PTX]``.
    """
    arch_list = arch_list or os.environ.get("TORCH_CUDA_ARCH_LIST") or "9.0"
    flags = []
    for entry in re.split(r"[;\s]+", arch_list.strip()):
        if not entry:
            continue
        m = re.fullmatch(r"(\d+)\.(\d+)(a?)(\+PTX)?", entry)
        if m is None:
            raise LvsearchError(f"TORCH_CUDA_ARCH_LIST entry {entry!r} is not like '9.0' or '8.6+PTX'",
                                fix="set TORCH_CUDA_ARCH_LIST to e.g. '9.0'")
        num = f"{m.group(1)}{m.group(2)}{m.group(3)}"
        flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        if m.group(4):
            flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
    return flags


def compile_objects(out_dir: Path, arch_list: str | None = None) -> list[Path]:
    """Compile (no link) both translation units into ``out_dir``; return the object paths.

    ``dynamic_conv_kernels.cu`` with ``nvcc`` (torch's ``COMMON_NVCC_FLAGS``, the arch flags
    of :func:`arch_flags`); ``dynamic_conv_binding.cpp`` with the host C++ compiler against
    torch's headers, the Python headers and the CUDA toolkit's headers. A CPU build of
    torch ships the c10/cuda headers but not the generated ``c10/cuda/impl/cuda_cmake_macros.h``
    (export macros only), so the binding is compiled with ``C10_CUDA_NO_CMAKE_CONFIGURE_FILE``.

    Raises:
        LvsearchError: nvcc or a C++ compiler is missing, or a compile failed (the message
            holds the compiler's output).
    """
    import torch
    import torch.utils.cpp_extension as cpp

    home = find_cuda_home()
    if home is None:
        raise LvsearchError("no CUDA toolkit (nvcc + headers) found for the compile-only check",
                            fix="install the CUDA toolkit or set CUDA_HOME")
    nvcc, cuda_include = str(home / "bin" / "nvcc"), home / "include"
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        raise LvsearchError("no C++ compiler found for the compile-only check", fix="install g++ or set CXX")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch_includes = [f"-isystem{p}" for p in cpp.include_paths()]
    abi = f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"
    kernels_o, binding_o = out_dir / "dynamic_conv_kernels.o", out_dir / "dynamic_conv_binding.o"
    nvcc_flags = list(getattr(cpp, "COMMON_NVCC_FLAGS", []))
    commands = [
        [nvcc, "-c", str(CSRC / KERNELS_CU), "-o", str(kernels_o), f"-I{CSRC}", "-std=c++20", "-O3",
         "-Xcompiler", "-fPIC", *nvcc_flags, *arch_flags(arch_list)],
        [cxx, "-c", str(CSRC / BINDING_CPP), "-o", str(binding_o), f"-I{CSRC}", "-std=c++20", "-O2", "-fPIC",
         *torch_includes, f"-isystem{sysconfig.get_paths()['include']}", f"-isystem{cuda_include}",
         "-DTORCH_EXTENSION_NAME=lvsearch_dc_compile_check", "-DTORCH_API_INCLUDE_EXTENSION_H",
         "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE", abi],
    ]
    for cmd in commands:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise LvsearchError(f"compile failed: {' '.join(cmd)}\n{proc.stdout}{proc.stderr}",
                                fix="fix the source in lvsearch/kernels/csrc/")
    return [kernels_o, binding_o]


if __name__ == "__main__":  # python -m lvsearch.kernels._extension [out_dir]
    objs = compile_objects(Path(sys.argv[1] if len(sys.argv) > 1 else "build/dc_compile_check"))
    print("compiled:", *objs)
