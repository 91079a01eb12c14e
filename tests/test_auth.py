"""Signed tokens name their session and role, expire, and cannot be forged."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    assert not tokens.check_admin(None, "") and not tokens.check_admin("", "")  # no key opens nothing here
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


# --------------------------------------------------------------------------- the prepared check


_NOW = 1_900_000_000  # a fixed clock for the prepared check; PyJWT is given tokens far from its edges

_claim_values = st.one_of(
    st.none(), st.booleans(), st.text(max_size=8), st.sampled_from(["samvad", "player", "learner", "abc"]),
    st.integers(min_value=-(2**70), max_value=2**70), st.floats(allow_nan=False, allow_infinity=False),
)


def _times(now: int) -> st.SearchStrategy[object]:
    # Far from the leeway's edges (PyJWT reads the real clock a moment later) or not integers at all.
    return st.one_of(st.sampled_from([now - 10_000, now - 600, now + 600, now + 10_000]),
                     st.sampled_from([float(now + 600), True, "1900000600", None]))


@st.composite
def _tokens(draw: st.DrawFn) -> tuple[str, str]:
    """A token this server could have signed, then up to three things changed about it."""
    import json
    import time

    now = int(time.time())
    subject = draw(st.sampled_from(["sid", "lid"]))
    payload: dict[str, object] = {"iss": "samvad", subject: "abc", "role": "player", "iat": now, "exp": now + 600}
    header: dict[str, object] = {"alg": "HS256", "typ": "JWT"}
    secret, signature_change = SECRET, "none"
    for change in draw(st.lists(st.sampled_from(["claim", "claim", "drop", "header", "secret", "signature"]),
                                max_size=3)):
        if change == "claim":
            name = draw(st.sampled_from(["iss", "sid", "lid", "role", "iat", "exp", "nbf", "aud", "extra"]))
            payload[name] = draw(_times(now) if name in ("iat", "exp", "nbf") else _claim_values)
        elif change == "drop" and payload:
            payload.pop(draw(st.sampled_from(sorted(payload))))
        elif change == "header":
            header = draw(st.sampled_from([
                {"typ": "JWT", "alg": "HS256"}, {"alg": "HS256"}, {"alg": "HS256", "typ": "JWT", "kid": "k"},
                {"alg": "HS512", "typ": "JWT"}, {"alg": "none"}]))
        elif change == "secret":
            secret = "t" * 40
        else:
            signature_change = draw(st.sampled_from(["flip", "pad", "drop"]))
    segments = [_b64url(json.dumps(header, separators=(",", ":")).encode()),
                _b64url(json.dumps(payload, separators=(",", ":")).encode())]
    signature = _b64url(hmac.new(secret.encode(), ".".join(segments).encode(), hashlib.sha256).digest())
    if signature_change == "flip":
        signature = ("A" if signature[0] != "A" else "B") + signature[1:]
    elif signature_change == "pad":
        signature += "="
    elif signature_change == "drop":
        signature = ""
    return ".".join([*segments, signature]), subject


def _b64url(data: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _pyjwt(token: str, subject: str) -> dict[str, object] | None:
    import jwt

    try:
        return dict(jwt.decode(token, SECRET, algorithms=["HS256"], issuer="samvad", leeway=5,
                               options={"require": ["exp", subject, "role"]}))
    except jwt.PyJWTError:
        return None


@settings(max_examples=400, deadline=None)
@given(_tokens())
def test_the_prepared_check_accepts_only_what_pyjwt_accepts(case: tuple[str, str]) -> None:
    import time

    token, subject = case
    tokens = Tokens(SECRET, 60)
    own = tokens._own_payload(token, subject, now=time.time())
    expected = _pyjwt(token, subject)
    if own is not None:
        assert own == expected
    # Whichever way the check goes, `_decode` answers as PyJWT does.
    try:
        decoded: dict[str, object] | None = tokens._decode(token, subject)
    except Exception:
        decoded = None
    assert decoded == expected


def test_the_prepared_check_takes_this_servers_tokens_and_keeps_the_leeway() -> None:
    tokens = Tokens(SECRET, 60)
    issued = tokens.issue("abc", Role.PLAYER, now=_NOW)
    assert tokens._own_payload(issued, "sid", now=_NOW) == {
        "iss": "samvad", "sid": "abc", "role": "player", "iat": _NOW, "exp": _NOW + 60}
    assert tokens._own_payload(tokens.issue_learner("bhäi", now=_NOW), "lid", now=_NOW) is not None
    # PyJWT's rules: expired once exp <= now - leeway; not yet valid once iat > now + leeway.
    assert tokens._own_payload(issued, "sid", now=_NOW + 64.9) is not None
    assert tokens._own_payload(issued, "sid", now=_NOW + 65) is None
    assert tokens._own_payload(issued, "sid", now=_NOW - 5) is not None
    assert tokens._own_payload(issued, "sid", now=_NOW - 5.1) is None
    # A session token does not name a learner, and the other way round.
    assert tokens._own_payload(issued, "lid", now=_NOW) is None
    assert Tokens("t" * 40, 60)._own_payload(issued, "sid", now=_NOW) is None


def test_each_token_kind_opens_only_its_own_door() -> None:
    tokens = Tokens(SECRET, 60)
    report = tokens.issue_report("abc", 30)
    learner = tokens.issue_learner("asha")
    spectator = tokens.issue("abc", Role.SPECTATOR)
    signin = tokens.issue_admin("a" * 32, 60)
    assert tokens.verify_report(report) == "abc" and tokens.verify_learner(learner) == "asha"
    assert tokens.verify_admin(signin, "a" * 32)
    for verify, others in ((tokens.verify, (report, learner, signin)),
                           (tokens.verify_report, (spectator, learner, signin)),
                           (tokens.verify_learner, (spectator, report, signin))):
        for token in others:
            with pytest.raises(TokenError):
                verify(token)
    assert not tokens.verify_admin(spectator, "a" * 32) and not tokens.verify_admin(report, "a" * 32)


def test_a_sign_in_ends_when_the_admin_key_changes_or_it_expires() -> None:
    tokens = Tokens(SECRET, 60)
    assert not tokens.verify_admin(tokens.issue_admin("a" * 32, 60), "b" * 32)
    assert not tokens.verify_admin(tokens.issue_admin("a" * 32, 60, now=0), "a" * 32)


def test_a_report_token_expires_after_its_own_short_life() -> None:
    tokens = Tokens(SECRET, 3600)
    import time

    with pytest.raises(TokenError):
        tokens.verify_report(tokens.issue_report("abc", 60, now=time.time() - 120))


def test_a_login_servers_assertion_names_its_learner_and_nothing_else_passes() -> None:
    import time

    import jwt

    from server.auth import LearnerAssertions

    key = "school-login-key-" + "z" * 24
    assertions = LearnerAssertions(key)
    now = int(time.time())
    good = {"sub": "class7/asha", "aud": "samvad", "iat": now, "exp": now + 600}
    assert assertions.verify(jwt.encode(good, key, algorithm="HS256")) == "class7/asha"
    refused = [
        jwt.encode(good, "another-key-" + "q" * 24, algorithm="HS256"),
        jwt.encode({**good, "aud": "elsewhere"}, key, algorithm="HS256"),
        jwt.encode({**good, "exp": now - 60}, key, algorithm="HS256"),
        jwt.encode({**good, "exp": now + 3 * 24 * 3600}, key, algorithm="HS256"),  # a key, not a login
        jwt.encode({k: v for k, v in good.items() if k != "sub"}, key, algorithm="HS256"),
        jwt.encode({**good, "sub": "x" * 65}, key, algorithm="HS256"),
        jwt.encode(good, None, algorithm="none"),
    ]
    for token in refused:
        with pytest.raises(TokenError):
            assertions.verify(token)
    with pytest.raises(TokenError):
        LearnerAssertions("").verify(jwt.encode(good, key, algorithm="HS256"))
