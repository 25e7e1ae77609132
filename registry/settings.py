"""Settings from the environment (prefix DRAFTERS_) and an optional .env file."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

# Every publisher of a target or a drafter in the catalog.
DEFAULT_WATCHED_ORGS: tuple[str, ...] = (
    "Qwen",
    "google",
    "meta-llama",
    "openai",
    "deepseek-ai",
    "moonshotai",
    "MiniMaxAI",
    "zai-org",
    "z-lab",
    "modal-labs",
    "RedHatAI",
    "incoai",
    "lmsys",
    "yuhuili",
    "XiaomiMiMo",
)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DRAFTERS_", env_file=".env", extra="ignore")

    home: Path = Field(default=Path("~/.drafters"))
    database_url: str | None = None
    hub_endpoint: str = "https://huggingface.co"
    # Read from HF_TOKEN like every Hugging Face tool; SecretStr keeps it out of reprs and logs.
    hf_token: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("HF_TOKEN", "DRAFTERS_HF_TOKEN")
    )
    watched_orgs: list[str] = Field(default_factory=lambda: list(DEFAULT_WATCHED_ORGS))
    watch_interval_s: float = 300.0
    hub_timeout_s: float = 10.0
    dashboard_port: int = 8501
    # Where tiny demo models are built and cached (default: $DRAFTERS_HOME/models).
    models_path: Path | None = Field(default=None, validation_alias=AliasChoices("DRAFTERS_MODELS_DIR"))
    # Decode length and repeats of the demo measurements `drafters up` queues.
    demo_max_new_tokens: int = 48
    demo_repeats: int = 3

    @property
    def home_dir(self) -> Path:
        return self.home.expanduser()

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.home_dir / 'registry.db'}"

    @property
    def hub_cache_dir(self) -> Path:
        return self.home_dir / "hub-cache"

    @property
    def models_dir(self) -> Path:
        return (self.models_path or self.home_dir / "models").expanduser()

    def token_value(self) -> str | None:
        return self.hf_token.get_secret_value() if self.hf_token else None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
