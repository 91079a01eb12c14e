"""`samvad pack` through its installed entry point (issue #35, docs/studio.md): scaffold, validate
naming every invalid field, and move a pack between two running servers over the admin API."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
from websockets.sync.client import connect

from tests.servers import server_process

SAMVAD = Path(sys.executable).with_name("samvad")
ADMIN = "pack-cli-admin-key-" + "p" * 24


def samvad(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SAMVAD), "pack", *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_new_scaffolds_a_pack_that_validates(tmp_path: Path) -> None:
    made = samvad("new", "night-market", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    manifest = json.loads((tmp_path / "night-market" / "manifest.json").read_text())
    assert manifest["scenario"] == "night-market" and "version" not in manifest
    assert (tmp_path / "night-market" / "knowledge").is_dir()
    checked = samvad("validate", "night-market", cwd=tmp_path)
    assert checked.returncode == 0 and checked.stdout.startswith("night-market: valid"), checked.stderr
    again = samvad("new", "night-market", cwd=tmp_path)
    assert again.returncode == 1 and "exists already" in again.stderr
    bad_id = samvad("new", "Night Market!", cwd=tmp_path)
    assert bad_id.returncode == 2 and not (tmp_path / "Night Market!").exists()


def test_validate_names_every_invalid_field(tmp_path: Path) -> None:
    assert samvad("new", "souk-two", "--from", "marrakech-souk", cwd=tmp_path).returncode == 0
    path = tmp_path / "souk-two" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["items"][1]["floor"] = 100_000
    manifest["vendor"]["age"] = 3
    manifest["rules"]["offer_bands"]["insult_below"] = 1.5
    path.write_text(json.dumps(manifest))
    checked = samvad("validate", str(tmp_path / "souk-two"), cwd=tmp_path)
    assert checked.returncode == 1
    named = {line.split(": ")[1] for line in checked.stderr.splitlines()}
    assert named == {"items[1].floor", "items[1].fair", "vendor.age", "rules.offer_bands.insult_below"}, checked.stderr
    path.write_text("{")
    broken = samvad("validate", str(tmp_path / "souk-two"), cwd=tmp_path)
    assert broken.returncode == 1 and "(top level)" in broken.stderr
    assert samvad("new", "souk-three", "--from", "marrakech-souk", cwd=tmp_path).returncode == 0
    renamed = tmp_path / "elsewhere"
    (tmp_path / "souk-three").rename(renamed)
    moved = samvad("validate", str(renamed), cwd=tmp_path)
    assert moved.returncode == 1 and "scenario: 'souk-three' is not the folder's name 'elsewhere'" in moved.stderr


def test_export_and_import_move_a_pack_between_servers(tmp_path: Path) -> None:
    env = {"ADMIN_KEY": ADMIN}
    with server_process(env) as source, server_process(env) as target:
        assert samvad("new", "tea-stall", cwd=tmp_path).returncode == 0
        path = tmp_path / "tea-stall" / "manifest.json"
        manifest = json.loads(path.read_text())
        next(i for i in manifest["items"] if i["name"] == "Tomato")["tourist_quote"][1] = 180
        path.write_text(json.dumps(manifest))
        # Without the key the server refuses, and nothing is stored.
        refused = samvad("import", "tea-stall", "--url", source.base_url, "--publish", cwd=tmp_path, ADMIN_KEY="")
        assert refused.returncode == 1 and "401" in refused.stderr
        pushed = samvad("import", "tea-stall", "--url", source.base_url, "--publish", cwd=tmp_path, **env)
        assert pushed.returncode == 0 and "published as version 1" in pushed.stdout, pushed.stderr
        out = tmp_path / "exported"
        pulled = samvad("export", "tea-stall", "--url", source.base_url, "--out", str(out), cwd=tmp_path, **env)
        assert pulled.returncode == 0, pulled.stderr
        assert json.loads((out / "tea-stall" / "manifest.json").read_text()) == manifest
        moved = samvad("import", str(out / "tea-stall"), "--url", target.base_url, "--publish", cwd=tmp_path,
                       **env)
        assert moved.returncode == 0 and "version 1" in moved.stdout, moved.stderr
        # Importing again stores a draft over the existing scenario and publishes version 2.
        again = samvad("import", str(out / "tea-stall"), "--url", target.base_url, "--publish", cwd=tmp_path,
                       **env)
        assert again.returncode == 0 and "version 2" in again.stdout, again.stderr
        created = httpx.post(f"{target.base_url}/api/sessions", json={"scenario": "tea-stall"}, timeout=10)
        assert created.status_code == 201
        # The target process never met version 1: a turn of a version-2 session is answered whole.
        session = created.json()
        with connect(f"{target.base_url.replace('http', 'ws')}/ws/sessions/{session['session_id']}"
                     f"?token={session['player_token']}", open_timeout=10) as ws:
            assert json.loads(ws.recv(timeout=10))["type"] == "welcome"
            ws.send(json.dumps({"type": "transcript", "id": "t1", "text": "Namaste bhaiya, how much are tomatoes?"}))
            while (frame := json.loads(ws.recv(timeout=10)))["type"] != "reply":
                assert frame["type"] != "error", frame
        quoted = httpx.get(f"{target.base_url}/api/sessions/{session['session_id']}", timeout=10,
                           headers={"authorization": f"Bearer {session['player_token']}"}).json()
        assert quoted["vendor_quote"] == 180
        versions = httpx.get(f"{target.base_url}/api/scenarios/tea-stall/versions",
                             headers={"authorization": f"Bearer {ADMIN}"}, timeout=10).json()
        assert [v["version"] for v in versions["versions"]] == [1, 2]
        # A shipped pack exports as its version 1.
        shipped = samvad("export", "kyoto-antiques", "--url", target.base_url, "--out", str(out), cwd=tmp_path, **env)
        assert shipped.returncode == 0 and "version 1" in shipped.stdout
        assert samvad("validate", str(out / "kyoto-antiques"), cwd=tmp_path).returncode == 0
