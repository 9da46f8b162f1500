"""kiln's ops as torch custom ops (``torch.ops.kiln.*``): torch tensors in, torch tensors out.

Imported by ``kiln`` only when torch is already in the process (at ``import kiln``, or at the
first kiln call after ``import torch``); ``kiln.register_torch_ops()`` does it explicitly.

Each op is a ``torch.library.custom_op`` with an explicit schema:

* the output is allocated by torch (``torch.empty`` on the input's device, in torch's caching
  allocator and, under ``torch.cuda.graph``, in the graph's pool) and the kernel writes into it
  (kiln's ``out=``): no copy, no DLPack round trip, and the kernel runs on torch's current
  stream (kiln's rule for torch inputs), so ops are captured into CUDA graphs with torch's;
* a fake (meta) implementation computes the output's shape and dtype without the GPU, so
  ``torch.compile(fullgraph=True)`` traces through the ops as single graph nodes;
* ``kiln::<op>_out`` variants (``mutates_args=("out",)``) back ``out=`` with torch tensors;
* autograd: ops whose backward is a few torch ops have one (register_autograd); the others
  raise kiln.NoBackwardError when a gradient would flow through them (docs/python.md).

Ops that kiln runs on the legacy default stream (matmul, cudnn_softmax), that read back
(embedding_checked) or that are collective (all_reduce_sum) return kiln's own allocation as a
tensor, zero-copy through DLPack (``torch.from_dlpack``), and refuse graph capture as kiln does.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from . import _errors, _kiln


def _cuda_only(op: str, *named: Tuple[str, Optional[Tensor]]) -> None:
    for name, t in named:
        if t is not None and t.device.type != "cuda":
            raise _errors.DeviceMemoryError(
                f"kiln.{op}: {name} is a {t.device} tensor; kiln's ops run on CUDA tensors "
                f"(move it with .cuda())"
            )


def _like(x: Tensor) -> Tensor:
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def _same_shape(op: str, a: Tensor, b: Tensor, an: str, bn: str) -> None:
    if a.shape != b.shape:
        raise _errors.ShapeError(f"kiln.{op}: {an} {tuple(a.shape)} and {bn} {tuple(b.shape)} differ")


# name -> (schema, output allocation from the operands, raw call writing into `out`).
# The allocation is shared by the real and the fake implementation, so both agree by
# construction on shape, dtype and device.
def _alloc_elementwise(op: str) -> Callable[..., Tensor]:
    def alloc(a: Tensor, b: Tensor, *_: Any) -> Tensor:
        _same_shape(op, a, b, "first operand", "second operand")
        return _like(a)
    return alloc


def _alloc_rows(op: str) -> Callable[..., Tensor]:
    def alloc(x: Tensor, *rest: Any) -> Tensor:
        weight = rest[0] if rest and isinstance(rest[0], Tensor) else None
        if weight is not None and (weight.dim() != 1 or x.dim() == 0 or weight.shape[0] != x.shape[-1]):
            raise _errors.ShapeError(f"kiln.{op}: weight {tuple(weight.shape)} must be [{x.shape[-1] if x.dim() else '?'}] for x {tuple(x.shape)}")
        return _like(x)
    return alloc


def _alloc_embedding(table: Tensor, ids: Tensor) -> Tensor:
    if table.dim() != 2:
        raise _errors.ShapeError(f"kiln.embedding: table must be [vocab, dim], got {tuple(table.shape)}")
    return torch.empty((*ids.shape, table.shape[1]), dtype=table.dtype, device=table.device)


def _alloc_matmul(a: Tensor, b: Tensor) -> Tensor:
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise _errors.ShapeError(f"kiln.matmul: a {tuple(a.shape)} @ b {tuple(b.shape)} needs [m, k] @ [k, n]")
    return torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)


def _alloc_rope(x: Tensor, positions: Optional[Tensor], offset: int, theta: float) -> Tensor:
    if x.dim() != 3:
        raise _errors.ShapeError(f"kiln.rope: x must be [tokens, heads, head_dim], got {tuple(x.shape)}")
    if positions is not None and tuple(positions.shape) != (x.shape[0],):
        raise _errors.ShapeError(f"kiln.rope: positions {tuple(positions.shape)} must be [{x.shape[0]}] (one per token)")
    return _like(x)


def _rs(name: str) -> Callable[..., Any]:
    return getattr(_kiln.rs, name)


# Kernels with an out= form: the output is torch's, the kernel writes into it.
KERNELS: Dict[str, Tuple[str, Callable[..., Tensor], Callable[..., Any], Tuple[str, ...]]] = {
    # name: (schema arguments, alloc, raw call (args..., out), tensor argument names)
    "vecadd": ("(Tensor a, Tensor b)", _alloc_elementwise("vecadd"),
               lambda a, b, out: _kiln.vecadd(a, b, out=out), ("a", "b")),
    "axpby": ("(Tensor x, Tensor y, float alpha, float beta)", _alloc_elementwise("axpby"),
              lambda x, y, alpha, beta, out: _kiln.axpby(x, y, alpha, beta, out=out), ("x", "y")),
    "silu_mul": ("(Tensor gate, Tensor up)", _alloc_elementwise("silu_mul"),
                 lambda g, u, out: _kiln.silu_mul(g, u, out=out), ("gate", "up")),
    "rmsnorm": ("(Tensor x, Tensor weight, float eps)", _alloc_rows("rmsnorm"),
                lambda x, w, eps, out: _kiln.rmsnorm(x, w, eps, out=out), ("x", "weight")),
    "softmax": ("(Tensor x)", _alloc_rows("softmax"),
                lambda x, out: _kiln.softmax(x, out=out), ("x",)),
    "rope": ("(Tensor x, Tensor? positions, int offset, float theta)", _alloc_rope,
             lambda x, p, offset, theta, out: _kiln.rope(x, p, offset=offset, theta=theta, out=out),
             ("x", "positions")),
    "embedding": ("(Tensor table, Tensor ids)", _alloc_embedding,
                  lambda t, i, out: _kiln.embedding(t, i, out=out), ("table", "ids")),
    "rs_vecadd": ("(Tensor a, Tensor b)", _alloc_elementwise("rs.vecadd"),
                  lambda a, b, out: _rs("vecadd")(a, b, out=out), ("a", "b")),
    "rs_silu_mul": ("(Tensor gate, Tensor up)", _alloc_elementwise("rs.silu_mul"),
                    lambda g, u, out: _rs("silu_mul")(g, u, out=out), ("gate", "up")),
    "rs_rmsnorm": ("(Tensor x, Tensor weight, float eps)", _alloc_rows("rs.rmsnorm"),
                   lambda x, w, eps, out: _rs("rmsnorm")(x, w, eps, out=out), ("x", "weight")),
    "rs_softmax": ("(Tensor x)", _alloc_rows("rs.softmax"),
                   lambda x, out: _rs("softmax")(x, out=out), ("x",)),
}

# Ops without out=: kiln allocates, torch takes the result zero-copy.
ALLOCATING: Dict[str, Tuple[str, Callable[..., Tensor], Callable[..., Any], Tuple[str, ...]]] = {
    "embedding_checked": ("(Tensor table, Tensor ids)", _alloc_embedding,
                          lambda t, i: _kiln.embedding_checked(t, i), ("table", "ids")),
    "copy": ("(Tensor x)", lambda x: _like(x), lambda x: _kiln.copy(x), ("x",)),
}
if hasattr(_kiln, "matmul"):
    ALLOCATING["matmul"] = ("(Tensor a, Tensor b)", _alloc_matmul, lambda a, b: _kiln.matmul(a, b), ("a", "b"))
if hasattr(_kiln, "cudnn_softmax"):
    ALLOCATING["cudnn_softmax"] = ("(Tensor x)", _alloc_rows("cudnn_softmax"),
                                   lambda x: _kiln.cudnn_softmax(x), ("x",))

# The CustomOpDef objects (for registrations), by op name ("vecadd", "vecadd_out", ...).
DEFS: Dict[str, Any] = {}
# What kiln's functions call: the OpOverloads (torch.ops.kiln.<name>.default), which dynamo
# records as single graph nodes.
FUNCTIONAL: Dict[str, Any] = {}
OUT: Dict[str, Any] = {}
# The same implementations called directly, for plain eager calls (see `call`): torch's
# custom-op dispatch costs ~18 µs of host time per call on the H200 machine (kiln 24 µs against
# 5 µs before the ops became custom ops, torch's own ops 6-14 µs), which is the whole budget
# of a decode-size op.
EAGER: Dict[str, Callable[..., Tensor]] = {}
EAGER_OUT: Dict[str, Callable[..., None]] = {}


def _named(names: Sequence[str], args: Sequence[Any]) -> List[Tuple[str, Optional[Tensor]]]:
    return [(n, a) for n, a in zip(names, args)]


def _define_kernel(name: str, schema_args: str, alloc: Callable[..., Tensor],
                   raw: Callable[..., Any], names: Tuple[str, ...]) -> None:
    def impl(*args: Any) -> Tensor:
        _cuda_only(name, *_named(names, args))
        out = alloc(*args)
        raw(*args, out)
        return out

    def impl_out(*args: Any) -> None:
        *ins, out = args
        _cuda_only(name, *_named(names, ins), ("out", out))
        raw(*ins, out)

    op = torch.library.custom_op(f"kiln::{name}", impl, mutates_args=(), schema=f"{schema_args} -> Tensor")
    op.register_fake(alloc)
    DEFS[name] = op
    EAGER[name] = impl
    EAGER_OUT[name] = impl_out
    out_schema = schema_args[:-1] + ", Tensor(a!) out) -> ()"
    op_out = torch.library.custom_op(f"kiln::{name}_out", impl_out, mutates_args=("out",), schema=out_schema)
    op_out.register_fake(lambda *args: None)
    DEFS[f"{name}_out"] = op_out


def _define_allocating(name: str, schema_args: str, alloc: Callable[..., Tensor],
                       raw: Callable[..., Any], names: Tuple[str, ...]) -> None:
    def impl(*args: Any) -> Tensor:
        _cuda_only(name, *_named(names, args))
        return torch.from_dlpack(raw(*args))

    op = torch.library.custom_op(f"kiln::{name}", impl, mutates_args=(), schema=f"{schema_args} -> Tensor")
    op.register_fake(alloc)
    DEFS[name] = op


def _all_reduce_sum(inputs: List[Tensor]) -> List[Tensor]:
    _cuda_only("all_reduce_sum", *[(f"inputs[{i}]", t) for i, t in enumerate(inputs)])
    return [torch.from_dlpack(o) for o in _kiln.all_reduce_sum(list(inputs))]


for _name, (_schema, _alloc, _raw, _names) in KERNELS.items():
    _define_kernel(_name, _schema, _alloc, _raw, _names)
for _name, (_schema, _alloc, _raw, _names) in ALLOCATING.items():
    _define_allocating(_name, _schema, _alloc, _raw, _names)
if hasattr(_kiln, "all_reduce_sum"):
    DEFS["all_reduce_sum"] = torch.library.custom_op(
        "kiln::all_reduce_sum", _all_reduce_sum, mutates_args=(), schema="(Tensor[] inputs) -> Tensor[]")
    DEFS["all_reduce_sum"].register_fake(lambda inputs: [_like(t) for t in inputs])
for _name in DEFS:
    _overload = getattr(torch.ops.kiln, _name).default
    if _name.endswith("_out") and _name[:-4] in KERNELS:
        OUT[_name[:-4]] = _overload
    else:
        FUNCTIONAL[_name] = _overload


# ---- autograd ------------------------------------------------------------------------------
# Backward formulas in torch ops, in float32 where the forward computed in float32.

def _save_inputs(ctx: Any, inputs: Tuple[Any, ...], output: Any) -> None:
    # Scalars on ctx, tensors (inputs and the output) through save_for_backward.
    ctx.inputs = tuple(None if isinstance(t, Tensor) else t for t in inputs)
    ctx.save_for_backward(*[t for t in inputs if isinstance(t, Tensor)],
                          *([output] if isinstance(output, Tensor) else []))


def _bw_vecadd(ctx: Any, g: Tensor) -> Tuple[Any, ...]:
    return g, g


def _bw_axpby(ctx: Any, g: Tensor) -> Tuple[Any, ...]:
    _, _, alpha, beta = ctx.inputs
    return g * alpha, g * beta, None, None


def _bw_silu_mul(ctx: Any, g: Tensor) -> Tuple[Any, ...]:
    gate, up, _ = ctx.saved_tensors
    g32, gate32, up32 = g.float(), gate.float(), up.float()
    s = torch.sigmoid(gate32)
    d_gate = g32 * up32 * s * (1 + gate32 * (1 - s))
    d_up = g32 * gate32 * s
    return d_gate.to(gate.dtype), d_up.to(up.dtype)


def _bw_softmax(ctx: Any, g: Tensor) -> Tuple[Any, ...]:
    _, y = ctx.saved_tensors
    y32, g32 = y.float(), g.float()
    return ((g32 - (g32 * y32).sum(-1, keepdim=True)) * y32).to(y.dtype),


def _bw_rmsnorm(ctx: Any, g: Tensor) -> Tuple[Any, ...]:
    x, w, _ = ctx.saved_tensors
    eps = ctx.inputs[2]
    x32, w32, g32 = x.float(), w.float(), g.float()
    r = torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)
    xhat = x32 * r
    gw = g32 * w32
    dx = r * (gw - xhat * (gw * xhat).mean(-1, keepdim=True))
    dw = (g32 * xhat).reshape(-1, x.shape[-1]).sum(0)
    return dx.to(x.dtype), dw.to(w.dtype), None


def _bw_embedding(ctx: Any, g: Tensor) -> Tuple[Any, ...]:
    table, ids, _ = ctx.saved_tensors
    vocab, dim = table.shape
    flat = ids.reshape(-1).long()
    keep = (flat >= 0) & (flat < vocab)  # out-of-range ids gave zero rows: no gradient
    grad = torch.zeros((vocab, dim), dtype=torch.float32, device=g.device)
    grad.index_add_(0, flat[keep], g.reshape(-1, dim).float()[keep])
    return grad.to(table.dtype), None


def _bw_matmul(ctx: Any, g: Tensor) -> Tuple[Any, ...]:
    a, b, _ = ctx.saved_tensors
    return g @ b.t(), a.t() @ g


def _bw_copy(ctx: Any, g: Tensor) -> Tuple[Any, ...]:
    return g,


def _no_backward(name: str) -> Callable[..., Any]:
    def backward(ctx: Any, *grads: Any) -> Any:
        raise _errors.NoBackwardError(
            f"kiln.{name} has no backward: a gradient reached it. Compute this step with torch "
            f"ops when it needs gradients, or detach its inputs (docs/python.md lists the ops "
            f"with a backward)"
        )
    return backward


BACKWARD: Dict[str, Callable[..., Any]] = {
    "vecadd": _bw_vecadd, "rs_vecadd": _bw_vecadd,
    "axpby": _bw_axpby,
    "silu_mul": _bw_silu_mul, "rs_silu_mul": _bw_silu_mul,
    "softmax": _bw_softmax, "rs_softmax": _bw_softmax, "cudnn_softmax": _bw_softmax,
    "rmsnorm": _bw_rmsnorm, "rs_rmsnorm": _bw_rmsnorm,
    "embedding": _bw_embedding, "embedding_checked": _bw_embedding,
    "matmul": _bw_matmul,
    "copy": _bw_copy,
}

for _name, _op in DEFS.items():
    if _name.endswith("_out") and _name[:-4] in KERNELS:
        continue  # out= variants: no autograd (torch refuses grads through in-place outputs)
    _op.register_autograd(BACKWARD.get(_name, _no_backward(_name)), setup_context=_save_inputs)


# ---- the dispatch kiln's Python functions use ------------------------------------------------

def call(name: str, raw: Callable[[], Any], operands: Sequence[Any], scalars: Sequence[Any],
         out: Any, stream: Any) -> Any:
    """kiln.<name>(operands..., scalars..., out=, stream=) when torch is in the process.

    All operands torch tensors (and out, when given), no stream=, no kiln.stream block: the
    custom op (what torch.compile and graph capture see). Torch tensors mixed with other
    arrays, or an explicit stream: kiln's own call, its new array handed back as a tensor."""
    tensors = [isinstance(x, Tensor) for x in operands if x is not None]
    if not any(tensors) and not isinstance(out, Tensor):
        return raw()
    if all(tensors) and (out is None or isinstance(out, Tensor)) and stream is None and (
            torch.compiler.is_compiling() or _kiln.current_stream() is None):
        if name in EAGER and _plain_eager(operands, out):
            if out is None:
                return EAGER[name](*operands, *scalars)
            EAGER_OUT[name](*operands, *scalars, out)
            return out
        if out is None:
            return FUNCTIONAL[name](*operands, *scalars)
        OUT[name](*operands, *scalars, out)
        return out
    result = raw()
    return result if out is not None else as_tensor(result)


def _plain_eager(operands: Sequence[Any], out: Any) -> bool:
    """Whether calling the implementation directly is exactly what the custom op would do: not
    traced (torch.compile, fake or meta tensors, any dispatch or function mode, tensor
    subclasses), and no autograd graph to record. CUDA graph capture needs nothing from the
    dispatcher: the kernel launches on torch's current stream either way."""
    if torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack() > 0 \
            or torch._C._is_torch_function_mode_enabled():
        return False
    grad = torch.is_grad_enabled()
    for t in operands:
        if t is not None and (type(t) is not Tensor or (grad and t.requires_grad)):
            return False
    return out is None or type(out) is Tensor


def as_tensor(arr: Any) -> Tensor:
    """kiln's result as a torch tensor, zero-copy, ready on the stream kiln ran on (as the
    kiln.Array was): the export names that stream as the consumer, so nothing else is made to
    wait. (torch.from_dlpack(arr) would make torch's current stream wait; when that is the
    legacy default stream, the wait serializes every blocking stream, which broke the
    two-stream overlap of check_streams.py in the one GPU run.)"""
    return torch.from_dlpack(arr.__dlpack__(stream=arr.stream))
