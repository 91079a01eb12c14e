"""The clients of the Samvad server.

- `bots/`: scripted learners in Python (load bots, personas, an invariant checker); a package.
- `browser/`: the spectator pages (plain HTML, CSS and ES modules), package data the server
  serves at `/view/`; see browser/README.md.
- `unity/`: the C# client for Unity and its console harness, built with Mono; see unity/README.md.
"""
