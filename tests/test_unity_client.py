"""The Unity C# client (clients/unity) against the real server, compiled and run with Mono.

`clients/unity/build.sh` compiles the library and the console harness; the harness then plays a
polite negotiation to DEAL against a `samvad serve` process, aborting its socket twice on the way,
and prints a JSON summary. It also tours every scenario pack (at a learner level each) through the
coaching: a barge-in before a price, hints, undo, a silence, stop and the report's counts. Its `--scene`
mode runs the Unity MonoBehaviours themselves (clients/unity/Samvad.Unity, compiled against the test
stand-in for Unity in clients/unity/StandIn) frame by frame in a scene, and the test checks what the
scene showed against the server's own record. Without Mono (or espeak-ng, for the voice tests) the
tests are skipped, except in CI where they fail (tests/ci.py).
"""

from __future__ import annotations

import glob
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ci import need, need_tools

pytestmark = pytest.mark.unity

ROOT = Path(__file__).resolve().parents[1]
UNITY = ROOT / "clients" / "unity"
HARNESS = UNITY / "bin" / "Harness.exe"


def _newtonsoft_present() -> bool:
    if os.environ.get("NEWTONSOFT_JSON_DLL"):
        return Path(os.environ["NEWTONSOFT_JSON_DLL"]).is_file()
    return bool(glob.glob("/usr/lib/cli/Newtonsoft.Json*/Newtonsoft.Json.dll"))


def _require_mono() -> None:
    install = "apt-get install mono-devel libnewtonsoft-json-cil-dev (scripts/test.sh does)"
    need_tools("mcs", "mono", install=install)
    need(_newtonsoft_present(), "Newtonsoft.Json.dll not found", install)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def harness() -> Path:
    _require_mono()
    built = subprocess.run(["bash", str(UNITY / "build.sh")], capture_output=True, text=True,
                           timeout=120, check=False)
    assert built.returncode == 0, f"build.sh failed:\n{built.stdout}\n{built.stderr}"
    assert HARNESS.is_file()
    return HARNESS


def _serve(env: dict[str, str], log_path: Path) -> Iterator[str]:
    """A `samvad serve` process on a free port with `env`, until the generator is closed: its URL."""
    port = _free_port()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the server exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the server did not answer /health in 20 s:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


ADMIN_KEY = "unity-game-backend-key-" + "u" * 16  # held by the game's backend, never by the harness
LEARNER = "unity-harness"


def learner_token(url: str, learner: str = LEARNER) -> str:
    """What the game's backend does after its own login: a learner token for that learner, with the
    admin key, handed to the game (docs/security.md). The harness gets only this token."""
    request = urllib.request.Request(f"{url}/api/learners/{learner}/token", method="POST",
                                     headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return str(json.load(response)["learner_token"])


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = {
        **os.environ,
        "SAMVAD_SECRET": "unity-client-test-secret-" + "x" * 24,
        "ADMIN_KEY": ADMIN_KEY,
        "BRAIN": "rules",
        "MIRROR": "none",
        "LOG_LEVEL": "WARNING",
        "SAMVAD_ENV": "development",
    }
    yield from _serve(env, tmp_path_factory.mktemp("unity-server") / "server.log")


def test_harness_haggles_to_a_deal_through_forced_reconnects(harness: Path, server_url: str) -> None:
    run = subprocess.run(["mono", str(harness), "--url", server_url, "--timeout", "40",
                          "--learner-token", learner_token(server_url)],
                         capture_output=True, text=True, timeout=55, check=False)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no summary line (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    summary = json.loads(lines[-1])
    assert run.returncode == 0, f"harness failed: {summary.get('failures')}\n{run.stderr}"
    assert summary["ok"] is True and summary["failures"] == []

    assert summary["outcome"] == "deal"
    assert 0 <= summary["report_score"] <= 100  # the learner report reached the game
    # The vendor's voice resampled at its own speed: 200 callbacks, not a source sample early or late.
    for pair, due in {"22050_48000": 1 + 200 * 1024 * 22050 // 48000, "16000_44100": 1 + 200 * 512 * 16000 // 44100,
                      "24000_48000": 1 + 200 * 256 // 2}.items():
        assert summary[f"resampler_{pair}"] == {"consumed": due, "due": due, "wrong_frames": 0}
    assert summary["final_price"] is not None and summary["final_price"] < summary["first_quote"]
    assert summary["reconnects"] >= 1
    assert summary["refused_bad_token"] == 4401

    # No turn missed or doubled, and the stream applied as one contiguous run of seqs.
    assert summary["missed_turns"] == [] and summary["doubled_turns"] == []
    assert [int(entry.split(":")[0]) for entry in summary["dialogue"]] == list(range(1, summary["turns"] + 1))
    seq = summary["seq"]
    assert seq["contiguous"] is True
    assert seq["applied"] == seq["last"] - seq["welcome"]

    # The transcript whose ack and reply were lost went out twice and was applied once.
    assert summary["drop2"]["attempts"] == 2 and summary["drop2"]["duplicate"] is True
    assert summary["duplicates"] >= 1
    assert summary["drop1"]["attempts"] in (1, 2)

    # The spectator (token in the query string) saw the same stream.
    assert summary["spectator"]["last_seq"] == seq["last"]
    assert summary["spectator"]["replies"] == summary["turns"]
    assert summary["spectator"]["outcome"] == "deal"


TOURS = {
    "jaipur-bazaar": ["Namaste bhaiya!", "Ye tamatar kitne ka hai?", "Bahut mehenga, 50 rupees?"],
    "kyoto-antiques": ["Konnichiwa, sumimasen.", "Kono chawan wa ikura desu ka?", "17000 yen, onegaishimasu?"],
    "marrakech-souk": ["Salam alaikum, my friend!", "Bshhal hada fanous?", "Ghali bezzaf! 300 dirhams?"],
}
# Each pack is toured at another level (None: the server's default, intermediate).
LEVELS = {"jaipur-bazaar": "beginner", "kyoto-antiques": "advanced", "marrakech-souk": None}


def _tour(harness: Path, server_url: str, pack: str) -> dict:
    args = ["mono", str(harness), "--url", server_url, "--timeout", "30", "--scenario", pack,
            "--learner-token", learner_token(server_url, f"unity-tour-{pack}")]
    if LEVELS[pack] is not None:
        args += ["--level", LEVELS[pack]]
    for line in TOURS[pack]:
        args += ["--say", line]
    run = subprocess.run(args, capture_output=True, text=True, timeout=45, check=False)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no summary line (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    summary = json.loads(lines[-1])
    assert run.returncode == 0 and summary["ok"] is True, summary.get("failures")
    return summary


@pytest.fixture(scope="module", params=sorted(TOURS))
def tour(request: pytest.FixtureRequest, harness: Path, server_url: str) -> tuple[str, dict]:
    return request.param, _tour(harness, server_url, request.param)


def test_the_unity_client_plays_every_scenario_pack(tour: tuple[str, dict]) -> None:
    pack, summary = tour
    assert summary["scenario"] == pack and len(summary["replies"]) == len(TOURS[pack])
    assert summary["tips"] == len(TOURS[pack])
    currency = {"jaipur-bazaar": "rupees", "kyoto-antiques": "yen", "marrakech-souk": "dirhams"}[pack]
    assert any(currency in reply for reply in summary["replies"]), summary["replies"]
    assert summary["stopped"] == "stopped"  # Repeat() and Stop() went through the C# client
    assert summary["clarify"]  # a transcript at confidence 0.4 was asked again
    # The session was created at the pack's level, and the report says so.
    level = LEVELS[pack] or "intermediate"
    assert summary["level"] == level and summary["report"]["level"] == level
    # An advanced learner gets no unprompted suggestions; the others get them with their English.
    if level == "advanced":
        assert summary["suggested"] == 0 and summary["suggested_english"] == 0
    else:
        assert summary["suggested"] > 0 and summary["suggested_english"] > 0


def test_a_barge_in_before_the_price_unbinds_it(tour: tuple[str, dict]) -> None:
    _, summary = tour
    barge = summary["barge_in"]
    said = summary["replies"][barge["turn"] - 1]
    assert barge["interrupted"] is True and barge["quote_unbound"] is True
    assert barge["heard_text"] == said[: barge["heard_chars"]]  # the server counted what the client cut
    assert str(barge["price"]) not in barge["heard_text"] and str(barge["price"]) in said
    # The quote from before that reply stands again (none: it was the first), in the client's state too.
    assert barge["vendor_quote"] == barge["quote_before"] and barge["client_quote"] == barge["vendor_quote"]
    whole = summary["heard_to_end"]
    assert whole["interrupted"] is False and whole["quote_unbound"] is False
    assert whole["heard_chars"] == len(summary["replies"][whole["turn"] - 1])
    assert summary["playback_refusals"] == ["unknown_turn", "heard_out_of_range"]


def test_three_hints_climb_from_context_to_the_whole_line(tour: tuple[str, dict]) -> None:
    _, summary = tour
    hints = summary["hints"]
    assert [(h["level"], h["kind"]) for h in hints] == [(0, "contextual"), (1, "structural"), (2, "reveal")]
    assert "____" in hints[1]["text"] and "____" not in hints[2]["text"]
    assert hints[1]["english"] and hints[2]["english"]
    assert len({h["situation"] for h in hints}) == 1  # all three are about the same next line


def test_undo_restores_the_state_before_the_turn(tour: tuple[str, dict]) -> None:
    pack, summary = tour
    undo = summary["undo"]
    turns = len(TOURS[pack])
    assert undo["turn"] == turns and undo["state_turn"] == turns - 1
    assert undo["matches_before"] is True and undo["client_state_replaced"] is True
    assert summary["undo_before_turns"] == "nothing_to_undo"


def test_a_silence_is_nudged_and_the_report_counts_the_help(tour: tuple[str, dict]) -> None:
    pack, summary = tour
    nudge = summary["nudge"]
    assert nudge["mark"] == "nudge" and nudge["events"] == 1 and nudge["text"]
    assert nudge["turn"] == len(TOURS[pack]) - 1  # after the undo, and a nudge is not a turn
    report = summary["report"]
    assert report["outcome"] == "stopped"
    offered = 1 if LEVELS[pack] == "beginner" else 0  # a beginner is offered a hint after a silence
    assert report["coaching"] == {"hints": [1, 1, 1], "hints_offered": offered, "repeats": 1, "undos": 1,
                                  "timeouts": 1, "unclear": 1}
    assert report["offered_hints_seen"] == offered
    assert all(clamp["flag"] and clamp["explanation"] for clamp in report["clamps"])
    if LEVELS[pack] == "beginner":  # the rule vendor's two-sentence greeting is cut to a beginner's one
        assert {"turn": 1, "flag": "too_long"} in [{k: c[k] for k in ("turn", "flag")} for c in report["clamps"]]
    assert summary["errors"] == ["nothing_to_undo", "unknown_turn", "heard_out_of_range"]


# ------------------------------------------------------------------------------ voice (issue #17)


@pytest.fixture(scope="module")
def voice_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The embedded voice (pocketsphinx and espeak-ng) with every transcript taken as clear, so that
    the utterance is a turn whatever the offline recogniser makes of synthetic speech."""
    need_tools("espeak-ng", install="apt-get install espeak-ng (scripts/test.sh does)")
    env = {**os.environ, "SAMVAD_SECRET": "unity-client-test-secret-" + "x" * 24, "BRAIN": "rules",
           "MIRROR": "none", "LOG_LEVEL": "WARNING", "SAMVAD_ENV": "development", "STT": "pocketsphinx",
           "TTS": "espeak", "CONFIDENCE_CLARIFY_THRESHOLD": "0", "SILENCE_TIMEOUT_MS": "0"}
    yield from _serve(env, tmp_path_factory.mktemp("unity-voice-server") / "server.log")


def _utterance(tmp_path: Path) -> Path:
    """A learner's line spoken by espeak-ng, as PCM16 mono 16 kHz in a WAV file."""
    from voice.audio import decode_clip, wav_bytes

    spoken = subprocess.run(["espeak-ng", "-v", "en-us", "--stdout", "--stdin"],
                            input=b"Namaste bhaiya, how much are the tomatoes today?",
                            capture_output=True, check=True).stdout
    utterance = tmp_path / "utterance.wav"
    utterance.write_bytes(wav_bytes(decode_clip(spoken), 16_000))
    return utterance


def test_the_unity_client_speaks_listens_and_barges_in(harness: Path, voice_server_url: str,
                                                       tmp_path: Path) -> None:
    """MicrophoneStream streams an utterance, VendorVoice plays Ramesh's answer, a barge-in stops
    it (no audio of that reply after the `heard`), and a clip's answer is heard to its end."""
    utterance = _utterance(tmp_path)
    run = subprocess.run(["mono", str(harness), "--url", voice_server_url, "--voice", str(utterance),
                          "--timeout", "40"], capture_output=True, text=True, timeout=60, check=False)
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert summary["ok"], summary["failures"]
    assert summary["stt"] == "pocketsphinx" and summary["speech_text"] and summary["speech_levels"] > 20
    assert summary["tts"] == "espeak-ng" and summary["sample_rate"] == 22_050
    assert 0 < summary["barge_in_heard_chars"] and summary["audio_after_barge_in"] == 0
    # Issue #38: under Mono, every chunk of sound came with its own visemes, and the mouth moved as it played.
    assert summary["visemes_source"] == "espeak" and summary["chunks_with_visemes"] >= 2
    assert summary["chunks_without_visemes"] == 0 and summary["viseme_violations"] == 0
    assert summary["visemes_seen"] >= 4
    assert summary["clip_reply_turn"] == summary["reply_turn"] + 1
    # The voice stages parse under Mono: push-to-talk has STT and no server wait, and the reply's
    # first sound says when it left after the utterance ended (docs/voice.md, "Per-stage timings").
    assert summary["reply_stt_ms"] == summary["speech_stt_ms"] >= 0 and summary["reply_end_of_turn_ms"] is None
    assert summary["first_audio_in_reply_to"] and summary["tts_first_byte_ms"] >= 0
    assert summary["first_audio_ms"] >= summary["speech_stt_ms"]


def test_the_unity_client_streams_an_open_microphone_and_the_server_finds_the_turn(
        harness: Path, voice_server_url: str, tmp_path: Path) -> None:
    """Issue #34: OpenMicrophone streams a line with a pause inside it and silence after it, never
    saying when the learner stopped; partials come at the pause, then the turn's speech and reply."""
    from tests.turn_set import piece
    from voice.audio import wav_bytes

    def silence(ms: int) -> bytes:
        return b"\0" * (ms * 32)  # PCM16 mono 16 kHz: 32 bytes a millisecond

    stream = (silence(400) + piece("How much are the tomatoes?", "en-us", 150) + silence(500)
              + piece("I will give you forty rupees.", "en-us", 150) + silence(2000))
    line = tmp_path / "open-mic.wav"
    line.write_bytes(wav_bytes(stream, 16_000))
    run = subprocess.run(["mono", str(harness), "--url", voice_server_url, "--open-mic", str(line),
                          "--timeout", "40"], capture_output=True, text=True, timeout=60, check=False)
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert summary["ok"], summary["failures"]
    mic = summary["open_mic_id"]
    assert summary["turn_id"] == summary["reply_in_reply_to"] == f"{mic}.1"
    assert summary["partials"] >= 1 and summary["stt"] == "pocketsphinx" and summary["speech_text"]
    assert summary["reply_text"] and summary["reply_turn"] >= 1
    assert summary["end_of_turn_ms"] == summary["reply_end_of_turn_ms"] >= 300  # the server's wait, parsed
    # All of it went up the socket in 100 ms chunks: the line's length, less a last part-chunk.
    assert summary["open_mic_seconds"] == pytest.approx(len(stream) / 32_000)
    assert summary["open_mic_chunks"] == len(stream) // 3200


# ------------------------------------------------------- the MonoBehaviours in a scene (Unity stand-in)

SCENE_LINE = "Namaste bhaiya, ye tamatar kitne ka hai?"


def _scene(harness: Path, url: str, *extra: str) -> dict:
    run = subprocess.run(["mono", str(harness), "--url", url, "--scene", "--timeout", "45",
                          "--learner-token", learner_token(url), *extra],
                         capture_output=True, text=True, timeout=60, check=False)
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no summary line (exit {run.returncode}):\n{run.stdout}\n{run.stderr}"
    summary = json.loads(lines[-1])
    assert run.returncode == 0 and summary["ok"] is True, summary.get("failures")
    # Every UnityEvent was raised on the main thread, no Unity API was touched off it, nothing was
    # logged as an error, and OnDestroy closed the socket.
    assert summary["events_off_main_thread"] == 0
    assert summary["main_thread_violations"] == [] and summary["unity_errors"] == []
    return summary


def _server_state(url: str, summary: dict) -> dict:
    """The session as the server has it (GET /api/sessions/{id} with the component's token)."""
    request = urllib.request.Request(f"{url}/api/sessions/{summary['session_id']}",
                                     headers={"Authorization": f"Bearer {summary['player_token']}"})
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.load(response)


def test_the_session_component_grabs_speaks_and_shows_the_servers_reply(harness: Path, server_url: str) -> None:
    """SamvadSession in a scene: an XRI grab of a tomato, a typed turn, and Ramesh's reply, mood and stage
    on the uGUI and TextMeshPro labels, the slider, the Animator and the UnityEvents, as the server has them."""
    summary = _scene(harness, server_url, "--say", SCENE_LINE)
    state = _server_state(server_url, summary)
    assert state["learner_id"] == LEARNER  # the session is the learner's the credential names
    said = [line["text"] for line in state["transcript"] if line["role"] == "learner"]
    replies = [line["text"] for line in state["transcript"] if line["role"] == "vendor"]
    assert said == [SCENE_LINE] and len(replies) == 1  # OnTranscript made exactly one turn

    # The reply the server recorded is the one onVendorLine carried and both subtitles show.
    assert summary["vendor_lines"] == replies
    assert summary["subtitle"] == summary["subtitle_tmp"] == replies[0]
    assert summary["hint"] and summary["hint_tmp"] == summary["hint"]  # a beginner's suggested line
    # The stage and happiness on screen are the server's, after the welcome's.
    assert summary["welcome_stage"] == "GREETING" and summary["stages"][0] == "GREETING"
    assert summary["stage_label"] == summary["stage_label_tmp"] == summary["stages"][-1] == state["stage"]
    assert summary["slider"] == summary["happiness_events"][-1] == state["happiness_score"]
    assert summary["happiness_events"][0] == summary["welcome_happiness"]
    # Ramesh's mouth: talking after the reply, still after StopTalking; one trigger per reply.
    assert summary["talking_after_reply"] is True and summary["talking_after_stop"] is False
    assert summary["reply_triggers"] == 1

    # The grabbed mesh's parent SamvadItem named it; letting go emptied the hands; the apple has no
    # SamvadItem, so its GameObject's name without "(Clone)" went.
    assert summary["item_held"] == "Tomato" and summary["item_after_release"] is None
    assert summary["item_apple"] == "Apple" == state["object_grabbed"]

    assert summary["destroyed_equals_null"] is True and summary["closed_because"] == "SamvadClosedException"
    assert summary["problems"] == []
    # Without Unity's SynchronizationContext the fallback queue brings the reply to the main thread.
    fallback = summary["fallback"]
    assert fallback["vendor_line"] and fallback["subtitle"] == fallback["vendor_line"]
    assert fallback["events_off_main_thread"] == 0 and fallback["problems"] == 0


def test_the_voice_component_hears_the_microphone_plays_ramesh_and_barges_in(
        harness: Path, voice_server_url: str, tmp_path: Path) -> None:
    """SamvadVoice in a scene: push-to-talk records the microphone into a turn, Ramesh's answer comes out
    of the AudioSource through OnAudioFilterRead, talking over him silences him at once, and his next
    answer is played to its end."""
    summary = _scene(harness, voice_server_url, "--voice", str(_utterance(tmp_path)))
    state = _server_state(voice_server_url, summary)
    replies = [line["text"] for line in state["transcript"] if line["role"] == "vendor"]
    assert replies == summary["vendor_lines"] == [summary["voice_reply"], summary["second_reply"]]
    assert summary["second_reply_turn"] == summary["voice_reply_turn"] + 1  # each utterance was a turn

    assert summary["voice_peak"] > 0.05  # audible, not a buffer of zeros
    assert summary["mouth_shapes"] >= 3  # the face's blendshapes followed his voice (issue #38)
    barge = summary["barge_in"]
    assert barge["interrupted"] is True and barge["turn"] == summary["voice_reply_turn"]
    assert 0 < barge["heard_chars"] < len(summary["voice_reply"])
    assert barge["heard_text"] == summary["voice_reply"][: barge["heard_chars"]]
    # Silent from the barge-in on while the learner spoke, but for the one buffer being played then.
    assert summary["loud_frames_while_learner_spoke"] <= 1024
    whole = summary["heard_to_end"]
    assert whole["turn"] == summary["second_reply_turn"] and whole["heard_chars"] == len(summary["second_reply"])
    assert whole["seconds_played"] > 0.2
