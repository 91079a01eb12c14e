"""Scripted learners that talk to the server over real sockets: personas for tests and load bots.

- `personas.py`: deterministic learners (polite, lowballer, walker, rude) that say the next line,
  and the `Move` a persona makes (a line, or a coaching frame).
- `coach_personas.py`: learners that also use the coaching side (hinter, undoer, mumbler, silent,
  barger, sleeper, quitter): hints, undo, repeat, stop, unclear speech, silences and barge-in.
- `runner.py`: the load bots, many personas playing whole negotiations at once.
- `play.py`: one bot's session move by move, and the runner's checks beyond the checker.
- `transport.py`: the bots' HTTP requests and WebSocket connections.
- `cli.py`: `samvad bots`, which runs them and reports throughput, latency, outcomes and what the
  coaching personas exercised.
- `checker.py` (with `coach_checks.py`): the invariant checker every server frame of a bot goes through.
- `resuming.py`: the bot that follows docs/protocol.md §5 to the letter; the crash test uses it.
- `steady.py`: keeps the generator out of its own measurements: its collector paused for a run,
  and how late its own event loop woke, reported beside the latencies.
- `echo.py`: a bare `websockets` echo server, the baseline the bots compare Samvad with.
- `learners.py`: simulated learners shaped by level, that learn and forget and speak;
  `evaluation.py`: `samvad eval`, which plays them against the server with and without
  re-elicitation and reports whether the coaching helps (docs/learning.md); `eval_figures.py`: the
  figures it sums and the table it prints.

How to run them: the top-level README, "Clients".
"""
