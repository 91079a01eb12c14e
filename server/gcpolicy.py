"""How `samvad serve` runs CPython's cyclic garbage collector: short pauses, one planned long one.

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
* whatever survives a gen1 pass is frozen as well. An object that has lived through two passes
  is, in this server, session state that lives for minutes, so no pass grows with the number of
  sessions. A pass costs in proportion to the young objects it walks, so small and frequent
  beats large and rare. Measured by benchmarks/gc_pauses.py (1,000 bot sessions at one
  turn per second each, 30 s per setting): young threshold 10,000 gave gen1 pauses of p50 24 ms,
  max 32 ms and turn latency p99 18.4 ms; 3,000 gave 8 / 11 ms and p99 8.0 ms; 1,500 gave 3.4 /
  4.8 ms and p99 4.6 ms; 700 gave 1.1 / 1.6 ms and p99 3.8 ms, with the least collector time
  (0.49 s per 30 s, against 0.89 s at 10,000 and 2.42 s for CPython's defaults unfrozen, whose
  full passes took up to 0.37 s and p99 248 ms). With the LLM brain streaming
  (benchmarks.capacity, 1,000 learners) 700 still let gen1 passes hold 11-15k young objects and
  run up to 7-9 ms, p99 7 ms; 100 gives gen0 passes of p99 0.3 ms and gen1 passes of p99 0.8 ms,
  max 1.9 ms, for the same collector time (0.57 s against 0.68 s in a step of 30 s). On the bot
  load above, 100 against 700 took 0.94 s against 0.93 s of young passes per 30 s, gen1 p99
  0.16 against 1.87 ms;
* a cycle that dies after being frozen is not collected by those passes. Such garbage is rare
  (about 25 objects a second at 1,160 turns/s, measured with the threshold at 700), and
  `full_collection`, run every `GC_FULL_EVERY_SECONDS` by the app, unfreezes, collects everything
  and freezes again. That pass is the one long pause, planned and logged: it walks every live
  object, so it grows with the sessions held in memory (0.27 s at 300,000 objects, 0.44 s at
  530,000: 1,000 busy sessions after 20 and 40 s). Evicted sessions do not wait for it: their
  state holds no cycles and is freed by reference counting (after 966 sessions were evicted, the
  next full pass found 18 objects to collect).
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

log = logging.getLogger("samvad.gc")

YOUNG_THRESHOLD = 100
GEN1_EVERY = 2
FULL_EVERY = 10  # CPython's default: with survivors frozen, gen2 holds next to nothing

_installed = False


def _freeze_survivors(phase: str, info: dict[str, Any]) -> None:
    if phase == "stop" and info["generation"] >= 1:
        gc.freeze()


def install() -> None:
    """Apply the policy to this process (the server's; tests leave the collector alone)."""
    global _installed
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, GEN1_EVERY, FULL_EVERY)
    if _freeze_survivors not in gc.callbacks:
        gc.callbacks.append(_freeze_survivors)
    _installed = True


def uninstall() -> None:
    """Undo `install`: default thresholds, nothing frozen, no callback."""
    global _installed
    if _freeze_survivors in gc.callbacks:
        gc.callbacks.remove(_freeze_survivors)
    gc.set_threshold(700, 10, 10)
    gc.unfreeze()
    _installed = False


def installed() -> bool:
    return _installed


def full_collection() -> dict[str, float]:
    """Collect everything, frozen objects included, then freeze the survivors again."""
    started = time.perf_counter()
    gc.unfreeze()
    collected = gc.collect()
    gc.freeze()
    figures = {"ms": round((time.perf_counter() - started) * 1000, 1), "collected": collected,
               "frozen": gc.get_freeze_count()}
    log.info("full garbage collection", extra=figures)
    return figures
