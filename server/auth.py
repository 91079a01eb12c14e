"""Signed tokens (JWT, HS256) that expire: session tokens name their session and role, learner
tokens their learner, report tokens the one report they open, admin tokens the teachers' sign-in.

Every kind has its own `role`, and each verifier accepts its own role only, so a token of one kind
never opens what another kind opens (docs/security.md): a report link cannot watch a session, a
learner token cannot speak in one, and a spectator token cannot read a learner's profile.

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
REPORT_ROLE = "report"  # opens GET /api/sessions/{sid}/report of its session and nothing else
ADMIN_ROLE = "admin"  # the teachers' sign-in cookie: what the admin key opens, while that key stays
TEACHER_ROLE = "teacher"  # a teacher's own credential: the studio and their own classes (server/classes/)
ASSERTION_AUDIENCE = "samvad"  # the `aud` a school's login server writes into its learner assertions
MAX_ASSERTION_SECONDS = 24 * 3600  # an assertion living longer than this is refused: it is a login, not a key


def _b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


# PyJWT's header for HS256, keys sorted as it writes them.
_HEADER = _b64(orjson.dumps({"alg": "HS256", "typ": "JWT"}))
_OWN_CLAIMS = frozenset({"iss", "sid", "lid", "adm", "tid", "role", "iat", "exp"})  # what `_sign` is given


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

    def issue(self, session_id: str, role: Role, *, now: float | None = None, ttl: int | None = None) -> str:
        issued = int(now if now is not None else time.time())
        return self._sign({"iss": ISSUER, "sid": session_id, "role": role.value, "iat": issued,
                           "exp": issued + (ttl or self.ttl_seconds)})

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
        # The subject and role are strings as `_sign` writes them: anything else (a number past 64 bits,
        # which orjson reads as a float where PyJWT's json keeps the integer) goes to PyJWT.
        if (type(exp) is not int or type(iat) is not int or payload.get("iss") != ISSUER
                or type(payload.get(subject)) is not str or type(payload.get("role")) is not str):
            return None
        now = time.time() if now is None else now
        if exp <= now - LEEWAY_SECONDS or iat > now + LEEWAY_SECONDS:
            return None
        return payload

    def issue_learner(self, learner_id: str, *, now: float | None = None, ttl: int | None = None) -> str:
        """A learner token: the proof that its holder is that learner. It reads the learner's
        profile and progress (GET /api/learners/{id}) and creates sessions bound to them
        (POST /api/sessions). It names no session, so no session route or socket takes it."""
        issued = int(now if now is not None else time.time())
        return self._sign({"iss": ISSUER, "lid": learner_id, "role": LEARNER_ROLE, "iat": issued,
                           "exp": issued + (ttl or self.ttl_seconds)})

    def verify_learner(self, token: str | None) -> str:
        """The learner id of a valid learner token."""
        return self._subject(token, "lid", LEARNER_ROLE)

    def issue_report(self, session_id: str, ttl: int, *, now: float | None = None) -> str:
        """A report link's token: opens that session's report, nothing else, for `ttl` seconds."""
        issued = int(now if now is not None else time.time())
        return self._sign({"iss": ISSUER, "sid": session_id, "role": REPORT_ROLE, "iat": issued,
                           "exp": issued + ttl})

    def verify_report(self, token: str | None) -> str:
        """The session id of a valid report token."""
        return self._subject(token, "sid", REPORT_ROLE)

    def issue_admin(self, admin_key: str, ttl: int, *, now: float | None = None) -> str:
        """The teachers' sign-in: what the admin key opens, for `ttl` seconds and while the key is the
        same (it names a digest of the key, so changing ADMIN_KEY signs everyone out)."""
        issued = int(now if now is not None else time.time())
        return self._sign({"iss": ISSUER, "adm": _key_digest(admin_key), "role": ADMIN_ROLE, "iat": issued,
                           "exp": issued + ttl})

    def verify_admin(self, token: str | None, admin_key: str) -> bool:
        """Whether `token` is a valid sign-in for the current admin key."""
        try:
            digest = self._subject(token, "adm", ADMIN_ROLE)
        except TokenError:
            return False
        return hmac.compare_digest(digest.encode(), _key_digest(admin_key).encode())

    def issue_teacher(self, teacher_id: str, ttl: int, *, now: float | None = None) -> str:
        """A teacher's credential (issued by the admin, POST /api/teachers/{id}/token): the studio and
        that teacher's own classes, nothing of another teacher's and nothing only the admin may do."""
        issued = int(now if now is not None else time.time())
        return self._sign({"iss": ISSUER, "tid": teacher_id, "role": TEACHER_ROLE, "iat": issued,
                           "exp": issued + ttl})

    def verify_teacher(self, token: str | None) -> str:
        """The teacher id of a valid teacher token."""
        return self._subject(token, "tid", TEACHER_ROLE)

    def _subject(self, token: str | None, subject: str, role: str) -> str:
        if not token:
            raise TokenError("no token")
        try:
            payload = self._decode(token, subject)
        except jwt.PyJWTError as exc:
            raise TokenError(str(exc)) from None
        if payload.get("role") != role or not isinstance(payload.get(subject), str):
            raise TokenError(f"not a {role} token")
        return str(payload[subject])

    def check_admin(self, presented: str | None, admin_key: str) -> bool:
        """Whether `presented` is `admin_key`, compared in constant time; never with no key set."""
        if not admin_key or presented is None:
            return False
        return hmac.compare_digest(presented.encode(), admin_key.encode())


def _key_digest(key: str) -> str:
    return hashlib.sha256(b"samvad-admin-signin:" + key.encode()).hexdigest()[:32]


class LearnerAssertions:
    """Learner assertions signed by a school's or game's login server (docs/security.md).

    The operator shares `LEARNER_ASSERTION_KEY` with that server, which signs, for a learner who
    has logged in there, an HS256 JWT `{"sub": learner_id, "aud": "samvad", "iat", "exp"}` living
    at most `MAX_ASSERTION_SECONDS`. Samvad never sees the learner's password; the assertion is
    the proof that names them.
    """

    def __init__(self, key: str) -> None:
        self._key = key

    def verify(self, token: str | None, *, now: float | None = None) -> str:
        """The learner id the assertion names."""
        if not self._key:
            raise TokenError("no learner assertion key is configured")
        if not token:
            raise TokenError("no token")
        try:
            payload = jwt.decode(token, self._key, algorithms=["HS256"], audience=ASSERTION_AUDIENCE,
                                 leeway=LEEWAY_SECONDS, options={"require": ["exp", "iat", "sub", "aud"]})
        except jwt.PyJWTError as exc:
            raise TokenError(str(exc)) from None
        learner = payload.get("sub")
        if not isinstance(learner, str) or not 0 < len(learner) <= 64:
            raise TokenError("sub must name a learner (1 to 64 characters)")
        if int(payload["exp"]) - int(payload["iat"]) > MAX_ASSERTION_SECONDS:
            raise TokenError(f"an assertion may live {MAX_ASSERTION_SECONDS} s at most")
        return learner
