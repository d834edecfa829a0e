"""Numbers as the methodology's attached tables show them.

An analysis payload is plain JSON (``llm_loadgen.attach()``), and JSON has
no NaN or infinity: a statistic over nothing measured must become ``null``,
never a string or a crash in the report writer.
"""

from __future__ import annotations

import math

__all__ = ["table_number"]


def table_number(value: float, digits: int = 3) -> float | None:
    """``value`` rounded for a JSON table; NaN/inf (nothing measured) become ``None``."""
    return None if value != value or value in (math.inf, -math.inf) else round(value, digits)
