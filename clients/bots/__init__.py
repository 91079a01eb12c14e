"""Scripted learners that talk to the server over real sockets: personas for tests and load bots.

- `personas.py`: deterministic learners (polite, lowballer, walker, rude) that say the next line.
- `runner.py`: the load bots, many personas playing whole negotiations at once.
- `cli.py`: `samvad bots`, which runs them and reports throughput, latency and outcomes.
- `checker.py`: the invariant checker every server frame of a bot goes through.
- `resuming.py`: the bot that follows docs/protocol.md §5 to the letter; the crash test uses it.
- `echo.py`: a bare `websockets` echo server, the baseline the bots compare Samvad with.

How to run them: the top-level README, "Clients".
"""
