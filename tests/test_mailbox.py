"""The mailbox: bounded, in order, closable, and holding no deque while empty."""

from __future__ import annotations

import anyio
import pytest

from session.mailbox import Mailbox

pytestmark = pytest.mark.anyio


async def test_items_come_out_in_order_and_the_deque_goes_when_drained() -> None:
    box: Mailbox[int] = Mailbox(3)
    assert len(box) == 0 and box._items is None
    for i in range(3):
        box.send_nowait(i)
    with pytest.raises(anyio.WouldBlock):
        box.send_nowait(3)
    assert len(box) == 3
    assert [box.receive_nowait(), await box.receive(), box.receive_nowait()] == [0, 1, 2]
    assert len(box) == 0 and box._items is None
    with pytest.raises(anyio.WouldBlock):
        box.receive_nowait()
    box.send_nowait(4)  # made again on demand
    assert await box.receive() == 4


async def test_a_waiting_receiver_is_woken_and_close_ends_it_after_the_queue_drains() -> None:
    box: Mailbox[str] = Mailbox()
    got: list[str] = []

    async def consume() -> None:
        while True:
            try:
                got.append(await box.receive())
            except anyio.EndOfStream:
                got.append("end")
                return

    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)
        await anyio.sleep(0.01)
        box.send_nowait("a")
        await anyio.sleep(0.01)
        box.send_nowait("b")
        box.send_nowait("c")
        box.close()
    assert got == ["a", "b", "c", "end"]
    with pytest.raises(anyio.ClosedResourceError):
        box.send_nowait("d")


def test_a_mailbox_of_no_capacity_takes_nothing() -> None:
    box: Mailbox[int] = Mailbox(0)
    with pytest.raises(anyio.WouldBlock):
        box.send_nowait(1)
