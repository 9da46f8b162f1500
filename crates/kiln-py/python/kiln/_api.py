"""kiln's public functions: one Python function per op, in front of the extension (`_kiln`).

Without torch in the process each is a direct call into the extension (no torch import, no
overhead beyond one Python call). With torch imported, torch tensors go through kiln's torch
custom ops (`kiln._torch`): torch tensors in, torch tensors out.
"""

from __future__ import annotations

import sys

from . import _errors, _kiln, _preload

# `typing` (with re, enum, ...) costs more than the rest of `import kiln`: annotations only.
TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from types import ModuleType
    from typing import Any, Dict, List, Optional, Sequence

# kiln._torch once torch is in the process and the ops are registered.
_torch: "Optional[ModuleType]" = None


def register_torch_ops() -> None:
    """Registers kiln's ops with torch (``torch.ops.kiln.*``) now. kiln does this by itself
    at import when torch is already imported, else at the first kiln call once torch is; call
    it before ``torch.compile`` when kiln was imported before torch and no kiln call ran yet."""
    global _torch
    if _torch is None:
        from . import _torch as t  # imports torch

        _torch = t


def _with_torch() -> "Optional[ModuleType]":
    if _torch is None and "torch" in sys.modules:
        register_torch_ops()
    return _torch


def _raw(raw: Any) -> Any:
    """Calls the extension; the argument conversion errors PyO3 raises itself (a string where
    a float goes) become kiln's, so `except kiln.KilnError` sees every bad input."""
    try:
        return raw()
    except _errors.KilnError:
        raise
    except TypeError as e:
        raise _errors.ArgumentTypeError(str(e)) from None
    except OverflowError as e:  # a negative or too large int where an unsigned one goes
        raise _errors.ArgumentValueError(str(e)) from None


def _dispatch(name: str, raw: Any, operands: Sequence[Any], scalars: Sequence[Any],
              out: Any = None, stream: Any = None) -> Any:
    t = _torch if _torch is not None else _with_torch()
    if t is None:
        return _raw(raw)
    return t.call(name, lambda: _raw(raw), operands, scalars, out, stream)


def vecadd(a: Any, b: Any, *, out: Any = None, stream: Any = None) -> Any:
    """out = a + b."""
    return _dispatch("vecadd", lambda: _kiln.vecadd(a, b, out=out, stream=stream), (a, b), (), out, stream)


def axpby(x: Any, y: Any, alpha: float = 1.0, beta: float = 1.0, *, out: Any = None, stream: Any = None) -> Any:
    """out = alpha * x + beta * y (math in float32)."""
    return _dispatch("axpby", lambda: _kiln.axpby(x, y, alpha, beta, out=out, stream=stream),
                     (x, y), (alpha, beta), out, stream)


def silu_mul(gate: Any, up: Any, *, out: Any = None, stream: Any = None) -> Any:
    """out = silu(gate) * up (the SwiGLU gate)."""
    return _dispatch("silu_mul", lambda: _kiln.silu_mul(gate, up, out=out, stream=stream), (gate, up), (), out, stream)


def rmsnorm(x: Any, weight: Any, eps: float = 1e-6, *, out: Any = None, stream: Any = None) -> Any:
    """RMSNorm over the last dimension: x * rsqrt(mean(x^2) + eps) * weight."""
    return _dispatch("rmsnorm", lambda: _kiln.rmsnorm(x, weight, eps, out=out, stream=stream),
                     (x, weight), (eps,), out, stream)


def softmax(x: Any, *, out: Any = None, stream: Any = None) -> Any:
    """Numerically stable softmax over the last dimension."""
    return _dispatch("softmax", lambda: _kiln.softmax(x, out=out, stream=stream), (x,), (), out, stream)


def rope(x: Any, positions: Any = None, *, offset: int = 0, theta: float = 10000.0,
         out: Any = None, stream: Any = None) -> Any:
    """Rotary embedding of x [tokens, heads, head_dim] (rotate-half layout). Token t is at
    ``positions[t]`` (int32/int64) or, without positions, at ``offset + t``."""
    if positions is not None and offset != 0:
        raise _errors.ArgumentValueError("rope: give positions or offset, not both")
    return _dispatch("rope", lambda: _kiln.rope(x, positions, offset=offset, theta=theta, out=out, stream=stream),
                     (x, positions), (offset, theta), out, stream)


def embedding(table: Any, ids: Any, *, out: Any = None, stream: Any = None) -> Any:
    """out[..., :] = table[ids[...], :]; never waits for the GPU: an id outside [0, vocab)
    gives a row of zeros."""
    return _dispatch("embedding", lambda: _kiln.embedding(table, ids, out=out, stream=stream), (table, ids), (), out, stream)


def embedding_checked(table: Any, ids: Any, *, stream: Any = None) -> Any:
    """embedding, plus IdOutOfRangeError (an IndexError) for an id outside [0, vocab); waits
    for the GPU; CaptureError under graph capture."""
    return _dispatch("embedding_checked", lambda: _kiln.embedding_checked(table, ids, stream=stream),
                     (table, ids), (), None, stream)


def copy(x: Any, *, stream: Any = None) -> Any:
    """A device-to-device copy."""
    return _dispatch("copy", lambda: _kiln.copy(x, stream=stream), (x,), (), None, stream)


def matmul(a: Any, b: Any, *, stream: Any = None) -> Any:
    """a @ b through cuBLAS: a [m, k], b [k, n] -> [m, n]."""
    _preload.ensure()
    return _dispatch("matmul", lambda: _kiln.matmul(a, b, stream=stream), (a, b), (), None, stream)


def cudnn_softmax(x: Any, *, stream: Any = None) -> Any:
    """Softmax over the last dimension through cuDNN."""
    _preload.ensure()
    return _dispatch("cudnn_softmax", lambda: _kiln.cudnn_softmax(x, stream=stream), (x,), (), None, stream)


def all_reduce_sum(inputs: Sequence[Any]) -> List[Any]:
    """NCCL all-reduce (sum): one CUDA array per device; one new array per device."""
    _preload.ensure()
    t = _torch if _torch is not None else _with_torch()
    items = list(inputs)
    if t is not None and items and all(isinstance(x, t.Tensor) for x in items):
        return list(t.FUNCTIONAL["all_reduce_sum"](items))
    outs = _raw(lambda: _kiln.all_reduce_sum(items))
    if t is not None and any(isinstance(x, t.Tensor) for x in items):
        return [t.as_tensor(o) for o in outs]
    return list(outs)


def device_count() -> int:
    """Number of visible CUDA devices; 0 without a driver or a device (never raises for that)."""
    return int(_kiln.device_count())


def is_available() -> bool:
    """True when a driver and at least one CUDA device are there."""
    try:
        return device_count() > 0
    except _errors.KilnError:
        return False


def build_info() -> Dict[str, Any]:
    """What this extension was built from (see ``_kiln.build_info``), plus
    ``loaded_libraries``: per soname, the cuBLAS/cuDNN/NCCL version actually loaded in this
    process (the library's own run-time answer), its file, whether it was already loaded before
    kiln asked, and the range kiln declares; or the error (missing, older than the range)."""
    _preload.ensure()
    info: Dict[str, Any] = _kiln.build_info()
    info["loaded_libraries"] = _kiln._loaded_libraries()
    return info


def runtime_libraries() -> Dict[str, Dict[str, Optional[str]]]:
    """For each NVIDIA library soname: where kiln loaded it from, or why not (loads them
    first if no call needed them yet)."""
    _preload.ensure()
    return _preload.report()

