"""Error codes sent in `error` frames and the WebSocket close codes the server uses.

Both are part of the wire contract in docs/protocol.md; change them only with that document. The
close codes the WebSocket layer sends by itself (1002, 1007, 1009, 1011, 1012) are listed there too.
"""

from __future__ import annotations

from enum import Enum, IntEnum


class ErrorCode(str, Enum):
    BAD_FRAME = "bad_frame"  # not decodable, or not an object with a string `type`
    UNKNOWN_TYPE = "unknown_type"  # `type` names no client frame
    INVALID = "invalid"  # a known frame with missing, extra or ill-typed fields
    TOO_LARGE = "too_large"  # frame over MAX_FRAME_BYTES or transcript over MAX_TRANSCRIPT_CHARS
    RATE_LIMITED = "rate_limited"  # over the per-connection frame rate, or the session inbox is full
    FORBIDDEN = "forbidden"  # the connection's role may not send this frame
    SESSION_ENDED = "session_ended"  # the negotiation is over and the frame would change it
    UNAVAILABLE = "unavailable"  # the durable store is down and its buffer is full; retry later
    INTERNAL = "internal"  # a fault of ours; the frame was not applied
    UNKNOWN_COMMAND = "unknown_command"  # a `command` whose `name` this server does not know
    NOTHING_TO_REPEAT = "nothing_to_repeat"  # `repeat` before the vendor has said anything
    NOTHING_TO_UNDO = "nothing_to_undo"  # `undo` with no answered turn left to take back (3 in a row at most)
    UNKNOWN_TURN = "unknown_turn"  # `playback` for a turn the vendor has not answered (or that was undone)
    HEARD_OUT_OF_RANGE = "heard_out_of_range"  # `playback` with `heard_chars` beyond the reply's text
    # Voice (docs/voice.md): each refuses the utterance and changes nothing.
    AUDIO_UNSUPPORTED = "audio_unsupported"  # not PCM16 mono 16 kHz, WAV, Ogg/Opus or WebM, or undecodable
    AUDIO_TOO_LARGE = "audio_too_large"  # a clip or audio frame over MAX_AUDIO_CLIP_BYTES
    AUDIO_TOO_LONG = "audio_too_long"  # an utterance over MAX_UTTERANCE_SECONDS
    AUDIO_NOT_STARTED = "audio_not_started"  # a `chunk` or `end` with no `start` of that id open
    SPEECH_UNAVAILABLE = "speech_unavailable"  # this server has no speech recogniser: send text


class CloseCode(IntEnum):
    GOING_AWAY = 1001  # server shutting down
    MESSAGE_TOO_BIG = 1009  # frame over the transport's hard limit (MAX_FRAME_BYTES * 16), sent by uvicorn
    TRY_AGAIN_LATER = 1013  # the session could not be rebuilt: its store is unreachable
    MOVED = 4307  # the session moved to another node (drain, handover, lost lease): reconnect and resume
    UNAUTHORIZED = 4401  # token missing, malformed, badly signed or expired
    WRONG_SESSION = 4403  # a valid token for another session
    UNKNOWN_SESSION = 4404  # no such session, live or recoverable
    IDLE = 4408  # connection sent nothing for CONNECTION_IDLE_SECONDS
    SUPERSEDED = 4409  # a newer player connection took over this session
    EVICTED = 4410  # the session was evicted after SESSION_IDLE_SECONDS
    RATE_ABUSE = 4429  # kept flooding after rate_limited errors
    SLOW_CONSUMER = 4430  # outbound queue overflowed: the client did not read fast enough
