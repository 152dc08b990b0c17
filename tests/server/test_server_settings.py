"""Settings (environment, nesting, validation) and the `python -m server` flags."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from server.__main__ import overrides, parse_args
from server.settings import Settings


def test_defaults() -> None:
    settings = Settings()
    assert settings.store_dir == Path("var/store")
    assert settings.registry_url is None and settings.admin_secret() is None
    assert settings.poll_interval_s == 1.0 and settings.engine.device == "cpu"
    assert settings.routing.ensemble == "soft"


def test_every_field_is_documented() -> None:
    groups = ("engine", "limits", "decoding", "scheduler", "routing", "access", "documents",
              "corrections", "quality", "directions", "execution", "memories")
    models: list[type[BaseModel]] = [Settings]
    models += [type(getattr(Settings(), name)) for name in groups]
    for model in models:
        for name, field in model.model_fields.items():
            if name not in ("engine", "limits", "decoding", "scheduler", "routing"):
                assert field.description, f"{model.__name__}.{name} has no description"


def test_environment_with_prefix_and_nesting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMT_STORE_DIR", "/data/store")
    monkeypatch.setenv("NMT_POLL_INTERVAL_S", "0.5")
    monkeypatch.setenv("NMT_ADMIN_TOKEN", "abc")
    monkeypatch.setenv("NMT_ENGINE__DEVICE", "cuda:1")
    monkeypatch.setenv("NMT_SCHEDULER__MAX_WAIT_MS", "12")
    monkeypatch.setenv("NMT_ROUTING__FIXED_WEIGHTS", '{"law": 2, "generic": 1}')
    settings = Settings()
    assert settings.store_dir == Path("/data/store") and settings.poll_interval_s == 0.5
    assert settings.admin_secret() == "abc" and "abc" not in repr(settings)
    assert settings.engine.device == "cuda:1" and settings.scheduler.max_wait_ms == 12
    assert settings.routing.fixed_weights == {"law": 2.0, "generic": 1.0}


def test_empty_admin_token_disables_admin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMT_ADMIN_TOKEN", "")
    assert Settings().admin_secret() is None


@pytest.mark.parametrize(("values", "message"), [
    ({"routing": {"top_k": 5}, "engine": {"slots_per_bank": 4}}, "top_k"),
    ({"decoding": {"beam_size": 9, "max_beam_size": 8}}, "beam_size"),
    ({"routing": {"threshold": 1.5}}, "threshold"),
    ({"scheduler": {"max_queue": 0}}, "max_queue"),
    ({"engine": {"devise": "cpu"}}, "devise"),
])
def test_invalid_settings_are_refused(values: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Settings(**values)  # type: ignore[arg-type]


def test_flags_override_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NMT_PORT", "9000")
    monkeypatch.setenv("NMT_ENGINE__DTYPE", "bfloat16")
    args = parse_args(["--host", "0.0.0.0", "--store-dir", "/tmp/s", "--device", "cuda",
                       "--int8", "--log-level", "debug"])
    settings = Settings(**overrides(args))
    assert settings.host == "0.0.0.0" and settings.port == 9000
    assert settings.store_dir == Path("/tmp/s") and settings.log_level == "debug"
    assert settings.engine.device == "cuda" and settings.engine.int8
    assert settings.engine.dtype == "bfloat16"  # from the environment, merged


def test_no_flags_means_no_overrides() -> None:
    assert overrides(parse_args([])) == {}


def test_there_is_no_admin_token_flag() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--admin-token", "x"])


def test_docs_list_every_setting() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "API.md").read_text()
    groups = ("engine", "limits", "decoding", "scheduler", "routing", "access", "documents",
              "corrections", "quality", "directions", "execution", "memories")
    names = [f"NMT_{name.upper()}" for name in Settings.model_fields if name not in groups]
    settings = Settings()
    for group in groups:
        section = getattr(settings, group)
        for name in type(section).model_fields:
            value = getattr(section, name)
            if isinstance(value, BaseModel):  # a section inside a section: its own fields
                names += [f"NMT_{group.upper()}__{name.upper()}__{inner.upper()}"
                          for inner in type(value).model_fields]
            else:
                names.append(f"NMT_{group.upper()}__{name.upper()}")
    missing = [name for name in names if f"`{name}`" not in docs]
    assert not missing


def test_execution_settings_keep_their_engine_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """The execution group's fields were engine settings first: both names set them, in
    the environment and in code; the execution name wins where both are given."""
    monkeypatch.setenv("NMT_ENGINE__FRONT_CPUS", "1")
    monkeypatch.setenv("NMT_ENGINE__FRONT_NICENESS", "3")
    monkeypatch.setenv("NMT_EXECUTION__FRONT_NICENESS", "5")
    monkeypatch.setenv("NMT_ENGINE__KEEP_FREED_MEMORY", "false")
    settings = Settings()
    assert settings.execution.front_cpus == 1 and settings.execution.front_niceness == 5
    assert not settings.execution.keep_freed_memory and settings.engine.device == "cpu"
    given = Settings(engine={"gil_switch_interval_ms": 0.25, "device": "cuda"})
    assert given.execution.gil_switch_interval_ms == 0.25 and given.engine.device == "cuda"
    with pytest.raises(ValidationError, match="front_cpus"):
        Settings(engine={"front_cpus": -1})


def test_the_text_worker_setting_keeps_its_limits_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`start_text_worker` was `NMT_LIMITS__START_PREPARATION_WORKER` (deprecated): both
    names set it; the execution name wins where both are given."""
    monkeypatch.setenv("NMT_LIMITS__START_PREPARATION_WORKER", "false")
    assert not Settings().execution.start_text_worker
    monkeypatch.setenv("NMT_EXECUTION__START_TEXT_WORKER", "true")
    assert Settings().execution.start_text_worker
    monkeypatch.delenv("NMT_EXECUTION__START_TEXT_WORKER")
    monkeypatch.delenv("NMT_LIMITS__START_PREPARATION_WORKER")
    given = Settings(limits={"start_preparation_worker": False, "max_text_chars": 50})
    assert not given.execution.start_text_worker and given.limits.max_text_chars == 50
    assert Settings().execution.start_text_worker
    with pytest.raises(ValidationError, match="start_text_worker"):
        Settings(limits={"start_preparation_worker": "sometimes"})
