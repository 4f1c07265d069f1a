"""A compact copy of a large partition's vectors: a scan reads a quarter of the bytes and says, per row, the most
the exact float32 cosine can be.

Rows are packed in blocks of BLOCK_ROWS as int8 with one scale per row and
scanned with torch's fbgemm int8 kernel, which quantizes the query on the fly (to 7 bits,
``reduce_range``, so no 16-bit sum can saturate). Each block keeps the largest norm of a
row's rounding error ``e = a - ã`` and of a row's int8 form ``ã``; the query's own rounding
``x - x̃`` is worked out the way the kernel does it. Then, for every row of the block,

    |a·x - ã·x̃| <= |e|·|x| + |ã|·|x - x̃|   (Cauchy-Schwarz, twice)

and the kernel's ``ã·x̃`` is an exact integer sum times two scales, so adding a margin for a
few float32 roundings gives a bound that holds for every row. The caller works out the exact
cosine (``cosines.dots``) of each row whose bound could matter (``cosines.Cosines``).
"""

import functools
import warnings

import numpy as np
from django.conf import settings

# Float32 roundings of the kernel's scaling and of our norms: far above them, far below any cosine gap that counts.
_SLACK = 1e-5
# Rows per packed block: a partition's rows past its last whole block are scanned as float32.
BLOCK_ROWS = 65_536
# Rows quantized at a time: small pieces keep the float32 temporaries in cache.
_STEP = 4096


def packs(rows: int) -> bool:
    """Whether a partition of ``rows`` vectors is packed: MEMORY_COMPACT_MIN_ROWS or more, and the kernel is there."""
    return 0 < settings.MEMORY_COMPACT_MIN_ROWS <= rows and _torch() is not None


@functools.cache
def _torch():
    """torch, where it has the int8 kernel (fbgemm: x86); None otherwise, and every scan stays float32.

    Imported on first use: a process that never packs a partition never loads it (150 MB).
    """
    try:
        import torch
    except ImportError:
        return None
    return torch if "fbgemm" in torch.backends.quantized.supported_engines else None


class Block:
    """BLOCK_ROWS rows packed for the int8 kernel, with the largest norm of a row's rounding error and of its int8
    form."""

    def __init__(self, matrix: np.ndarray):
        scale = np.abs(matrix).max(axis=1) / np.float32(127)
        scale[scale == 0] = 1.0  # an all-zero row: any scale packs it exactly
        rounded = np.empty(matrix.shape, dtype=np.int8)
        self.error = self.norm = 0.0  # the largest of any row
        for start in range(0, len(matrix), _STEP):
            part, step = matrix[start : start + _STEP], scale[start : start + _STEP, None]
            packed = np.clip(np.rint(part / step), -127, 127)
            rounded[start : start + _STEP] = packed
            packed *= step
            self.norm = max(self.norm, float(np.linalg.norm(packed, axis=1).max()))
            self.error = max(self.error, float(np.linalg.norm(part - packed, axis=1).max()))
        torch = _torch()
        with warnings.catch_warnings():  # torch marks its quantized tensors deprecated; the pinned kernel is kept
            warnings.simplefilter("ignore")
            weight = torch._make_per_channel_quantized_tensor(
                torch.from_numpy(rounded),
                torch.from_numpy(scale.astype(np.float64)),
                torch.zeros(len(matrix), dtype=torch.int64),
                0,
            )
            self.packed = torch.ops.quantized.linear_prepack(weight, None)
        self.rows = len(matrix)
        # The kernel's packed copy (measured: about one byte per element and 60 per row).
        self.nbytes = matrix.size + 60 * self.rows


def pack(matrix: np.ndarray) -> list[Block]:
    """``matrix``'s whole blocks packed (the rows past the last whole block stay float32 only)."""
    return [Block(matrix[start : start + BLOCK_ROWS]) for start in range(0, len(matrix) - BLOCK_ROWS + 1, BLOCK_ROWS)]


def upper(blocks: list[Block], vector: np.ndarray, out: np.ndarray) -> None:
    """Per row of ``blocks`` in order, into ``out`` (float32): the most its exact cosine with ``vector`` can be."""
    torch = _torch()
    query = torch.from_numpy(np.ascontiguousarray(vector, dtype=np.float32)).reshape(1, -1)
    query_error, query_norm = _query_error(query), float(np.linalg.norm(vector))
    start = 0
    for block in blocks:
        end = start + block.rows
        out[start:end] = torch.ops.quantized.linear_dynamic(query, block.packed, True).numpy()[0]
        out[start:end] += np.float32(block.error * query_norm + block.norm * query_error + _SLACK)
        start = end


def _query_error(query) -> float:
    """``|x - x̃|``: the query against its 7-bit form, chosen and rounded as the kernel does (a test checks it)."""
    torch = _torch()
    scale, zero_point = torch._choose_qparams_per_tensor(query, True)
    rounded = torch.quantize_per_tensor(query, scale, zero_point, torch.quint8).dequantize()
    return float(torch.linalg.vector_norm(query - rounded))
