"""The settings base of every process: the model store it shares with the others, and
logging. Every field is an environment variable with the prefix `NMT_`; nested groups use
`__`. The server's `Settings` and the sidecar's `SidecarSettings` extend it, so the shared
variables (`NMT_STORE_DIR`, `NMT_REGISTRY_URL`, `NMT_BUILTIN_ARTIFACTS`, `NMT_BUILTIN_DIR`,
`NMT_LOG_LEVEL`)
mean the same thing in both. docs/API.md lists every setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from model_store import BUILTIN_DIR, Store

LogLevel = Literal["critical", "error", "warning", "info", "debug"]
LOG_LEVELS: tuple[str, ...] = ("critical", "error", "warning", "info", "debug")


class ProcessSettings(BaseSettings):
    """Read once at start-up, frozen, passed down explicitly."""

    model_config = SettingsConfigDict(env_prefix="NMT_", env_nested_delimiter="__",
                                      frozen=True)

    log_level: LogLevel = Field("info", description="logging level")
    store_dir: Path = Field(Path("var/store"), description="writable model store root")
    registry_url: str | None = Field(
        None, description="registry database URL: sqlite:///PATH (default: in the store dir) "
        "or postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB (docs/REGISTRY.md)")
    builtin_artifacts: bool = Field(
        True, description="layer the package's built-in artifacts under the store")
    builtin_dir: Path = Field(
        BUILTIN_DIR, description="the built-in artifacts' directory (default: the package's "
        "model_store/builtin; another one to try a publication before it ships)")

    def open_store(self) -> Store:
        """The model store these settings name."""
        return Store.open(self.store_dir, registry_url=self.registry_url,
                          builtin_dir=self.builtin_dir if self.builtin_artifacts else None)
