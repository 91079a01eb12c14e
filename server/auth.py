"""Signed tokens (JWT, HS256) that expire: session tokens name their session and role, learner
tokens their learner.

Every session created signs three tokens (player, spectator, learner), so signing is done here
with one prepared HMAC key: the same compact JWT that `jwt.encode` makes (its header, the claims
in order), at a fifth of the cost. Every socket and learner route verifies one, so a token with
exactly the header and the claims this server writes is checked with the same key and the same
rules as PyJWT's (`_own_payload`); anything else, a bad signature included, goes to PyJWT, which
decides and says why. `tests/test_auth.py` holds the two to the same answers.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from dataclasses import dataclass
from typing import Any

import jwt
import orjson

from schemas.enums import Role

ISSUER = "samvad"
LEEWAY_SECONDS = 5
LEARNER_ROLE = "learner"  # a learner token's role: not a `Role`, so session checks refuse it


def _b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


# PyJWT's header for HS256, keys sorted as it writes them.
_HEADER = _b64(orjson.dumps({"alg": "HS256", "typ": "JWT"}))
_OWN_CLAIMS = frozenset({"iss", "sid", "lid", "role", "iat", "exp"})  # what `_sign` is given


class TokenError(Exception):
    """The token is missing, malformed, badly signed, expired or of an unknown role."""


@dataclass(frozen=True, slots=True)
class Claims:
    session_id: str
    role: Role
    expires_at: float


class Tokens:
    def __init__(self, secret: str, ttl_seconds: int) -> None:
        # PyJWT verifies with a prepared key, which skips its per-call key preparation (31 us
        # instead of 51 per token); signing, and checking a token of our own, copy a prepared HMAC
        # (2.5 us instead of 12 with `jwt.encode`).
        self._key = jwt.PyJWK({"kty": "oct", "k": _b64(secret.encode()).decode(), "alg": "HS256"})
        self._mac = hmac.new(secret.encode(), digestmod=hashlib.sha256)
        self.ttl_seconds = ttl_seconds

    def _sign(self, payload: dict[str, Any]) -> str:
        signing_input = _HEADER + b"." + _b64(orjson.dumps(payload))
        mac = self._mac.copy()
        mac.update(signing_input)
        return (signing_input + b"." + _b64(mac.digest())).decode()

    def issue(self, session_id: str, role: Role, *, now: float | None = None) -> str:
        issued = int(now if now is not None else time.time())
        return self._sign({"iss": ISSUER, "sid": session_id, "role": role.value, "iat": issued,
                           "exp": issued + self.ttl_seconds})

    def verify(self, token: str | None) -> Claims:
        if not token:
            raise TokenError("no token")
        try:
            payload = self._decode(token, "sid")
            return Claims(str(payload["sid"]), Role(payload["role"]), float(payload["exp"]))
        except (jwt.PyJWTError, ValueError, KeyError) as exc:
            raise TokenError(str(exc)) from None

    def _decode(self, token: str, subject: str) -> dict[str, Any]:
        """The checked payload of a token naming `subject` ("sid" or "lid"); PyJWT's errors."""
        payload = self._own_payload(token, subject)
        if payload is not None:
            return payload
        return jwt.decode(token, self._key, algorithms=["HS256"], issuer=ISSUER, leeway=LEEWAY_SECONDS,
                          options={"require": ["exp", subject, "role"]})

    def _own_payload(self, token: str, subject: str, now: float | None = None) -> dict[str, Any] | None:
        """The payload of a valid token in exactly the form `_sign` writes, or None to ask PyJWT.

        Accepts only what `jwt.decode` with `_decode`'s arguments accepts: this server's header
        byte for byte (HS256, nothing else), a signature equal to the key's over the first two
        segments, a JSON object with no claim `_sign` does not write, the issuer, integer `exp`
        and `iat`, and the expiry and issue time within the leeway. Whatever fails any of these
        (forged, expired, foreign, odd) is left to PyJWT, so every refusal keeps its message.
        """
        try:
            raw = token.encode("ascii")
        except UnicodeEncodeError:
            return None
        parts = raw.split(b".")
        if len(parts) != 3 or parts[0] != _HEADER:
            return None
        mac = self._mac.copy()
        mac.update(raw[: len(parts[0]) + 1 + len(parts[1])])
        if not hmac.compare_digest(_b64(mac.digest()), parts[2]):
            return None
        try:
            payload = orjson.loads(base64.urlsafe_b64decode(parts[1] + b"=" * (-len(parts[1]) % 4)))
        except ValueError:
            return None
        if not isinstance(payload, dict) or not payload.keys() <= _OWN_CLAIMS:
            return None
        exp, iat = payload.get("exp"), payload.get("iat", 0)
        if (type(exp) is not int or type(iat) is not int or payload.get("iss") != ISSUER
                or payload.get(subject) is None or payload.get("role") is None):
            return None
        now = time.time() if now is None else now
        if exp <= now - LEEWAY_SECONDS or iat > now + LEEWAY_SECONDS:
            return None
        return payload

    def issue_learner(self, learner_id: str, *, now: float | None = None) -> str:
        """A learner token: reads that learner's profile and progress (GET /api/learners/{id}). It
        names no session, so no session route or socket takes it."""
        issued = int(now if now is not None else time.time())
        return self._sign({"iss": ISSUER, "lid": learner_id, "role": LEARNER_ROLE, "iat": issued,
                           "exp": issued + self.ttl_seconds})

    def verify_learner(self, token: str | None) -> str:
        """The learner id of a valid learner token."""
        if not token:
            raise TokenError("no token")
        try:
            payload = self._decode(token, "lid")
        except jwt.PyJWTError as exc:
            raise TokenError(str(exc)) from None
        if payload.get("role") != LEARNER_ROLE or not isinstance(payload.get("lid"), str):
            raise TokenError("not a learner token")
        return str(payload["lid"])

    def check_admin(self, presented: str | None, admin_key: str) -> bool:
        """True when no admin key is configured, or the presented one matches it."""
        if not admin_key:
            return True
        return presented is not None and hmac.compare_digest(presented.encode(), admin_key.encode())
