"""Number formats of tensors (fp32, bf16, fp16, fp8 and custom sign-exponent-mantissa widths
such as DALL-E's 1-6-9) and how many bytes a buffer of them takes.

Packing rule: elements are packed bit after bit with no padding between them, and a buffer
is padded only at its end to a whole byte: ``n`` elements of ``b`` bits take
``ceil(n * b / 8)`` bytes. So 1-6-9 (16 bits) takes 2 bytes per element, and a 12-bit format
1.5 bytes per element (3 bytes per pair).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

# (sign, exponent, mantissa) bits of the named formats (IEEE 754 binary32/binary16; bfloat16;
# the OCP 8-bit floating point formats E4M3 and E5M2).
NAMED = {
    "fp32": (1, 8, 23), "bf16": (1, 8, 7), "fp16": (1, 5, 10),
    "fp8_e4m3": (1, 4, 3), "fp8_e5m2": (1, 5, 2),
}
ALIASES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
# The collsim dtype a format's buffers are handed to the engine as: the engine needs only
# the element size, and a buffer of any other format is a whole number of bytes.
_ENGINE_DTYPE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
_CUSTOM = re.compile(r"^([01])-(\d{1,2})-(\d{1,2})$")


@dataclass(frozen=True)
class Format:
    """A number format: its name and its sign, exponent and mantissa bits."""

    name: str
    sign: int
    exponent: int
    mantissa: int

    @property
    def bits(self) -> int:
        return self.sign + self.exponent + self.mantissa

    def nbytes(self, elements: int) -> int:
        """Bytes ``elements`` values take, packed (the module's rule)."""
        return -(-elements * self.bits // 8)

    def elements_in(self, nbytes: int) -> int:
        """How many whole values fit in ``nbytes`` bytes."""
        return nbytes * 8 // self.bits

    @property
    def engine_dtype(self) -> str:
        """The collsim dtype buffers of this format are simulated as (uint8: bytes)."""
        return _ENGINE_DTYPE.get(self.name, "uint8")

    def __str__(self) -> str:
        return self.name


def parse_format(text: object) -> Format:
    """A format from its name (fp32, bf16, fp16, fp8_e4m3, fp8_e5m2; float32, bfloat16,
    float16) or from ``S-E-M`` bits (``1-6-9``); ValueError says what is accepted."""
    name = ALIASES.get(str(text), str(text))
    if name in NAMED:
        return Format(name, *NAMED[name])
    match = _CUSTOM.match(name) if isinstance(text, str) else None
    if match:
        sign, exponent, mantissa = (int(g) for g in match.groups())
        if sign + exponent + mantissa == 0 or exponent == 0:
            raise ValueError(f"format {text!r} needs at least one exponent bit")
        return Format(name, sign, exponent, mantissa)
    raise ValueError(f"unknown number format {text!r}; use {', '.join(NAMED)}, or "
                     f"sign-exponent-mantissa bits such as 1-6-9")


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` for whole numbers, without floats."""
    return -(-a // b)


def isqrt_ceil(n: int) -> int:
    """The smallest whole ``s`` with ``s * s >= n``."""
    root = math.isqrt(n)
    return root if root * root == n else root + 1
