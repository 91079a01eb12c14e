"""Settings are validated once, and a bad value is named."""

from __future__ import annotations

import logging

import pytest

from server.config import BrainChoice, ConfigError, MirrorChoice, load_settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    for name in ("OPENAI_API_KEY", "BRAIN", "MIRROR", "NEO4J_URI", "SAMVAD_SECRET", "SAMVAD_ENV", "USE_MOCKS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # type: ignore[arg-type]


def test_defaults_need_no_key_and_no_database() -> None:
    settings = load_settings()
    assert settings.brain_kind is BrainChoice.RULES and settings.mirror_kind is MirrorChoice.NONE
    assert (settings.MAX_TURNS, settings.MAX_MOOD_DELTA, settings.MAX_FRAME_BYTES) == (30, 15, 65536)


@pytest.mark.parametrize(("name", "value"), [
    ("MAX_TURNS", "lots"), ("MAX_MOOD_DELTA", "0"), ("LOG_LEVEL", "LOUD"), ("PORT", "70000"),
    ("AI_TEMPERATURE", "3"), ("BRAIN", "magic"), ("SAMVAD_SECRET", "short"),
])
def test_a_bad_value_is_named(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=name):
        load_settings()


def test_openai_without_a_key_fails_at_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BRAIN", "openai")
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        load_settings()


def test_auto_choices_follow_the_key_and_the_uri(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("NEO4J_URI", "bolt://127.0.0.1:7999")
    settings = load_settings()
    assert settings.brain_kind is BrainChoice.OPENAI and settings.mirror_kind is MirrorChoice.NEO4J
    monkeypatch.setenv("USE_MOCKS", "true")
    settings = load_settings()
    assert settings.brain_kind is BrainChoice.RULES and settings.mirror_kind is MirrorChoice.NONE


def test_production_requires_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAMVAD_ENV", "production")
    monkeypatch.setenv("ADMIN_KEY", "a" * 32)
    with pytest.raises(ConfigError, match="SAMVAD_SECRET"):
        load_settings()


def test_production_requires_an_admin_key_of_32_characters_and_closes_what_development_opens(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAMVAD_ENV", "production")
    monkeypatch.setenv("SAMVAD_SECRET", "s" * 40)
    with pytest.raises(ConfigError, match="ADMIN_KEY is required"):
        load_settings()
    monkeypatch.setenv("ADMIN_KEY", "a" * 31)
    with pytest.raises(ConfigError, match="ADMIN_KEY must be at least 32"):
        load_settings()
    monkeypatch.setenv("ADMIN_KEY", "a" * 32)
    monkeypatch.setenv("LOG_LEVEL", "DEBUG")
    settings = load_settings()
    assert not settings.dev_endpoints  # whatever the log level
    assert settings.cors_origins == [] and not settings.unity_route
    for name, value in (("DEV_ENDPOINTS", "true"), ("CORS_ORIGINS", "*"), ("UNITY_TEST_ROUTE", "true")):
        monkeypatch.setenv(name, value)
        with pytest.raises(ConfigError, match=name):
            load_settings()
        monkeypatch.delenv(name)
    monkeypatch.setenv("UNITY_TEST_ROUTE", "true")
    monkeypatch.setenv("UNITY_DEVICE_KEYS", "headset-1:" + "d" * 32)
    settings = load_settings()
    assert settings.unity_route and settings.UNITY_DEVICE_KEYS == {"headset-1": "d" * 32}


def test_development_stays_open_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(LOG_LEVEL="DEBUG")
    assert settings.dev_endpoints and settings.cors_origins == ["*"] and settings.unity_route


def test_short_device_keys_and_bad_proxy_networks_are_refused() -> None:
    with pytest.raises(ConfigError, match="UNITY_DEVICE_KEYS"):
        load_settings(UNITY_DEVICE_KEYS="headset-1:short")
    with pytest.raises(ConfigError, match="TRUSTED_PROXIES"):
        load_settings(TRUSTED_PROXIES="10.0.0.0/8,not-a-network")


def test_a_missing_secret_is_generated_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    settings = load_settings()
    with caplog.at_level(logging.WARNING, logger="samvad.config"):
        secret = settings.signing_secret
    assert len(secret) >= 32 and settings.signing_secret == secret
    assert "SAMVAD_SECRET" in caplog.text


def test_cors_origins_are_a_comma_separated_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORS_ORIGINS", "https://a.example, https://b.example")
    assert load_settings().CORS_ORIGINS == ["https://a.example", "https://b.example"]


def test_a_dotenv_file_is_read(tmp_path: object) -> None:
    import pathlib

    pathlib.Path(".env").write_text("MAX_TURNS=12\n")
    assert load_settings().MAX_TURNS == 12


def test_a_token_must_outlive_the_welcome_back_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN_TTL_SECONDS", "3600")
    with pytest.raises(ConfigError, match="SESSION_RESTART_SECONDS"):
        load_settings()
    monkeypatch.setenv("SESSION_RESTART_SECONDS", "1800")
    assert load_settings().SESSION_RESTART_SECONDS == 1800
