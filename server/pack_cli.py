"""`samvad pack`: the authors' command line for scenario packs (docs/studio.md).

- `samvad pack new ID [--dir D] [--from PACK]` scaffolds `D/ID/` (a manifest copied from a shipped
  pack with the id changed, and a `knowledge/` folder): it validates as it is, ready to edit.
- `samvad pack validate DIR` checks `DIR/manifest.json` with the code that checks the shipped packs
  and the studio's versions, listing every problem with its field.
- `samvad pack export ID [--version N] [--out D]` writes a server's pack to `D/ID/manifest.json`.
- `samvad pack import DIR [--publish]` validates the folder, stores it on a server as the scenario's
  draft (creating the scenario if it is new) and, with `--publish`, publishes it.

Export and import go over the admin HTTP API (`--url`, default `$SAMVAD_URL` or
http://127.0.0.1:8000) with the admin key as a bearer (`--admin-key`, default `$ADMIN_KEY`): the
server validates again, numbers the version and keeps every node in step, which a direct write to
its store could not. Exit status: 0 done, 1 refused or invalid (the reason on stderr), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from schemas.scenario import MANIFEST, available_scenarios, load_scenario, pack_problems

__all__ = ["add_pack_commands"]

_ID = re.compile(r"^[a-z0-9][a-z0-9-]{1,62}$")
DEFAULT_URL = "http://127.0.0.1:8000"
TIMEOUT_S = 30.0


def _fail(message: str, status: int = 1) -> int:
    print(f"samvad pack: {message}", file=sys.stderr)
    return status


def _new(args: argparse.Namespace) -> int:
    scenario: str = args.id
    if not _ID.match(scenario):
        return _fail(f"{scenario!r} is not a scenario id (lower-case letters, digits and dashes, 2-63)", 2)
    if args.template not in available_scenarios():
        return _fail(f"no shipped pack {args.template!r} to start from ({', '.join(available_scenarios())})", 2)
    folder = Path(args.dir) / scenario
    if folder.exists():
        return _fail(f"{folder} exists already")
    data = load_scenario(args.template).model_dump(mode="json", exclude={"version"})
    data.update(scenario=scenario, title=f"{data['title']} (copy: edit me)")
    (folder / "knowledge").mkdir(parents=True)
    (folder / MANIFEST).write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", "utf-8")
    (folder / "knowledge" / "README.md").write_text(
        f"# {scenario}\n\nNotes on the culture for this pack go here (Markdown, text, .docx or .pdf);\n"
        "upload them as a playbook: POST /api/scenarios/{id}/knowledge (docs/knowledge.md).\n", "utf-8")
    print(f"{folder}: a copy of {args.template}; edit {folder / MANIFEST}, then `samvad pack validate {folder}`")
    return 0


def _read(folder: Path) -> tuple[str, dict[str, Any]] | str:
    """The folder's scenario id and manifest data when it validates, else every problem, one a line."""
    path = folder / MANIFEST
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return f"{path}: no such file"
    except (OSError, ValueError) as exc:
        return f"{path}: (top level): cannot read it as JSON: {exc}"
    pack, problems = pack_problems(data)
    if pack is None:
        return "\n".join(f"{path}: {problem}" for problem in problems)
    if pack.scenario != folder.resolve().name:
        return f"{path}: scenario: {pack.scenario!r} is not the folder's name {folder.resolve().name!r}"
    assert isinstance(data, dict)
    data.pop("version", None)
    return pack.scenario, data


def _validate(args: argparse.Namespace) -> int:
    found = _read(Path(args.dir))
    if isinstance(found, str):
        print(found, file=sys.stderr)
        return 1
    scenario, data = found
    print(f"{scenario}: valid ({len(data['items'])} items, languages {', '.join(data['vendor']['languages'])})")
    return 0


def _call(args: argparse.Namespace, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One admin API request: its status and JSON answer (an error's body too)."""
    key = args.admin_key or os.environ.get("ADMIN_KEY", "")
    headers = {"content-type": "application/json", **({"authorization": f"Bearer {key}"} if key else {})}
    data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
    request = urllib.request.Request(f"{args.url.rstrip('/')}{path}", method=method, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
            return int(answer.status), json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return int(exc.code), json.loads(raw)
        except ValueError:
            return int(exc.code), {"error": {"code": "http", "message": raw.decode(errors="replace")[:300]}}


def _refusal(status: int, answer: Any) -> str:
    error = answer.get("error", {}) if isinstance(answer, dict) else {}
    lines = [f"refused: {status} {error.get('code', '')}: {error.get('message', '')}"]
    lines += [f"  {p['field']}: {p['message']}" for p in error.get("problems", ())]
    return "\n".join(lines)


def _export(args: argparse.Namespace) -> int:
    path = f"/api/scenarios/{args.id}" + (f"?version={args.version}" if args.version else "")
    try:
        status, answer = _call(args, "GET", path)
    except (urllib.error.URLError, OSError) as exc:
        return _fail(f"cannot reach {args.url}: {exc}")
    if status != 200:
        return _fail(_refusal(status, answer))
    if answer.get("manifest") is None:
        return _fail(f"{args.id} has no published version yet")
    folder = Path(args.out) / args.id
    (folder / "knowledge").mkdir(parents=True, exist_ok=True)
    (folder / MANIFEST).write_text(json.dumps(answer["manifest"], ensure_ascii=False, indent=2) + "\n", "utf-8")
    print(f"{folder}: version {answer['version']} of {args.id}")
    return 0


def _import(args: argparse.Namespace) -> int:
    found = _read(Path(args.dir))
    if isinstance(found, str):
        print(found, file=sys.stderr)
        return 1
    scenario, data = found
    try:
        status, answer = _call(args, "PUT", f"/api/scenarios/{scenario}", data)
        if status == 404:  # a scenario the server does not have yet
            status, answer = _call(args, "POST", "/api/scenarios", data)
        if status not in (200, 201):
            return _fail(_refusal(status, answer))
        if not args.publish:
            print(f"{scenario}: stored as the draft on {args.url}")
            return 0
        status, answer = _call(args, "POST", f"/api/scenarios/{scenario}/publish")
    except (urllib.error.URLError, OSError) as exc:
        return _fail(f"cannot reach {args.url}: {exc}")
    if status != 201:
        return _fail(_refusal(status, answer))
    print(f"{scenario}: published as version {answer['version']} on {args.url}")
    return 0


def add_pack_commands(sub: Any) -> None:
    """`samvad pack ...` on the main parser's subcommands."""
    pack = sub.add_parser("pack", help="scaffold, validate, export and import scenario packs (docs/studio.md)")
    commands = pack.add_subparsers(dest="pack_command", required=True)
    new = commands.add_parser("new", help="scaffold a pack folder ID/ from a shipped pack")
    new.add_argument("id")
    new.add_argument("--dir", default=".", help="where to make the folder (default: here)")
    new.add_argument("--from", dest="template", default="jaipur-bazaar", help="the shipped pack to copy")
    new.set_defaults(func=_new)
    validate = commands.add_parser("validate", help="check a pack folder's manifest")
    validate.add_argument("dir")
    validate.set_defaults(func=_validate)
    remote = argparse.ArgumentParser(add_help=False)
    remote.add_argument("--url", default=os.environ.get("SAMVAD_URL", DEFAULT_URL),
                        help="the server (default $SAMVAD_URL or http://127.0.0.1:8000)")
    remote.add_argument("--admin-key", default=None, help="the server's admin key (default $ADMIN_KEY)")
    export = commands.add_parser("export", parents=[remote], help="write a server's pack to OUT/ID/")
    export.add_argument("id")
    export.add_argument("--version", type=int, default=None, help="that version (default: the current one)")
    export.add_argument("--out", default=".", help="where to write the folder (default: here)")
    export.set_defaults(func=_export)
    into = commands.add_parser("import", parents=[remote], help="store a pack folder on a server as its draft")
    into.add_argument("dir")
    into.add_argument("--publish", action="store_true", help="and publish it as the next version")
    into.set_defaults(func=_import)
