"""Settings.load: defaults < ROCKMEM_* environment < explicit overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from rockmem_mcp.config import Settings, default_home
from rockmem_mcp.errors import ConfigError


def test_defaults_without_environment(tmp_path: Path) -> None:
    settings = Settings.load(env={})
    assert settings.home == default_home()
    assert settings.max_content_bytes == 100_000
    assert settings.log_level == "WARNING"


def test_environment_overrides_defaults(tmp_path: Path) -> None:
    settings = Settings.load(env={"ROCKMEM_HOME": str(tmp_path / "h"), "ROCKMEM_MAX_CONTENT_BYTES": "1234"})
    assert settings.home == (tmp_path / "h").resolve()
    assert settings.max_content_bytes == 1234
    assert settings.memory_dir == settings.home / "memory"
    assert settings.index_dir == settings.home / "index"


def test_overrides_beat_environment(tmp_path: Path) -> None:
    env = {"ROCKMEM_HOME": str(tmp_path / "from-env"), "ROCKMEM_MAX_CONTENT_BYTES": "1234"}
    settings = Settings.load({"home": tmp_path / "from-flag", "max_content_bytes": 99}, env=env)
    assert settings.home == (tmp_path / "from-flag").resolve()
    assert settings.max_content_bytes == 99


def test_none_overrides_and_empty_environment_values_are_ignored(tmp_path: Path) -> None:
    env = {"ROCKMEM_HOME": str(tmp_path), "ROCKMEM_MAX_CONTENT_BYTES": ""}
    settings = Settings.load({"max_content_bytes": None, "home": None}, env=env)
    assert settings.home == tmp_path.resolve()
    assert settings.max_content_bytes == 100_000


def test_reads_the_process_environment_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROCKMEM_HOME", str(tmp_path / "env-home"))
    monkeypatch.setenv("ROCKMEM_MAX_CONTENT_BYTES", "777")
    settings = Settings.load()
    assert settings.home == (tmp_path / "env-home").resolve()
    assert settings.max_content_bytes == 777


def test_home_is_expanded_and_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Settings.load(env={"ROCKMEM_HOME": "~/data"}).home == (tmp_path / "data").resolve()
    monkeypatch.chdir(tmp_path)
    assert Settings.load(env={"ROCKMEM_HOME": "rel"}).home == (tmp_path / "rel").resolve()


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("ROCKMEM_MAX_CONTENT_BYTES", "lots"),
        ("ROCKMEM_MAX_CONTENT_BYTES", "0"),
        ("ROCKMEM_PORT", "70000"),
        ("ROCKMEM_LOG_LEVEL", "LOUD"),
        ("ROCKMEM_SALIENCE_ARCHIVE_THRESHOLD", "0.3"),  # above the dormant tier: fading memories would go
    ],
)
def test_invalid_environment_value_names_the_variable(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        Settings.load(env={variable: value})


def test_the_archive_threshold_is_the_seeds_and_tunable() -> None:
    assert Settings.load(env={}).salience_archive_threshold == 0.05
    assert Settings.load(env={"ROCKMEM_SALIENCE_ARCHIVE_THRESHOLD": "0.2"}).salience_archive_threshold == 0.2


def test_invalid_override_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="MAX_TAGS"):
        Settings.load({"max_tags": -1}, env={})


def test_settings_are_frozen_and_reject_unknown_fields(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path)  # embeddings: the default
    with pytest.raises(ValueError):
        settings.max_tags = 3  # type: ignore[misc]
    with pytest.raises(ValueError):
        Settings(home=tmp_path, unknown_field=1)  # type: ignore[call-arg]  # embeddings: the default


def test_toolsets_default_to_the_default_selection_and_read_a_comma_separated_list() -> None:
    assert Settings.load(env={}).toolsets == ["default"]
    assert Settings.load(env={"ROCKMEM_TOOLSETS": " memory, graph ,"}).toolsets == ["memory", "graph"]
    assert Settings.load({"toolsets": "dream"}, env={"ROCKMEM_TOOLSETS": "graph"}).toolsets == ["dream"]
