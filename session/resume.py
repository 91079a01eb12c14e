"""The `resume` frame, as the session machine decides it: bring a reconnecting client level, by replay or snapshot.

A client that reconnects sends the last `seq` it applied, on its new connection, and gets back:

- the events after that `seq`, in order, replayed from the ring of the last `limits.replay_events`
  sequenced events (the actor's `Fanout` keeps them, encoded once), when the ring still holds
  every one of them (`ResumeAsked.oldest`, the oldest it holds);
- nothing, when it is level with the session and the session holds its recent events, or has sent
  none yet (seq 0);
- a `snapshot` of the whole state (`replayed: false`, with the reason) otherwise: the events it
  missed are no longer held; or it is level with a session rebuilt from storage (after a restart
  or an eviction), which holds nothing for replay and says so explicitly; or it claims a `seq`
  the session never reached, because events it saw were lost in a restart before they were
  stored (its state is ahead of ours, and ours wins).

A snapshot consumes no `seq`. The answer goes to the resuming connection only, with `send_nowait`
like every other send; if that connection overflows during replay it has closed itself as a slow
consumer, and replay stops there. A `resume` with an `id` is then acknowledged at once: it changed
nothing, so there is no durability to wait for. A `resume` from a connection that has gone is
ignored (by the actor, which knows its connections). docs/protocol.md §5 describes the exchange from the client's side.
"""

from __future__ import annotations

from schemas.frames import Ack, ResumeFrame, Snapshot
from session.machine_state import MachineState
from session.messages import ResumeAsked
from session.outputs import Answer, Output, Replay

__all__ = ["on_resume"]


def on_resume(m: MachineState, message: ResumeAsked, now: float, out: list[Output]) -> None:
    frame = message.frame
    assert isinstance(frame, ResumeFrame)
    negotiation = m.negotiation
    latest = negotiation.seq
    last = min(frame.last_seq, latest)
    oldest = message.oldest
    reason: str | None = None
    if frame.last_seq > latest:
        # The client saw events that were never stored (a crash lost them): its state is ahead.
        reason = f"events after seq {latest} were lost in a restart before they were stored"
    elif last == latest:
        if oldest is None and latest > 0:
            # Events were sent and none is held for replay: the session was rebuilt from storage
            # (after a restart or an eviction). The client is level with it, and a snapshot says
            # so explicitly. (At seq 0 nothing was ever sent: the client is simply level.)
            reason = "the session was rebuilt from storage; nothing is held for replay"
    elif oldest is not None and oldest <= last + 1:
        out.append(Replay(last))
    else:
        reason = f"{latest - last} events after seq {last} are no longer held for replay"
    if reason is not None:
        out.append(Answer(Snapshot(session_id=negotiation.session_id, seq=latest, state=negotiation.snapshot(),
                                   replayed=False, reason=reason)))
    if frame.id is not None:
        out.append(Answer(Ack(session_id=negotiation.session_id, id=frame.id)))
