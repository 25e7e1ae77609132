"""Settings from the environment (prefix DRAFTERS_) and an optional $DRAFTERS_HOME/.env file.

The .env file is read from $DRAFTERS_HOME only, never from the current directory: a `.env` in a checkout
someone else wrote could otherwise point the Hub endpoint (and with it HF_TOKEN) at their server.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from pydantic import AliasChoices, BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from registry.redact import mask_url

class CanaryServer(BaseModel):
    """A server `drafters up` keeps checking with `drafters doctor` (DRAFTERS_CANARY_SERVERS, a JSON list)."""

    url: str
    engine: str | None = None  # llamacpp, vllm or sglang; None: found from the server
    hardware: str | None = None
    target: str | None = None
    drafter: str | None = None
    api_key_env: str | None = None  # the name of a variable holding its API key, never the key


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DRAFTERS_", env_file=None, extra="ignore")

    home: Path = Field(default=Path("~/.drafters"))
    database_url: str | None = None
    hub_endpoint: str = "https://huggingface.co"
    # HF_TOKEN goes to the Hub's own endpoint; to a mirror or proxy only when this says so explicitly.
    send_token_to_endpoint: bool = False
    # Read from HF_TOKEN like every Hugging Face tool; SecretStr keeps it out of reprs and logs.
    hf_token: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("HF_TOKEN", "DRAFTERS_HF_TOKEN")
    )
    # Webhook receivers on loopback, private or link-local addresses (a receiver on this machine or the LAN);
    # refused by default so that a subscription cannot reach the cloud metadata service or internal services.
    webhook_allow_internal: bool = False
    # None: every publisher in the bundled catalog (registry.domain.catalog.watched_orgs reads it; the catalog is a
    # layer above this module).
    watched_orgs: list[str] | None = None
    watch_interval_s: float = 300.0
    hub_timeout_s: float = 10.0
    dashboard_port: int = 8501
    # `drafters serve`: the read-only JSON API (and the Hub webhook endpoint), on 127.0.0.1 by default.
    api_host: str = "127.0.0.1"
    api_port: int = 8788
    # Optional bearer token the API asks for (SecretStr: never in a repr or a log line).
    api_token: SecretStr | None = None
    # Origins allowed to call the API from a browser; none (CORS off) by default.
    api_cors_origins: list[str] = Field(default_factory=list)
    # Where tiny demo models are built and cached (default: $DRAFTERS_HOME/models).
    models_path: Path | None = Field(default=None, validation_alias=AliasChoices("DRAFTERS_MODELS_DIR"))
    # Decode length and repeats of the demo measurements `drafters up` queues.
    demo_max_new_tokens: int = 48
    demo_repeats: int = 3
    # Autoverify (`drafters up`): plan, download and measure every exact pair that fits this worker; one switch.
    autoverify: bool = True
    autoverify_structural: bool = False  # structural pairs too, not only exact ones
    autoverify_interval_s: float = 60.0
    autoverify_max_new_tokens: int = 512  # as `drafters verify` (registry.domain.measurement.DEFAULT_MAX_NEW_TOKENS)
    autoverify_repeats: int = 3
    worker_memory_gb: float | None = None  # default: the device's memory (CUDA total memory, or RAM on CPU)
    download_budget_gb: float | None = None  # default: half the free disk, at most 200 GB
    # Hub license tags (e.g. ["llama3.1", "other"]) whose pairs are flagged in the plan and never downloaded.
    autoverify_blocked_licenses: list[str] = Field(default_factory=list)
    # Servers `drafters up` probes every canary_interval_s, so a regression after an engine or drafter upgrade is
    # reported before users notice (`drafters status`, the events); none by default.
    canary_servers: list[CanaryServer] = Field(default_factory=list)
    canary_interval_s: float = 900.0

    @property
    def home_dir(self) -> Path:
        return self.home.expanduser()

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.home_dir / 'registry.db'}"

    @property
    def shown_database_url(self) -> str:
        """The database URL for output and logs: every credential masked."""
        return mask_url(self.resolved_database_url)

    @property
    def shown_hub_endpoint(self) -> str:
        """The Hub endpoint for output and logs: a mirror's `user:password@` or `?token=` masked."""
        return mask_url(self.hub_endpoint)

    def ensure_home(self) -> Path:
        """$DRAFTERS_HOME, created 0700 (it holds the registry, webhook secrets and .env) and kept so."""
        home = self.home_dir
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            if home.stat().st_mode & 0o077 and home.stat().st_uid == os.getuid():
                home.chmod(0o700)
        except OSError:
            pass
        return home

    @property
    def hub_cache_dir(self) -> Path:
        return self.home_dir / "hub-cache"

    @property
    def downloads_dir(self) -> Path:
        """Where autoverify downloads repos (only what it downloaded here is ever evicted)."""
        return self.home_dir / "downloads"

    @property
    def models_dir(self) -> Path:
        return (self.models_path or self.home_dir / "models").expanduser()

    def token_value(self) -> str | None:
        """The token to send to `hub_endpoint`, or None when that endpoint is not the Hub and nobody allowed it."""
        if self.hf_token is None:
            return None
        if self.hub_endpoint.rstrip("/") != OFFICIAL_HUB and not self.send_token_to_endpoint:
            return None
        return self.hf_token.get_secret_value()


OFFICIAL_HUB = "https://huggingface.co"


def home_from_environment() -> Path:
    """$DRAFTERS_HOME from the process environment (not from any .env: that file lives in it)."""
    return Path(os.environ.get("DRAFTERS_HOME") or "~/.drafters").expanduser()


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings(_env_file=home_from_environment() / ".env")  # type: ignore[call-arg]
