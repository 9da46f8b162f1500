"""Finding the NVIDIA libraries that pip installed next to kiln.

kiln's extension links no CUDA library. The driver (``libcuda.so.1``) comes from the machine;
cuBLAS, cuDNN and NCCL come from the NVIDIA wheels this wheel requires (``Requires-Dist``:
nvidia-cublas, nvidia-cudnn-cu13, nvidia-nccl-cu13, at the versions pinned in kiln's
Cargo.toml). pip puts their libraries under ``site-packages/nvidia/<lib-dir>`` (for example
``nvidia/cu13/lib/libcublas.so.13``, ``nvidia/cudnn/lib/libcudnn.so.9``,
``nvidia/nccl/lib/libnccl.so.2``), a directory the system loader does not search.

So before the first call that needs one of them (matmul, cudnn_softmax, all_reduce_sum,
``kiln.build_info()``, ``kiln.runtime_libraries()``; never at ``import kiln``, which stays
cheap and loads no CUDA library) this module preloads each library by absolute path with ``RTLD_GLOBAL``:
for every library of the build (``kiln.build_info()["runtime_libraries"]``: the lib-dir and
sonames come from the same pins as Requires-Dist), it looks in each ``sys.path`` entry for
``<entry>/<lib-dir>/<soname>`` and loads the first it finds. When the runtime later calls
``dlopen("libcublas.so.13")``, the loader returns the already loaded copy (it matches loaded
objects by soname), so the wheel's libraries are used without LD_LIBRARY_PATH.

* A library that is already loaded in the process (say ``import torch`` came first) is not
  loaded a second time: the copy in the process is used.
* Nothing found is not an error: kiln works without the libraries until an operation
  needs one, which then fails with a clear error naming the library.
* ``KILN_NO_PRELOAD=1`` turns this off; the system loader path (LD_LIBRARY_PATH, ldconfig) is
  then all that is searched.
* ``kiln.runtime_libraries()`` reports, for every soname, where it was loaded from or why not.
"""

from __future__ import annotations

import os
import sys

# ctypes and typing are imported when needed, not at `import kiln` (each costs milliseconds).
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    import ctypes
    from typing import Any, Dict, List, Mapping, Optional

_RTLD_NOLOAD = getattr(os, "RTLD_NOLOAD", 4)

# soname -> {"library", "status", "path", "error"}; filled once, by ensure().
_report: "Dict[str, Dict[str, Optional[str]]]" = {}
# Keeps the handles alive (a CDLL that is collected does not unload, but be explicit).
_handles: "List[ctypes.CDLL]" = []


def _already_loaded(soname: str) -> bool:
    import ctypes

    try:
        ctypes.CDLL(soname, mode=_RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
        return True
    except OSError:
        return False


def _candidates(lib_dir: str, soname: str) -> List[str]:
    found = []
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        path = os.path.join(entry, *lib_dir.split("/"), soname)
        if os.path.isfile(path):
            found.append(os.path.realpath(path))
    return found


def preload(runtime_libraries: "Mapping[str, Mapping[str, Any]]") -> None:
    """Preloads every soname of ``runtime_libraries`` (name -> {lib_dir, sonames, ...})."""
    import ctypes

    if os.environ.get("KILN_NO_PRELOAD", "") not in ("", "0"):
        for name, lib in runtime_libraries.items():
            for soname in lib["sonames"]:
                _report[soname] = {"library": name, "status": "skipped (KILN_NO_PRELOAD)", "path": None, "error": None}
        return
    pending = []
    for name, lib in runtime_libraries.items():
        for soname in lib["sonames"]:
            if _already_loaded(soname):
                _report[soname] = {"library": name, "status": "already loaded", "path": None, "error": None}
                continue
            paths = _candidates(str(lib["lib_dir"]), soname)
            if not paths:
                _report[soname] = {"library": name, "status": "not found", "path": None,
                                   "error": f"no {lib['lib_dir']}/{soname} under any sys.path entry "
                                            f"(pip install \"{lib['requirement']}\")"}
                continue
            pending.append((name, soname, paths[0]))
    # A library can need another one of the set (libcublas needs libcublasLt): retry what failed
    # until a pass loads nothing new.
    while pending:
        failed = []
        for name, soname, path in pending:
            try:
                _handles.append(ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL))
                _report[soname] = {"library": name, "status": "loaded", "path": path, "error": None}
            except OSError as e:
                failed.append((name, soname, path))
                _report[soname] = {"library": name, "status": "failed", "path": path, "error": str(e)}
        if len(failed) == len(pending):
            break
        pending = failed


_done = False


def ensure() -> None:
    """Preloads the build's libraries once (the first call that needs them)."""
    global _done
    if _done:
        return
    _done = True
    from . import _kiln

    preload(_kiln.build_info()["runtime_libraries"])


def report() -> Dict[str, Dict[str, Optional[str]]]:
    return {k: dict(v) for k, v in _report.items()}
