"""Code the stubs must reject: mypy has to report an error on every line marked E."""

import numpy as np

import kiln

x = np.ones(8, dtype=np.float32)
n: str = kiln.device_count()  # E: int is not str
kiln.vecadd(x)  # E: b is missing
kiln.rmsnorm(x, x, eps="tiny")  # E: eps is a float
kiln.vecadd(x, x, stream="s")  # E: not a stream
kiln.vecadd(1, 2)  # E: ints are not DLPack arrays
kiln.rs.softmax(x, y=x)  # E: no such argument
kiln.not_an_op(x)  # E: no such function
