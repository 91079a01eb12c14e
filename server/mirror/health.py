"""The mirror's figures for /health: queue depth, lag from submit to durable, batch times, failures.

Lag percentiles are over the changes made durable in the last `LAG_WINDOW_S`; the writer records each
change's lag when its batch commits (`MirrorWriter._committed`).
"""

from __future__ import annotations

import math
import time

from server.mirror.writer import MirrorWriter

LAG_WINDOW_S = 60.0  # the p99 of submit -> durable is over the changes made durable this recently
LAG_SAMPLES = 50_000


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


class MirrorHealth(MirrorWriter):
    """`statistics()`, read by /health."""

    name: str

    def statistics(self) -> dict[str, object]:
        now, now_perf = time.time(), time.perf_counter()
        while self._lag_at and now - self._lag_at[0] > LAG_WINDOW_S:
            self._lag_at.popleft()
            self._lag_ms.popleft()
        lags = list(self._lag_ms)
        stamps = [stamp for stamp in (lane.oldest() for lane in self._lanes) if stamp is not None]
        oldest = (now_perf - min(stamps)) * 1000 if stamps else 0.0
        p50, p99 = _percentile(lags, 0.5), _percentile(lags, 0.99)
        return {
            "kind": self.name,
            "connected": self.connected,
            "queue_depth": self._depth,
            "buffer_limit": self.buffer_limit,
            "buffer_full": self._depth >= self.buffer_limit,
            "writers": len(self._lanes),
            "lag_ms": round(oldest, 1),
            "lag_p50_ms": None if p50 is None else round(p50, 1),
            "lag_p99_ms": None if p99 is None else round(p99, 1),
            "lag_window": len(lags),
            "batch_ms_p50": _round(_percentile(list(self._batch_ms), 0.5)),
            "batch_ms_p99": _round(_percentile(list(self._batch_ms), 0.99)),
            "batches": self.batches,
            "rows": self.rows,
            "turns": self.turns_written,
            "failures": self.failures,
            "retries": self.retries,
            "full_episodes": self.full_episodes,
            "sessions_tracked": len(self._folds),
            "last_error": self.last_error,
        }
