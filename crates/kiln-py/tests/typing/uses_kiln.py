"""What a user's code type-checks to against kiln's stubs (mypy): torch tensors in, torch tensors
out; any other DLPack array in, kiln.Array out; out= gives its own type back."""

from typing import Any, List, assert_type  # assert_type: Python 3.11+

import numpy as np
import torch

import kiln
import kiln.rs

x = np.ones(8, dtype=np.float32)
assert_type(kiln.vecadd(x, x), kiln.Array)
assert_type(kiln.rs.vecadd(x, x), kiln.Array)
assert_type(kiln.rmsnorm(x.reshape(1, 8), x, 1e-5), kiln.Array)
assert_type(kiln.rope(x.reshape(1, 1, 8), offset=3), kiln.Array)
assert_type(kiln.embedding_checked(x.reshape(2, 4), np.zeros(3, np.int64)), kiln.Array)
assert_type(kiln.all_reduce_sum([x]), List[kiln.Array])
out = kiln.asarray(x)
assert_type(kiln.vecadd(x, x, out=out), kiln.Array)
assert_type(kiln.device_count(), int)
assert_type(kiln.is_available(), bool)
assert_type(out.shape, tuple[int, ...])
assert_type(out.numpy(), np.ndarray[Any, Any])

t = torch.Tensor()
assert_type(kiln.vecadd(t, t), torch.Tensor)
assert_type(kiln.rs.softmax(t), torch.Tensor)
assert_type(kiln.rope(t, t, theta=1e6), torch.Tensor)
assert_type(kiln.matmul(t, t), torch.Tensor)
assert_type(kiln.all_reduce_sum([t]), List[torch.Tensor])

try:
    kiln.softmax(x)
except kiln.ShapeError as e:
    assert_type(e, kiln.ShapeError)
    v: ValueError = e
except kiln.KilnError as e:
    r: RuntimeError = e
with kiln.stream(0):
    pass
