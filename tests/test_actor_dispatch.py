"""The actor's dispatch tables: everything that can reach the inbox has exactly one handler."""

from __future__ import annotations

import typing

from session.actor import FRAME_HANDLERS, MESSAGE_HANDLERS
from session.messages import ClientFrame, Message, Stop


def test_every_message_but_stop_has_a_handler_and_nothing_else_does() -> None:
    assert set(MESSAGE_HANDLERS) == set(typing.get_args(Message)) - {Stop}


def test_every_client_frame_has_a_handler_and_nothing_else_does() -> None:
    assert set(FRAME_HANDLERS) == set(typing.get_args(ClientFrame))
