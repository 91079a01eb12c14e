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


def _hs512(payload: dict[str, object]) -> str:
    import base64
    import hashlib
    import hmac
    import json

    def b64(data: bytes) -> bytes:
        return base64.urlsafe_b64encode(data).rstrip(b"=")

    signing = b64(json.dumps({"alg": "HS512", "typ": "JWT"}).encode()) + b"." + b64(json.dumps(payload).encode())
    return (signing + b"." + b64(hmac.new(SECRET.encode(), signing, hashlib.sha512).digest())).decode()


def test_tokens_with_another_algorithm_issuer_or_missing_claims_are_refused() -> None:
    import time

    import jwt

    tokens = Tokens(SECRET, 60)
    now = int(time.time())
    good = {"iss": "samvad", "sid": "abc", "role": "player", "iat": now, "exp": now + 60}
    assert tokens.verify(jwt.encode(good, SECRET, algorithm="HS256")).session_id == "abc"
    unsigned = jwt.encode(good, None, algorithm="none")
    forged = [
        unsigned,
        unsigned + "c2ln",  # "none" with a made-up signature
        _hs512(good),  # the right secret, another algorithm
        jwt.encode({**good, "iss": "elsewhere"}, SECRET, algorithm="HS256"),
        jwt.encode({**good, "role": "admin"}, SECRET, algorithm="HS256"),
        jwt.encode({k: v for k, v in good.items() if k != "exp"}, SECRET, algorithm="HS256"),
        jwt.encode({k: v for k, v in good.items() if k != "role"}, SECRET, algorithm="HS256"),
    ]
    for token in forged:
        with pytest.raises(TokenError):
            tokens.verify(token)


def test_issued_tokens_are_the_jwts_pyjwt_would_sign() -> None:
    import jwt

    tokens = Tokens(SECRET, 60)
    claims = {"iss": "samvad", "sid": "abc", "role": "player", "iat": 1000, "exp": 1060}
    assert tokens.issue("abc", Role.PLAYER, now=1000) == jwt.encode(claims, SECRET, algorithm="HS256")
    learner = {"iss": "samvad", "lid": "bot-7", "role": "learner", "iat": 1000, "exp": 1060}
    assert tokens.issue_learner("bot-7", now=1000) == jwt.encode(learner, SECRET, algorithm="HS256")
    # Not ASCII: the claims are UTF-8 JSON rather than escaped, which any JWT library reads alike.
    decoded = jwt.decode(tokens.issue_learner("bhäi/ 1"), SECRET, algorithms=["HS256"], issuer="samvad")
    assert decoded["lid"] == "bhäi/ 1"
    assert tokens.verify_learner(tokens.issue_learner("bhäi/ 1")) == "bhäi/ 1"
