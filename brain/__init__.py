"""Brains: whatever proposes Ramesh's next turn for the session to validate.

Two brains implement the session's `Brain` protocol: `RuleBasedVendor` (no model; the default
without an OpenAI key) and `brain.llm.OpenAIBrain` (a chat model; `server/wiring.py` imports it
only when it is chosen). Whatever either proposes, the rules engine (`session/rules.py`) validates.

The modules:

- `errors`: the package's exception tree; every model failure becomes one of these.
- `rules_vendor`: `RuleBasedVendor`, a deterministic, keyword-driven Ramesh.
- `intents`: what the learner meant, read from English and Hinglish cue words (rule-based vendor).
- `llm`: `OpenAIBrain`, one turn through a chat model: prepare, call, validate, re-ask, fall back.
- `transport`: `ChatTransport`, the model calls over the openai SDK: retries, Retry-After,
  per-attempt limits, streaming, and the one place SDK exceptions are translated.
- `decision`: the model's text to an `AIDecision`: the response format, validation, the re-ask.
- `turn`: `Turn`, one `propose` call's deadline, counters, ledger and streamed text.
- `sse`: `EventReader`, server-sent events out of the bytes of a streamed HTTP body.
- `partial_json`: `FieldExtractor`, `reply_text` pulled out of JSON that is still arriving.
- `prompt`: the system prompt and the delimited user message, versioned as `PROMPT_VERSION`.
- `delimiters`: the user message's blocks, and `neutralise`, which keeps untrusted text inside them.
- `window`: the conversation window by tokens: tiktoken offline, each history line counted once.
- `summary`: the LLM's running summary of a session, one plain-text call every 10 turns.
- `recall`: a learner the vendor remembers: the rule vendor's greeting, the LLM's LEARNER MEMORY block.
- `practice`: a learner's due review items: the rule vendor's invitations, the LLM's PRACTICE TARGETS block.
- `knowledge/`: playbooks, BM25 retrieval and grounded tip cards; fills the prompt's cultural notes.
- `policy`: the response policy (P0 safety, P1 grounded, P2 objections, P3 fallback) around any brain.
"""

from brain.rules_vendor import RuleBasedVendor

__all__ = ["RuleBasedVendor"]
