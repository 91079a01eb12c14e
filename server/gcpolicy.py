"""How `samvad serve` runs CPython's cyclic garbage collector: short pauses, a full pass only when short.

Reference counting frees almost everything a turn allocates; the cyclic collector is only there
for cycles. Its cost is what it scans, and a busy server holds hundreds of thousands of live
objects (each session's history and negotiation state, kept for `SESSION_IDLE_SECONDS`). A pass
over them stops every socket: with 1,000 bot sessions at one turn per second each, CPython's
default thresholds, or the larger ones this server used before, gave gen1 and full passes of
0.1-0.9 s, and turn latency p99 followed (benchmarks/load.py, scenario b).

The policy:

* everything built before serving is frozen (`gc.freeze`): never scanned again;
* young passes stay small: a gen0 pass every `YOUNG_THRESHOLD` net allocations, a gen1 pass
  every `GEN1_EVERY` gen0 passes. The count is net: an object freed, however old, takes one off
  it. At a steady load as many objects die as are made, so the count climbs slowly while the
  young generations fill with everything made since the last pass that is still alive: the
  coroutines, futures and timers of tasks that are waiting (a streamed reply resting between
  reads, the model's HTTP read timeout rearmed on every packet, deadlines). A pass walks all of
  them, so its length follows the allocations between passes, not the threshold;
* a young pass walks the young generations only. An object that has lived through two passes is,
  in this server, session state that lives for minutes, and it moves to the oldest generation, so
  no young pass grows with the number of sessions. A pass costs in proportion to the young objects
  it walks, so small and frequent beats large and rare. Measured by benchmarks/gc_pauses.py (1,000
  bot sessions at one turn per second each, 30 s per setting): young threshold 10,000 gave gen1
  pauses of p50 24 ms, max 32 ms and turn latency p99 18.4 ms; 3,000 gave 8 / 11 ms and p99 8.0
  ms; 1,500 gave 3.4 / 4.8 ms and p99 4.6 ms; 700 gave 1.1 / 1.6 ms and p99 3.8 ms, with the least
  collector time (0.49 s per 30 s, against 0.89 s at 10,000 and 2.42 s for CPython's defaults
  unfrozen, whose full passes took up to 0.37 s and p99 248 ms). With the LLM brain streaming
  (benchmarks.capacity, 1,000 learners) 700 still let gen1 passes hold 11-15k young objects and
  run up to 7-9 ms, p99 7 ms; 100 gives gen0 passes of p99 0.3 ms and gen1 passes of p99 0.8 ms,
  max 1.9 ms, for the same collector time (0.57 s against 0.68 s in a step of 30 s). On the bot
  load above, 100 against 700 took 0.94 s against 0.93 s of young passes per 30 s, gen1 p99 0.16
  against 1.87 ms;
* whatever survives a gen1 pass moves to the oldest generation and stays there: CPython's own
  full passes are off (`NEVER`), so no automatic pass walks the sessions' state. (Until issue #33
  the survivors were frozen too, and the planned pass unfroze and walked everything, the
  start-up objects included: 0.27 s at 300,000 objects, 0.44 s at 530,000.)
* the planned pass (`full_collection`, offered every `GC_FULL_EVERY_SECONDS` by the app) frees
  the cycles that died in the oldest generation. It walks the oldest generation, which is what
  the server built while serving, but never the start-up objects (frozen once, about 78,000,
  86 ms to walk on the 2-core machine): nothing built before serving is expected to die. Its
  pause is in proportion to what it walks, so it runs only when it is expected to stop the world
  for at most `FULL_PAUSE_BUDGET_MS`, and is offered again every `FULL_RETRY_S` until then; after
  `FULL_MAX_DEFER_S` it runs whatever it costs. The expectation is the objects the collector tracks
  in the oldest generation (`len(gc.get_objects(2))`) times the milliseconds per object of the
  slowest of the last `PASSES_REMEMBERED` passes (one pass to the next varied 0.43-0.66 us an object
  under load). Counting is a walk too, a sixth to a third of the pass's own (6-28 ms at
  50,000-185,000 objects under load), done only when a pass is due, and the app lets the sockets
  run between the count and the pass, so that they are two pauses, not one (a first 20-minute run
  with the two back to back and the count inside the 40 ms budget deferred every pass: the troughs
  of the bots' load came to 33 ms expected plus 8 ms of count). Until issue #33 the
  expectation was the blocks allocated since start-up (`sys.getallocatedblocks`), which counts what
  the collector does not walk as well: the ended sessions kept as tuples of atoms, the learner
  profiles kept as bytes (session/ended.py, server/learners/store.py), a million blocks for 72,000
  tracked objects, so the estimate stayed high and no planned pass ran while serving. Waiting costs
  little: the server's cyclic garbage is rare (each session's sockets and state are freed by
  reference counting; privates/ breaks the cycles uvicorn and websockets leave), so a deferred pass
  leaves next to nothing unreclaimed. Each pass, and each deferral, is logged with its figures.
"""

from __future__ import annotations

import gc
import logging
import sys
import time
from collections import deque
from typing import Any

log = logging.getLogger("samvad.gc")

YOUNG_THRESHOLD = 100
GEN1_EVERY = 2
NEVER = 2**31 - 1  # gen1 passes before CPython's own full pass: never, in practice (years)
FULL_PAUSE_BUDGET_MS = 40.0  # issue #33: no pause over 50 ms
FULL_RETRY_S = 30.0
FULL_MAX_DEFER_S = 6 * 3600.0
# Before the first pass has been timed: milliseconds per tracked object in the oldest generation,
# from full passes at 1,000 bot sessions on the shared 2-core machine (issue #33, a probe in the
# server: 38.9 ms at 72,000 objects, 59.0 at 105,000, 61.8 at 122,000; heaps of 550,000-925,000
# took 0.84-0.9 us an object, more cache misses). About 67,000 objects fit in the budget.
INITIAL_MS_PER_OBJECT = 6.0e-4

PASSES_REMEMBERED = 3

_installed = False
_ms_per_object: deque[float] = deque(maxlen=PASSES_REMEMBERED)  # the last passes', newest last


def install() -> None:
    """Apply the policy to this process (the server's; tests leave the collector alone)."""
    global _installed
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, GEN1_EVERY, NEVER)
    _ms_per_object.clear()
    _installed = True


def uninstall() -> None:
    """Undo `install`: default thresholds, nothing frozen."""
    global _installed
    gc.set_threshold(700, 10, 10)
    gc.unfreeze()
    _installed = False


def installed() -> bool:
    return _installed


def old_objects() -> int:
    """The objects a planned pass would walk: those the collector tracks in the oldest generation
    (the frozen start-up objects are not in it). A walk of its own; see the module."""
    return len(gc.get_objects(generation=2))


def expected_pause_ms() -> float:
    """What a full pass would stop the world for now, going by the last one."""
    return old_objects() * _per_object()


def _per_object() -> float:
    return max(_ms_per_object, default=INITIAL_MS_PER_OBJECT)


def full_pass_due(expected_ms: float, waited_s: float) -> bool:
    """Whether the planned pass runs now: short enough, or put off for long enough."""
    return expected_ms <= FULL_PAUSE_BUDGET_MS or waited_s >= FULL_MAX_DEFER_S


def count_old() -> tuple[int, float]:
    """`old_objects()`, and the milliseconds the count took."""
    started = time.perf_counter()
    objects = old_objects()
    return objects, round((time.perf_counter() - started) * 1000, 1)


def full_collection(waited_s: float = 0.0, counted: tuple[int, float] | None = None) -> dict[str, Any] | None:
    """Collect everything built since start-up, if it is due; None when it is put off. `counted`:
    `count_old()` made just before (the app lets the sockets run between the two)."""
    objects, count_ms = count_old() if counted is None else counted
    expected = objects * _per_object()
    blocks = sys.getallocatedblocks()  # the heap's size, logged beside what the pass walks
    if not full_pass_due(expected, waited_s):
        log.info("full garbage collection deferred", extra={
            "expected_ms": round(expected, 1), "objects": objects, "count_ms": count_ms, "blocks": blocks,
            "waited_s": waited_s})
        return None
    started = time.perf_counter()
    collected = gc.collect()
    ms = (time.perf_counter() - started) * 1000
    if objects >= 10_000:  # a pass over a nearly empty generation times the fixed costs, not the walk
        _ms_per_object.append(ms / objects)
    figures = {"ms": round(ms, 1), "collected": collected, "objects": objects, "count_ms": count_ms,
               "blocks": blocks, "expected_ms": round(expected, 1), "waited_s": waited_s}
    log.info("full garbage collection", extra=figures)
    return figures
