"""The openai SDK's HTTP client under its generic request method, for a request prepared once.

`client.post` (brain/transport.py's one way to call the model) builds every request from scratch:
two pydantic copies of its options, the options hook, every header merged again from the client's
defaults and auth, the URL, the body and the timeout, then the response's type looked at. For a
client whose requests all carry the same headers, the brain learns them from the SDK's first
request and sends the next ones, with their own bodies, through the SDK's own HTTP client (its
transport, auth flow and hooks), raising the SDK's own status error (issue #33).

What this reaches into, for `WRITTEN_FOR`'s openai: `AsyncOpenAI._client` (the HTTP client),
`_make_status_error_from_response` (the status error `client.post` raises), and the attributes
that say whether every request carries the same headers (`_api_key_provider`, `_provider_runtime`,
`workload_identity`, `custom_auth`, `_idempotency_header`). Gone: `fixed_headers` says False and
every request goes through `client.post`, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # only named: a server on the rule brain loads neither (benchmarks.report's base RSS)
    import httpx2
    import openai

__all__ = ["fixed_headers", "http_client", "status_error"]

_MISSING = object()


def fixed_headers(client: Any) -> bool:
    """Whether every request of this SDK client carries the same headers: an API key given as a
    string (no key provider to refresh it), no provider runtime or workload identity that signs
    each request, no custom auth flow, and no idempotency header (OpenAI's client sends none).
    False when any of these is not where the SDK kept it."""
    looked = [getattr(client, name, _MISSING) for name in (
        "_api_key_provider", "_provider_runtime", "workload_identity", "custom_auth", "_idempotency_header")]
    return (all(value is None for value in looked) and isinstance(getattr(client, "api_key", None), str)
            and callable(getattr(client, "_make_status_error_from_response", None))
            and getattr(client, "_client", None) is not None)


def http_client(client: openai.AsyncOpenAI) -> httpx2.AsyncClient:
    """The SDK client's HTTP client (aiohttp's transport under `DefaultAioHttpClient`)."""
    return client._client


def status_error(client: openai.AsyncOpenAI, response: httpx2.Response) -> openai.APIStatusError:
    """The SDK's exception for an error status (an `openai.APIStatusError`), from a response whose
    body has been read, as `client.post` raises it."""
    return client._make_status_error_from_response(response)
