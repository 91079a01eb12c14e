"""The actor's dispatch tables: everything that can reach the inbox has exactly one handler."""

from __future__ import annotations

import typing

from session.actor import FRAME_HANDLERS, MESSAGE_HANDLERS
from session.messages import ClientFrame, Message, Stop


def test_every_message_but_stop_has_a_handler_and_nothing_else_does() -> None:
    assert set(MESSAGE_HANDLERS) == set(typing.get_args(Message)) - {Stop}


def test_every_client_frame_has_a_handler_and_nothing_else_does() -> None:
    assert set(FRAME_HANDLERS) == set(typing.get_args(ClientFrame))


def test_every_frame_the_codec_decodes_has_one_row_at_the_socket_edge() -> None:
    """server/ws.py's reader does what `EDGE` says for a frame's type: no frame the codec lets
    through can fall between the rows, and only `ping` and `resume` are a spectator's."""
    from schemas.frames import CLIENT_FRAME_TYPES
    from server.ws import EDGE

    assert set(EDGE) == set(CLIENT_FRAME_TYPES.values())
    assert {kind.__name__ for kind, row in EDGE.items() if row.spectators} == {"PingFrame", "ResumeFrame"}
