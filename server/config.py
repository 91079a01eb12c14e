"""Settings, read once at start-up from the environment and an optional `.env` file.

Every value is validated here; a bad one stops the process with a message naming the variable.
Nothing else in the project reads `os.environ`.
"""

from __future__ import annotations

import ipaddress
import logging
import secrets
from enum import Enum
from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

log = logging.getLogger("samvad.config")

MIN_SECRET_CHARS = 32
GRACEFUL_SHUTDOWN_S = 5  # uvicorn's bound on closing connections after SIGTERM (server/cli.py)
DRAIN_RELEASE_MARGIN_S = 10.0  # after a drain's handover: the lease release write and the answer


class BrainChoice(str, Enum):
    RULES = "rules"
    OPENAI = "openai"
    AUTO = "auto"  # openai when OPENAI_API_KEY is set, rules otherwise


class MirrorChoice(str, Enum):
    NONE = "none"
    NEO4J = "neo4j"
    AUTO = "auto"  # neo4j when NEO4J_URI is set


class SttChoice(str, Enum):
    AUTO = "auto"  # openai when a speech or OpenAI key is set, else pocketsphinx when installed, else none
    OPENAI = "openai"
    POCKETSPHINX = "pocketsphinx"
    VOSK = "vosk"  # optional: the operator installs vosk and a model (VOSK_MODEL_DIR); docs/voice.md
    NONE = "none"  # text only: `audio` frames get speech_unavailable


class TtsChoice(str, Enum):
    AUTO = "auto"  # openai when a speech or OpenAI key is set, else espeak-ng when installed, else none
    OPENAI = "openai"
    ESPEAK = "espeak"
    NONE = "none"  # no reply.audio


class Environment(str, Enum):
    DEVELOPMENT = "development"
    PRODUCTION = "production"


class ConfigError(Exception):
    """A setting is missing or invalid; the message names it."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", extra="ignore",
                                      case_sensitive=True)

    # --- voice (docs/voice.md)
    STT: SttChoice = SttChoice.AUTO
    TTS: TtsChoice = TtsChoice.AUTO
    SPEECH_API_KEY: str = ""  # empty: OPENAI_API_KEY
    SPEECH_BASE_URL: str = ""  # any OpenAI-compatible speech server; empty: OPENAI_BASE_URL
    STT_MODEL: str = "whisper-1"  # asked for verbose_json, whose segment log-probs give the confidence
    TTS_MODEL: str = "gpt-4o-mini-tts"
    TTS_VOICE: str = "alloy"
    TTS_BY_SENTENCE: bool = True  # false: the whole reply synthesized at once, after it is known (to compare)
    VISEME_ALIGN: bool = False  # with TTS_BY_SENTENCE=false: English visemes by forced alignment (docs/voice.md)
    # Ask the brain at an open microphone's pause, before the end-of-turn wait is over, and use the call if
    # the turn asks the same (docs/voice.md, Speculation); false: only once the turn is taken (to compare).
    SPECULATE: bool = True
    # A spoken turn's reply with no audio this long after the learner's turn ended gets one of the
    # pack's thinking sounds first ("Hmm...", docs/voice.md); 0: never.
    THINKING_SOUND_AFTER_MS: int = Field(300, ge=0, le=10_000)
    # Offline STT biased to the pack's words and the moment (issue #41); false: pocketsphinx's general
    # US-English model alone (today's, kept to measure against). Models are cached in STT_CACHE_DIR.
    STT_SCENE: bool = True
    STT_CACHE_DIR: str = "var/stt"
    VOSK_MODEL_DIR: str = ""  # STT=vosk: the folder of a Vosk model the operator installed (nothing is downloaded)
    # The largest clip (and audio frame) accepted: 640 KiB is 20 s of 16 kHz PCM16 WAV, minutes of
    # Opus; base64 in JSON stays under the transport's limit of 16 x MAX_FRAME_BYTES.
    MAX_AUDIO_CLIP_BYTES: int = Field(640 * 1024, ge=4096, le=12 * 1024 * 1024)
    MAX_UTTERANCE_SECONDS: float = Field(30.0, gt=0, le=300)  # the longest utterance, streamed or clip

    # --- seed 000's configuration table
    OPENAI_API_KEY: str = ""
    OPENAI_MODEL: str = "gpt-4o"
    OPENAI_BASE_URL: str = ""  # any OpenAI-compatible server (vLLM, llama.cpp, Ollama)
    NEO4J_URI: str = ""  # empty: no mirror (the server runs with no database)
    NEO4J_USER: str = "neo4j"
    NEO4J_PASSWORD: str = ""
    NEO4J_TIMEOUT_MS: int = Field(2000, ge=100, le=120_000)
    MIRROR_BUFFER_CHANGES: int = Field(50_000, ge=1)  # changes held while Neo4j is slow or down
    MIRROR_BATCH_MAX: int = Field(500, ge=1, le=20_000)  # changes written per transaction at most
    # The longest a change waits for its batch, and how many write transactions run at once (each for
    # its own share of the sessions). A transaction costs the server ~2 ms of CPU and Neo4j as much again
    # whatever its size, so at a learner's pace few, larger ones are cheaper (docs/neo4j.md, issue #14).
    MIRROR_FLUSH_MS: float = Field(100.0, ge=0, le=10_000)
    MIRROR_WRITERS: int = Field(1, ge=1, le=16)
    USE_MOCKS: bool = False  # forces the rule-based brain and no mirror
    # Whether the vendor brings a learner's due review items back (docs/learning.md). Off, the items are
    # still judged and scheduled: the comparison an evaluation needs.
    REVIEWS_INVITE: bool = True
    # Items due within this long after a session starts count as due in it: a class that meets in the
    # afternoon gets what falls due that evening. 0: only what is due. (samvad eval sets days, so a
    # cohort's sessions minutes apart review what a learner's days apart would.)
    REVIEWS_DUE_AHEAD_SECONDS: float = Field(0.0, ge=0, le=30 * 86_400)
    LOG_LEVEL: str = "INFO"
    AI_TIMEOUT_MS: int = Field(10_000, ge=100, le=300_000)
    # An attempt with no first token after this long is abandoned and retried within AI_TIMEOUT_MS
    # (not streaming: no complete answer). 0: only AI_TIMEOUT_MS limits an attempt.
    AI_FIRST_TOKEN_TIMEOUT_MS: int = Field(5_000, ge=0, le=300_000)
    AI_TEMPERATURE: float = Field(0.7, ge=0.0, le=2.0)
    AI_MAX_TOKENS: int = Field(200, ge=16, le=16_384)
    AI_STREAM: bool = True  # stream reply_text to clients as reply.delta while the model writes
    AI_DELTA_INTERVAL_MS: int = Field(40, ge=0, le=1000)  # deltas after the first: per word group, at most this often
    AI_JSON_SCHEMA: bool = False  # strict json_schema structured outputs instead of json_object
    # Tokens of the LLM's conversation context: the running summary and the newest lines that fit
    # (docs/memory.md). Counted with tiktoken, offline; cl100k_base for models not shipped (errs high).
    HISTORY_TOKEN_BUDGET: int = Field(2000, ge=256, le=100_000)
    MAX_TURNS: int = Field(30, ge=2, le=500)
    MAX_MOOD_DELTA: int = Field(15, ge=1, le=100)
    APP_VERSION: str = "0.1.0"
    # Origins whose pages may call this server from a browser. Unset: any origin in development,
    # none in production (a teacher's pages are served by this server itself: same origin).
    CORS_ORIGINS: Annotated[list[str] | None, NoDecode] = None

    # --- choices
    BRAIN: BrainChoice = BrainChoice.AUTO
    MIRROR: MirrorChoice = MirrorChoice.AUTO
    SAMVAD_ENV: Environment = Environment.DEVELOPMENT
    WRAP_UP_AFTER_TURN: int = Field(25, ge=1, le=500)

    # --- the server itself
    HOST: str = "127.0.0.1"
    PORT: int = Field(8000, ge=0, le=65535)
    SAMVAD_SECRET: str = ""  # signs tokens; generated per process in development when empty
    # The trusted backends' and teachers' credential (docs/security.md): only as `Authorization:
    # Bearer`, at least MIN_SECRET_CHARS long, required in production.
    ADMIN_KEY: str = ""
    # A school's or game's login server signs learner assertions with this key (docs/security.md).
    LEARNER_ASSERTION_KEY: str = ""
    LINK_TTL_SECONDS: int = Field(3600, ge=60, le=7 * 24 * 3600)  # report and spectator links
    SIGNIN_TTL_SECONDS: int = Field(8 * 3600, ge=60, le=7 * 24 * 3600)  # the teachers' sign-in cookie
    # Addresses or networks (CIDR) of the proxies whose PROXY header or X-Forwarded-For is believed
    # for the client's address; empty: every peer is the client itself.
    TRUSTED_PROXIES: Annotated[list[str], NoDecode] = []
    RATE_BUCKETS: int = Field(50_000, ge=100)  # per-address, per-token and per-learner buckets kept (LRU)
    # POST /api/test, the shipped Unity build's route: on in development, off in production unless
    # enabled; with UNITY_DEVICE_KEYS (`device:key,...`) each request needs its device's key as a bearer.
    UNITY_TEST_ROUTE: bool | None = None
    UNITY_DEVICE_KEYS: Annotated[dict[str, str], NoDecode] = {}
    TOKEN_TTL_SECONDS: int = Field(4 * 3600, ge=60, le=30 * 24 * 3600)
    MAX_SESSIONS: int = Field(20_000, ge=1)
    MAX_FRAME_BYTES: int = Field(64 * 1024, ge=1024, le=16 * 1024 * 1024)
    MAX_TRANSCRIPT_CHARS: int = Field(1000, ge=10, le=100_000)
    RATE_LIMIT_PER_SECOND: float = Field(20.0, gt=0)
    RATE_LIMIT_BURST: int = Field(40, ge=1)
    RATE_ABUSE_CLOSE_AFTER: int = Field(100, ge=1)  # rate_limited errors before close 4429
    SESSION_CREATE_PER_SECOND: float = Field(50.0, gt=0)  # per client address
    SESSION_CREATE_BURST: int = Field(200, ge=1)
    OUTBOUND_QUEUE: int = Field(256, ge=8)  # events queued per connection before 4430
    REPLAY_EVENTS: int = Field(512, ge=16)
    SESSION_INBOX: int = Field(32, ge=1)
    SESSION_IDLE_SECONDS: float = Field(1800.0, gt=0)
    # An ended session nobody has had open this long is kept as a record of bytes (session/ended.py).
    # Short: at churn every ended actor waiting out the grace is some 60 objects that the planned
    # full pass walks (60 s held ~6,600 of them at 1,000 bot sessions, 5 s about 200; issue #33).
    SESSION_ENDED_GRACE_SECONDS: float = Field(2.0, gt=0)
    CONNECTION_IDLE_SECONDS: float = Field(900.0, gt=0)
    DEV_ENDPOINTS: bool = False  # POST /api/dev/generate; also on when LOG_LEVEL=DEBUG
    # --- cultural knowledge (docs/knowledge.md)
    KNOWLEDGE_DIR: str = "var/knowledge"  # uploaded playbooks when there is no Neo4j
    RETRIEVAL_TOP_K: int = Field(3, ge=1, le=20)  # chunks retrieved per query
    RETRIEVAL_MIN_SCORE: float = Field(1.0, gt=0)  # BM25 score below which nothing is "found"
    RETRIEVE_PER_SECOND: float = Field(20.0, gt=0)  # POST /retrieve per client address
    TIP_CARDS: bool = True  # a `tips` event after each learner turn
    CONFIDENCE_CLARIFY_THRESHOLD: float = Field(0.7, ge=0.0, le=1.0)  # below it a transcript is asked again
    # --- coaching (docs/coaching.md)
    SILENCE_TIMEOUT_MS: int = Field(30_000, ge=0)  # the learner's silence before a nudge; 0: no timers
    SILENCE_EXTENDED_TIMEOUT_MS: int = Field(60_000, ge=0)  # mid-sentence or right after a hint
    MAX_CONSECUTIVE_TIMEOUTS: int = Field(3, ge=1, le=20)  # silences in a row that end the session
    SESSION_RESTART_SECONDS: float = Field(7200.0, gt=0)  # absence after which a player is welcomed back
    # uvicorn's implementations; "auto" is uvicorn's own choice (uvloop, httptools and the
    # websockets sans-I/O protocol when installed). For "auto" and "websockets-sansio" the
    # server runs a subclass of that protocol that holds less per idle socket and delivers the
    # close code when it fails a connection (privates/__init__.py). benchmarks/load.py compares them.
    UVICORN_WS: Literal["auto", "websockets", "websockets-sansio", "wsproto"] = "auto"
    UVICORN_LOOP: Literal["auto", "asyncio", "uvloop"] = "auto"
    UVICORN_HTTP: Literal["auto", "h11", "httptools"] = "auto"
    # Off by default: frames are small JSON, and each socket's zlib state costs ~45 KiB of memory
    # plus CPU on every frame (measured with tracemalloc on 500 idle sessions).
    WS_PER_MESSAGE_DEFLATE: bool = False
    # `samvad serve` freezes its start-up objects and keeps young collections small
    # (server/gcpolicy.py); every this many seconds a full pass over what it built since is due,
    # and runs once it would pause for at most 40 ms. 0 leaves CPython's defaults alone.
    GC_FULL_EVERY_SECONDS: float = Field(600.0, ge=0)
    # --- scale-out (docs/deployment.md): several nodes behind HAProxy, sessions owned by Neo4j leases
    CLUSTER_NODE_ID: str = Field("", max_length=64, pattern=r"^[\w.\-]*$")  # empty: one node, no leases
    LEASE_SECONDS: float = Field(6.0, ge=1.0, le=300.0)  # a lease's life without renewal (failover bound)
    LEASE_RENEW_SECONDS: float = Field(2.0, ge=0.1, le=100.0)  # one transaction renews all of a node's leases
    LEASE_WAIT_SECONDS: float = Field(10.0, ge=0.0, le=600.0)  # a connection waits this long for a busy lease
    DRAIN_GRACE_SECONDS: float = Field(3.0, ge=0.0, le=120.0)  # /health says 503 this long before handover
    # --- Prometheus (GET /metrics)
    METRICS: bool = True
    METRICS_KEY: str = ""  # bearer for /metrics; empty: ADMIN_KEY; both empty: open (development only)

    @field_validator("CORS_ORIGINS", "TRUSTED_PROXIES", mode="before")
    @classmethod
    def _split_list(cls, value: object) -> object:
        if isinstance(value, str):
            return [o.strip() for o in value.split(",") if o.strip()]
        return value

    @field_validator("TRUSTED_PROXIES")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for net in value:
            ipaddress.ip_network(net, strict=False)  # ValueError names the bad one
        return value

    @field_validator("UNITY_DEVICE_KEYS", mode="before")
    @classmethod
    def _device_keys(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        keys: dict[str, str] = {}
        for pair in (p.strip() for p in value.split(",") if p.strip()):
            device, _, key = pair.partition(":")
            if not device or len(key) < MIN_SECRET_CHARS:
                raise ValueError(f"each entry is device:key with a key of {MIN_SECRET_CHARS} characters or more")
            keys[device.strip()] = key.strip()
        return keys

    @field_validator("LOG_LEVEL")
    @classmethod
    def _level(cls, value: str) -> str:
        level = value.upper()
        if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
            raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
        return level

    @model_validator(mode="after")
    def _coherent(self) -> Settings:
        if self.BRAIN is BrainChoice.OPENAI and not self.OPENAI_API_KEY and not self.USE_MOCKS:
            raise ValueError("BRAIN=openai needs OPENAI_API_KEY (or set BRAIN=rules)")
        if self.SAMVAD_SECRET and len(self.SAMVAD_SECRET) < MIN_SECRET_CHARS:
            raise ValueError(f"SAMVAD_SECRET must be at least {MIN_SECRET_CHARS} characters")
        for name, value in (("ADMIN_KEY", self.ADMIN_KEY), ("LEARNER_ASSERTION_KEY", self.LEARNER_ASSERTION_KEY)):
            if value and len(value) < MIN_SECRET_CHARS:
                raise ValueError(f"{name} must be at least {MIN_SECRET_CHARS} characters")
        if self.production:
            if not self.SAMVAD_SECRET:
                raise ValueError("SAMVAD_SECRET is required when SAMVAD_ENV=production")
            if not self.ADMIN_KEY:
                raise ValueError("ADMIN_KEY is required when SAMVAD_ENV=production (the teachers' and "
                                 "trusted backends' credential)")
            if self.DEV_ENDPOINTS:
                raise ValueError("DEV_ENDPOINTS is never on with SAMVAD_ENV=production")
            if self.CORS_ORIGINS and "*" in self.CORS_ORIGINS:
                raise ValueError("CORS_ORIGINS may not be * with SAMVAD_ENV=production: list the origins")
            if self.UNITY_TEST_ROUTE and not self.UNITY_DEVICE_KEYS:
                raise ValueError("UNITY_TEST_ROUTE with SAMVAD_ENV=production needs UNITY_DEVICE_KEYS")
        if self.TOKEN_TTL_SECONDS <= self.SESSION_RESTART_SECONDS:
            raise ValueError("TOKEN_TTL_SECONDS must be longer than SESSION_RESTART_SECONDS, or no learner "
                             "could come back to be welcomed back")
        if self.SILENCE_EXTENDED_TIMEOUT_MS < self.SILENCE_TIMEOUT_MS:
            raise ValueError("SILENCE_EXTENDED_TIMEOUT_MS must not be shorter than SILENCE_TIMEOUT_MS")
        if self.MIRROR is MirrorChoice.NEO4J and not self.NEO4J_URI:
            self.NEO4J_URI = "bolt://localhost:7687"
        if self.CLUSTER_NODE_ID and (self.mirror_kind is not MirrorChoice.NEO4J):
            raise ValueError("CLUSTER_NODE_ID needs the Neo4j mirror (NEO4J_URI): without it there is one node")
        if self.CLUSTER_NODE_ID and self.LEASE_RENEW_SECONDS * 2 >= self.LEASE_SECONDS:
            raise ValueError("LEASE_RENEW_SECONDS must be under half of LEASE_SECONDS, or one slow renewal "
                             "loses every lease")
        return self

    # --- derived choices
    @property
    def production(self) -> bool:
        return self.SAMVAD_ENV is Environment.PRODUCTION

    @property
    def drain_bound_seconds(self) -> float:
        """How long a drain may take: the grace in which HAProxy and a readiness probe see it, then the
        handover, whose flushes wait at most a lease's life, and a margin for the release write.
        `samvad drain` (a pod's preStop hook) waits this long; deploy/helm/samvad budgets for it."""
        return self.DRAIN_GRACE_SECONDS + self.LEASE_SECONDS + DRAIN_RELEASE_MARGIN_S

    @property
    def shutdown_bound_seconds(self) -> float:
        """How long the process may take after SIGTERM: uvicorn's graceful close, then the lifespan's
        last handover (bounded by LEASE_SECONDS in server/app.py)."""
        return GRACEFUL_SHUTDOWN_S + self.LEASE_SECONDS

    @property
    def cors_origins(self) -> list[str]:
        if self.CORS_ORIGINS is not None:
            return self.CORS_ORIGINS
        return [] if self.production else ["*"]

    @property
    def unity_route(self) -> bool:
        return (not self.production) if self.UNITY_TEST_ROUTE is None else self.UNITY_TEST_ROUTE

    @property
    def brain_kind(self) -> BrainChoice:
        if self.USE_MOCKS:
            return BrainChoice.RULES
        if self.BRAIN is BrainChoice.AUTO:
            return BrainChoice.OPENAI if self.OPENAI_API_KEY else BrainChoice.RULES
        return self.BRAIN

    @property
    def mirror_kind(self) -> MirrorChoice:
        if self.USE_MOCKS:
            return MirrorChoice.NONE
        if self.MIRROR is MirrorChoice.AUTO:
            return MirrorChoice.NEO4J if self.NEO4J_URI else MirrorChoice.NONE
        return self.MIRROR

    @property
    def audio_frame_bytes(self) -> int:
        """The largest `audio` frame read: a whole clip in base64 and its JSON, within the transport."""
        return min(self.MAX_AUDIO_CLIP_BYTES * 4 // 3 + 1024, 16 * self.MAX_FRAME_BYTES)

    @property
    def speech_key(self) -> str:
        return self.SPEECH_API_KEY or self.OPENAI_API_KEY

    @property
    def stt_kind(self) -> SttChoice:
        if self.STT is SttChoice.AUTO:
            if self.speech_key and not self.USE_MOCKS:
                return SttChoice.OPENAI
            from voice.stt import pocketsphinx_available

            return SttChoice.POCKETSPHINX if pocketsphinx_available() else SttChoice.NONE
        return self.STT

    @property
    def tts_kind(self) -> TtsChoice:
        if self.TTS is TtsChoice.AUTO:
            if self.speech_key and not self.USE_MOCKS:
                return TtsChoice.OPENAI
            from voice.tts import espeak_available

            return TtsChoice.ESPEAK if espeak_available() else TtsChoice.NONE
        return self.TTS

    @property
    def dev_endpoints(self) -> bool:
        """POST /api/dev/generate: never in production, whatever the log level."""
        return not self.production and (self.DEV_ENDPOINTS or self.LOG_LEVEL == "DEBUG")

    @property
    def signing_secret(self) -> str:
        if not self.SAMVAD_SECRET:
            self.SAMVAD_SECRET = secrets.token_urlsafe(48)
            log.warning("SAMVAD_SECRET is not set: generated one for this process; tokens will not "
                        "survive a restart (set SAMVAD_SECRET to keep them valid)")
        return self.SAMVAD_SECRET


def load_settings(**overrides: object) -> Settings:
    """Read and validate the settings, raising ConfigError with one line per bad variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            name = ".".join(str(p) for p in err["loc"]) or "settings"
            lines.append(f"  {name}: {err['msg']} (got {err.get('input')!r})")
        raise ConfigError("invalid configuration:\n" + "\n".join(lines)) from None
