"""Signed tokens name their session and role, expire, and cannot be forged."""

from __future__ import annotations

import pytest

from schemas.enums import Role
from server.auth import TokenError, Tokens

SECRET = "s" * 40


def test_a_token_names_its_session_and_role() -> None:
    tokens = Tokens(SECRET, 60)
    claims = tokens.verify(tokens.issue("abc", Role.SPECTATOR))
    assert (claims.session_id, claims.role) == ("abc", Role.SPECTATOR)


def test_expired_forged_and_garbage_tokens_are_refused() -> None:
    tokens = Tokens(SECRET, 60)
    with pytest.raises(TokenError):
        tokens.verify(tokens.issue("abc", Role.PLAYER, now=0))
    with pytest.raises(TokenError):
        tokens.verify(Tokens("t" * 40, 60).issue("abc", Role.PLAYER))
    for bad in (None, "", "abc.def.ghi", "x" * 500):
        with pytest.raises(TokenError):
            tokens.verify(bad)


def test_a_token_survives_a_restart_when_the_secret_is_configured() -> None:
    token = Tokens(SECRET, 60).issue("abc", Role.PLAYER)
    assert Tokens(SECRET, 60).verify(token).session_id == "abc"


def test_admin_check() -> None:
    tokens = Tokens(SECRET, 60)
    assert tokens.check_admin(None, "")
    assert tokens.check_admin("k" * 20, "k" * 20)
    assert not tokens.check_admin("wrong", "k" * 20)
    assert not tokens.check_admin(None, "k" * 20)
