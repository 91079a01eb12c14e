"""The brain package's exceptions.

Every failure of a model call is translated into one of these at a single boundary
(`brain.transport._translate`, always with `raise ... from exc`), so nothing above the brain
ever sees an SDK exception type:

    BrainError                      base of everything a brain raises
    +-- BrainServiceError           not worth retrying: 400, 401, 403, 404, 409, 422 and every
    |                               other 4xx except 429. `OpenAIBrain.propose` raises it; the
    |                               session actor catches it and answers with its own in-character
    |                               line, keeping the stage and the happiness.
    +-- BrainTransientError         worth retrying: 5xx, 429, timeouts, refused or dropped
    |                               connections (also a stream cut mid-way), a response that is
    |                               not JSON at all. Handled inside the brain: retried up to
    |                               twice, then the brain falls back.
    +-- BrainOutputError            the model answered, but not with a usable decision (bad JSON,
                                    a schema violation, no content). Handled inside the brain:
                                    one corrective re-ask, then the brain falls back.

Only `BrainServiceError` ever leaves `propose`; the other two are internal control flow and show
up in `BrainResult.error` when the brain gives up.
"""

from __future__ import annotations


class BrainError(Exception):
    """Base class of every error raised by a brain."""


class BrainServiceError(BrainError):
    """The model service refused the request in a way a retry cannot fix."""

    def __init__(
        self, message: str, *, status: int | None = None, request_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.request_id = request_id


class BrainTransientError(BrainError):
    """A failure that may pass: the caller may retry, after `retry_after` seconds if given."""

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class BrainOutputError(BrainError):
    """The model's text is not a valid decision; `feedback` says why, in words for the model."""

    def __init__(self, feedback: str) -> None:
        super().__init__(feedback)
        self.feedback = feedback
