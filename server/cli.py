"""The `samvad` command: `samvad serve` runs the server, `samvad drain` drains the node on this machine (a
Kubernetes preStop hook, deploy/helm/samvad), `samvad bots` runs the load bots, `samvad pack` scaffolds,
validates, exports and imports scenario packs (server/pack_cli.py)."""

from __future__ import annotations

import argparse
import sys


def _serve(args: argparse.Namespace) -> int:
    from privates import http_protocol_class, protocol_class
    from schemas.scenario import ScenarioError
    from server import gcpolicy
    from server.app import create_app
    from server.config import GRACEFUL_SHUTDOWN_S, ConfigError, load_settings
    from server.logs import configure_logging
    from server.serving import serve

    overrides: dict[str, object] = {}
    if args.host is not None:
        overrides["HOST"] = args.host
    if args.port is not None:
        overrides["PORT"] = args.port
    try:
        settings = load_settings(**overrides)
    except ConfigError as exc:
        print(f"samvad: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.LOG_LEVEL)
    try:
        app = create_app(settings)
    except (ConfigError, ScenarioError) as exc:  # a bad setting, or a scenario pack that does not validate
        print(f"samvad: {exc}", file=sys.stderr)
        return 2
    if settings.GC_FULL_EVERY_SECONDS > 0:
        gcpolicy.install()  # short collector pauses; see server/gcpolicy.py
    serve(
        app,
        host=settings.HOST,
        port=settings.PORT,
        log_config=None,
        access_log=False,
        proxy_headers=False,  # the client's address is server/clientaddr.py's to decide (TRUSTED_PROXIES)
        ws=protocol_class(settings.UVICORN_WS),
        loop=settings.UVICORN_LOOP,
        http=http_protocol_class(settings.UVICORN_HTTP),
        ws_max_size=settings.MAX_FRAME_BYTES * 16,  # above this the transport closes with 1009
        ws_per_message_deflate=settings.WS_PER_MESSAGE_DEFLATE,
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        lifespan="on",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    return 0


def _drain(args: argparse.Namespace) -> int:
    """POST /admin/drain to the node this machine runs, with ADMIN_KEY from its settings, and wait for
    the answer: it comes once every session is handed over, so the hook ends when the drain has."""
    import json
    import urllib.error
    import urllib.request

    from server.config import ConfigError, load_settings

    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"samvad: {exc}", file=sys.stderr)
        return 2
    host = settings.HOST if settings.HOST not in ("", "0.0.0.0", "::") else "127.0.0.1"
    url = args.url or f"http://{host}:{settings.PORT}"
    timeout = settings.drain_bound_seconds
    request = urllib.request.Request(f"{url.rstrip('/')}/admin/drain", method="POST", data=b"",
                                     headers={"authorization": f"Bearer {settings.ADMIN_KEY}"}
                                     if settings.ADMIN_KEY else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            print(json.dumps(json.loads(answer.read())))
            return 0
    except urllib.error.HTTPError as exc:
        print(f"samvad: drain refused: {exc.code} {exc.read().decode(errors='replace')[:300]}", file=sys.stderr)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        print(f"samvad: drain failed: {exc}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="samvad", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the server (settings come from the environment and .env)")
    serve.add_argument("--host", default=None, help="address to bind (default HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port to bind (default PORT or 8000)")
    serve.set_defaults(func=_serve)
    drain = sub.add_parser("drain", help="drain the node on this machine (POST /admin/drain) and wait for it")
    drain.add_argument("--url", default=None, help="the node (default http://HOST:PORT from the settings)")
    drain.set_defaults(func=_drain)
    from server.pack_cli import add_pack_commands

    add_pack_commands(sub)
    bots = sub.add_parser("bots", help="play negotiations over the socket and report latency", add_help=False)
    bots.set_defaults(func=None)
    sub.add_parser("eval", help="simulated learners play every pack: does the coaching help? (docs/learning.md)",
                   add_help=False).set_defaults(func=None)
    args, rest = parser.parse_known_args(argv)
    if args.command == "bots":
        from clients.bots.cli import main as bots_main

        return int(bots_main(rest))
    if args.command == "eval":
        from clients.bots.evaluation import main as eval_main

        return int(eval_main(rest))
    if rest:
        parser.error(f"unrecognised arguments: {' '.join(rest)}")
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
