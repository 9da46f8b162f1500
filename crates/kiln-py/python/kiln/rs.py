"""``kiln.rs``: the kernels written in Rust (kernels/rust), with the same contract as their C++
twins at the top level (``kiln.rs.vecadd`` beside ``kiln.vecadd``): torch tensors in, torch
tensors out (``torch.ops.kiln.rs_*``), any other DLPack array in, ``kiln.Array`` out."""

from __future__ import annotations

from . import _kiln
from ._api import _dispatch

_rs = _kiln.rs

TYPE_CHECKING = False
if TYPE_CHECKING:  # pragma: no cover
    from typing import Any

__all__ = ["vecadd", "silu_mul", "rmsnorm", "softmax"]


def vecadd(a: Any, b: Any, *, out: Any = None, stream: Any = None) -> Any:
    """out = a + b, by the Rust kernel."""
    return _dispatch("rs_vecadd", lambda: _rs.vecadd(a, b, out=out, stream=stream), (a, b), (), out, stream)


def silu_mul(gate: Any, up: Any, *, out: Any = None, stream: Any = None) -> Any:
    """out = silu(gate) * up, by the Rust kernel."""
    return _dispatch("rs_silu_mul", lambda: _rs.silu_mul(gate, up, out=out, stream=stream), (gate, up), (), out, stream)


def rmsnorm(x: Any, weight: Any, eps: float = 1e-6, *, out: Any = None, stream: Any = None) -> Any:
    """RMSNorm over the last dimension, by the Rust kernel."""
    return _dispatch("rs_rmsnorm", lambda: _rs.rmsnorm(x, weight, eps, out=out, stream=stream),
                     (x, weight), (eps,), out, stream)


def softmax(x: Any, *, out: Any = None, stream: Any = None) -> Any:
    """Numerically stable softmax over the last dimension, by the Rust kernel."""
    return _dispatch("rs_softmax", lambda: _rs.softmax(x, out=out, stream=stream), (x,), (), out, stream)
