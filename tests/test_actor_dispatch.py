"""The dispatch tables: everything that can reach the inbox, the machine or an actor's step has
exactly one entry, and nothing else has one."""

from __future__ import annotations

import typing

from schemas.frames import ResumeFrame
from session.actor import MESSAGE_HANDLERS
from session.asks import RUN
from session.machine import FRAMES, HANDLERS, Input
from session.messages import ClientFrame, Frame, Message, Stop
from session.outputs import Output


def test_every_message_but_stop_has_a_handler_and_nothing_else_does() -> None:
    assert set(MESSAGE_HANDLERS) == set(typing.get_args(Message)) - {Stop}


def test_every_client_frame_has_a_decision_and_nothing_else_does() -> None:
    """`resume` is decided as `ResumeAsked`, which carries what the actor's replay ring holds."""
    assert set(FRAMES) == set(typing.get_args(ClientFrame)) - {ResumeFrame}


def test_every_input_of_the_machine_has_a_decision_and_nothing_else_does() -> None:
    assert set(HANDLERS) == set(typing.get_args(Input)) - {Frame}


def test_every_ask_of_a_step_is_run_by_the_actor_and_every_other_output_is_an_event() -> None:
    from schemas.frames import ServerEvent

    events = set(typing.get_args(ServerEvent))
    asks = set(typing.get_args(Output)) - {ServerEvent} - events
    assert set(RUN) == asks and not events & set(RUN)


def test_every_frame_the_codec_decodes_has_one_row_at_the_socket_edge() -> None:
    """server/ws.py's reader does what `EDGE` says for a frame's type: no frame the codec lets
    through can fall between the rows, and only `ping` and `resume` are a spectator's."""
    from schemas.frames import CLIENT_FRAME_TYPES
    from server.ws import EDGE

    assert set(EDGE) == set(CLIENT_FRAME_TYPES.values())
    assert {kind.__name__ for kind, row in EDGE.items() if row.spectators} == {"PingFrame", "ResumeFrame"}
