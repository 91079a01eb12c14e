"""The lease statements against the real Neo4j, through two `ClusterNode`s: take, refuse, steal after
expiry with a new epoch, a lost lease found at renewal, the fence, release and a wanted lease."""

from __future__ import annotations

import uuid

import anyio
import pytest

from brain.rules_vendor import RuleBasedVendor
from schemas.frames import CommandFrame
from server.cluster import ClusterNode, FencedMirror, LeaseBusy
from server.cluster.leases import FENCE
from server.cluster.node import LeaseSettings
from session.registry import SessionRegistry

pytestmark = [pytest.mark.anyio, pytest.mark.neo4j]


def node(name: str, mirror: FencedMirror) -> ClusterNode:
    return ClusterNode(LeaseSettings(name, ttl_s=1.0, renew_s=0.3, wait_s=0.0), mirror,
                       SessionRegistry(RuleBasedVendor(), mirror))


async def test_a_lease_is_taken_refused_stolen_after_expiry_with_a_new_epoch_and_fenced(neo4j_uri: str) -> None:
    async with FencedMirror(neo4j_uri, node="a") as ma, FencedMirror(neo4j_uri, node="b") as mb:
        await ma.ensure_schema()
        a, b = node("a", ma), node("b", mb)
        sid = uuid.uuid4().hex
        assert await a.claim(sid) == 1
        with pytest.raises(LeaseBusy):  # held and live: b may not take it
            await b.claim(sid, wait_s=0)
        await anyio.sleep(1.1)  # a did not renew: expired
        assert await b.claim(sid, wait_s=0) == 2 and b.takeovers == 1
        await a.renew()  # a finds out at its next renewal
        assert sid not in a.epochs and a.lost == 1
        # The fence names a stale writer (old epoch, or not the owner) and lets the owner through.
        assert await a._write(FENCE, leases=[{"session_id": sid, "epoch": 1}], node="a") == [{"session_id": sid}]
        assert await a._write(FENCE, leases=[{"session_id": sid, "epoch": 2}], node="a") == [{"session_id": sid}]
        assert await b._write(FENCE, leases=[{"session_id": sid, "epoch": 2}], node="b") == []
        # Released, it is taken at once, with the next epoch.
        await b._release([sid])
        assert await a.claim(sid, wait_s=0) == 3


async def test_one_renewal_renews_every_lease_and_a_wanted_one_is_let_go(neo4j_uri: str) -> None:
    mc, md = FencedMirror(neo4j_uri, node="c"), FencedMirror(neo4j_uri, node="d")
    async with md:
        c, d = node("c", mc), node("d", md)
        ids = [uuid.uuid4().hex for _ in range(50)]
        async with anyio.create_task_group() as tg:
            await tg.start(mc.run)  # c's sessions are written (fenced) as a node's are
            await tg.start(c.registry.run)
            for sid in ids:  # live sessions of c, under their leases
                await c.claim(sid)
                c.registry.create(session_id=sid)
            for _ in range(4):  # past the 1 s lease: renewals keep all 50
                await anyio.sleep(0.4)
                await c.renew()
            assert c.renewals == 4 and len(c.epochs) == 50 and c.lost == 0
            with pytest.raises(LeaseBusy):
                await d.claim(ids[0], wait_s=0)  # marks it wanted by d
            await c.renew()  # hands it over: the session leaves c's memory and the lease is released
            assert ids[0] not in c.epochs and c.registry.live(ids[0]) is None and c.handed_over == 1
            assert await d.claim(ids[0], wait_s=0) == 2
            tg.cancel_scope.cancel()



async def test_an_ended_session_kept_as_its_record_keeps_its_lease_until_it_leaves_memory(neo4j_uri: str) -> None:
    """The renewal gives back the leases of sessions gone from memory; an ended one swapped for its
    record (session/ended.py) has no actor, but is not gone: a late reconnect is served here."""
    mirror = FencedMirror(neo4j_uri, node="e")
    async with mirror:
        e = ClusterNode(LeaseSettings("e", ttl_s=1.0, renew_s=0.3, wait_s=0.0), mirror,
                        SessionRegistry(RuleBasedVendor(), mirror, ended_grace_seconds=0.0))
        sid = uuid.uuid4().hex
        async with anyio.create_task_group() as tg:
            await tg.start(mirror.run)
            await tg.start(e.registry.run)
            await e.claim(sid)
            actor = e.registry.create(session_id=sid)
            actor.submit(None, CommandFrame(type="command", id="stop", name="stop"))
            with anyio.fail_after(5):
                while not actor.negotiation.is_terminal or actor.busy or mirror._pending(sid):  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            e.registry.evict_idle()
            assert e.registry.live(sid) is None and sid in e.registry
            await e.renew()
            assert sid in e.epochs, "a session kept as its record keeps its lease"
            back = await e.registry.get(sid)
            assert back is not None and back.negotiation.is_terminal and e.registry.recovered == 0
            e.registry.remove(sid)
            await e.renew()
            assert sid not in e.epochs  # gone from memory: the lease is given back
            tg.cancel_scope.cancel()
