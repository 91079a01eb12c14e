"""The `samvad` command: `samvad serve` runs the server, `samvad bots` runs the load bots."""

from __future__ import annotations

import argparse
import sys


def _serve(args: argparse.Namespace) -> int:
    from privates import protocol_class
    from schemas.scenario import ScenarioError
    from server import gcpolicy
    from server.app import create_app
    from server.config import ConfigError, load_settings
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
        http=settings.UVICORN_HTTP,
        ws_max_size=settings.MAX_FRAME_BYTES * 16,  # above this the transport closes with 1009
        ws_per_message_deflate=settings.WS_PER_MESSAGE_DEFLATE,
        ws_ping_interval=20.0,
        ws_ping_timeout=20.0,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="samvad", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the server (settings come from the environment and .env)")
    serve.add_argument("--host", default=None, help="address to bind (default HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port to bind (default PORT or 8000)")
    serve.set_defaults(func=_serve)
    bots = sub.add_parser("bots", help="play negotiations over the socket and report latency", add_help=False)
    bots.set_defaults(func=None)
    args, rest = parser.parse_known_args(argv)
    if args.command == "bots":
        from clients.bots.cli import main as bots_main

        return int(bots_main(rest))
    if rest:
        parser.error(f"unrecognised arguments: {' '.join(rest)}")
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
