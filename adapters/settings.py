"""Configuration, read once from CTXSTORE_* variables and the config file (a store's URL
becomes the library's environment in adapters/storage/urls.py)."""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from ctxstore.domain.compaction import CompactionConfig
from ctxstore.domain.errors import ConfigurationError
from ctxstore.domain.prompt import PromptConfig

CONFIG_FILE = "ctxstore.toml"


def default_data_dir() -> Path:
    return Path.home() / ".local" / "share" / "ctxstore"


Scope = Literal["read", "write", "audit", "admin"]


class TokenGrant(BaseModel):
    """A token's tenant and what it may do (write, read, audit, admin)."""

    model_config = ConfigDict(extra="forbid")

    tenant: str = Field(min_length=1)
    scopes: list[Scope] = Field(default_factory=lambda: list(get_args(Scope)), min_length=1)


class ServiceConfig(BaseModel):
    """The HTTP service (`ctxstore serve`): CTXSTORE_SERVICE__*, or [service] in the file."""

    # Bearer token -> tenant (every scope), or -> {"tenant": ..., "scopes": [...]}. Empty
    # (and none in the database): no authentication, one shared space (loopback only).
    tokens: dict[str, str | TokenGrant] = Field(default_factory=dict)
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)  # larger: 413
    # How long a finished request's response is replayed for a retry with its key.
    idempotency_ttl_seconds: int = Field(default=24 * 3600, ge=1)
    # A request still running under a key after this long is taken as lost (crashed).
    idempotency_pending_seconds: int = Field(default=300, ge=1)
    # Seconds between catch-ups of the audit and search indexes (0: only when read).
    audit_refresh_seconds: float = Field(default=1.0, ge=0)
    threads: int = Field(default=32, ge=1, description="requests served at once per worker")
    tail_max_clients: int = Field(default=1000, ge=1, description="live tails one instance serves")
    tail_send_timeout: float = Field(
        default=10.0, gt=0, description="seconds a live tail's send may wait before it is dropped"
    )
    telemetry: bool = Field(default=False, description="FastAPI's OpenTelemetry instrumentation")
    sweep_seconds: float = Field(
        default=60.0, ge=0, description="seconds between retention sweeps (0: none)"
    )


class SearchSettings(BaseModel):
    """Search across conversations: CTXSTORE_SEARCH__*, or [search] in the file."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = Field(default=True, description="keep the search index (False: no search)")
    # With keys per context the index would hold their messages' words unencrypted.
    index_encrypted: bool = Field(
        default=False, description="index contexts encrypted with keys of their own"
    )


class ModelPrice(BaseModel):
    """What a model's tokens cost, in USD per million."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class CompactionSettings(CompactionConfig):
    """The compaction policy and which model writes the summaries (a provider choice and
    its credentials, kept out of the domain)."""

    summarizer: Literal["extractive", "openai"] = "extractive"  # offline, or a model
    model: str = "gpt-4o-mini"  # the summarizer's model (openai)
    base_url: str | None = None  # any OpenAI-compatible endpoint
    api_key: str | None = Field(default=None, repr=False)  # the endpoint's key


class Settings(BaseSettings):
    """ctxstore's settings; each field is the variable CTXSTORE_<FIELD>."""

    model_config = SettingsConfigDict(
        env_prefix="CTXSTORE_", env_nested_delimiter="__", extra="ignore"
    )

    url: str | None = Field(default=None, description="store URL; default: embedded SQLite")
    data_dir: Path = Field(default_factory=default_data_dir, description="home of the SQLite file")
    actor: str = Field(
        default="anonymous", min_length=1, description="actor of unattributed commands"
    )
    max_message_bytes: int = Field(
        default=1_000_000, ge=1024, description="largest message accepted (its JSON, UTF-8)"
    )
    max_blob_bytes: int = Field(
        default=32 * 1024 * 1024, ge=1024,
        description="largest attachment (image, audio, file) a message or an upload may hold",
    )  # fmt: skip
    max_messages: int = Field(
        default=100_000, ge=1, description="most visible messages a context may hold"
    )
    snapshot_interval: int = Field(default=32, ge=2, description="events between snapshots")
    sqlite_synchronous: Literal["full", "normal"] = Field(
        default="full",
        description="when a SQLite commit returns: full, once it is on the disk (it survives "
        "a power cut or an OS crash); normal, once it is in the write-ahead log (it survives "
        "the process crashing or being killed; a power cut or an OS crash may lose the last "
        "commits, never the database's consistency), a fraction of the time per commit",
    )
    cache_size: int = Field(default=256, ge=1, description="contexts kept in memory per store")
    connect_timeout: int = Field(
        default=10, ge=1, description="seconds to wait for a PostgreSQL connection"
    )
    statement_timeout: int = Field(
        default=30,
        ge=1,
        description="seconds a PostgreSQL statement may run; a server silent for this plus "
        "the connect timeout is given up on",
    )
    encoding: str = Field(
        default="o200k_base",
        description="token encoding of new contexts (every current OpenAI model's)",
    )
    encryption_key: SecretStr | None = Field(
        default=None,
        description="key-encryption key (base64 of 16, 24 or 32 bytes): each context's "
        "events, snapshots and index rows are encrypted at rest with its own data key, "
        "wrapped by this one (AES-GCM); make one with `ctxstore keygen`",
    )
    key_file: Path | None = Field(
        default=None,
        description="file of key-encryption keys, base64 one per line, the current first "
        "(older ones unwrap until `ctxstore keys rotate` re-wraps); instead of encryption_key",
    )
    kms: str | None = Field(
        default=None,
        description="a key management service: `module:factory`, called with the settings, "
        "returning a ctxstore.adapters.keys.kek.KeyWrapper",
    )
    key_cache_seconds: float = Field(
        default=60.0, gt=0,
        description="how long a process trusts its cached data keys: a re-keying or an "
        "erasure by another process reaches it within this",
    )  # fmt: skip
    key_vault: str | None = Field(
        default=None,
        description="where data keys are kept: sqlite:///path or postgresql://... (default: "
        "<store file>.keys beside a SQLite store, a table in a PostgreSQL store's database)",
    )
    replicas: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="PostgreSQL streaming replicas for reads that only look (URLs, comma-"
        "separated or a JSON list); a client still reads its own writes",
    )
    shards: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="PostgreSQL servers to spread contexts over (URLs, comma-separated or a "
        "JSON list): ctxstore.open_sharded(), `ctxstore shards`, `ctxstore move`",
    )
    replica_wait: float = Field(
        default=0.0, ge=0, le=60,
        description="seconds a read waits for a replica behind this store's own writes "
        "before the primary answers it",
    )  # fmt: skip
    prices: dict[str, ModelPrice] = Field(
        default_factory=dict,
        description="price table for the cost of recorded calls, USD per million tokens: "
        '\'{"gpt-4o": {"input": 2.5, "output": 10}}\' (a name also prices its dated '
        "versions, gpt-4o-2024-08-06)",
    )
    compress: Literal["auto", "always", "off"] = Field(
        default="auto",
        description="zstd for stored events and snapshots: auto (states of 1 KiB and up), "
        "always, or off (true/false mean always/off); every store reads all three",
    )
    tiktoken_cache_dir: Path | None = Field(
        default=None,
        validation_alias="TIKTOKEN_CACHE_DIR",
        description="tiktoken's own cache folder, where encodings other than cl100k_base are found",
    )

    prompt: PromptConfig = Field(
        default_factory=PromptConfig,
        description="prompt building: CTXSTORE_PROMPT__STRATEGY, ..., or [prompt] in the file",
    )

    service: ServiceConfig = Field(
        default_factory=ServiceConfig,
        description='HTTP service: CTXSTORE_SERVICE__TOKENS=\'{"token": "tenant"}\', ...',
    )

    compaction: CompactionSettings = Field(
        default_factory=CompactionSettings,
        description="compaction: CTXSTORE_COMPACTION__MESSAGE_LIMIT, ..., or [compaction]",
    )

    search: SearchSettings = Field(
        default_factory=SearchSettings,
        description="search: CTXSTORE_SEARCH__ENABLED, CTXSTORE_SEARCH__INDEX_ENCRYPTED, or [search]",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Arguments, then CTXSTORE_* variables, then the TOML file named by CTXSTORE_CONFIG
        # (default ./ctxstore.toml, if it exists).
        path = Path(os.environ.get("CTXSTORE_CONFIG", CONFIG_FILE))
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls, toml_file=path))

    @field_validator("compaction", mode="before")
    @classmethod
    def _compaction_policy(cls, value: object) -> object:
        # The domain's policy alone is accepted as it is, with the default summarizer.
        if isinstance(value, CompactionConfig) and not isinstance(value, CompactionSettings):
            return value.model_dump()
        return value

    @field_validator("replicas", "shards", mode="before")
    @classmethod
    def _replica_list(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [u.strip() for u in text.split(",") if u.strip()]
        return value

    @field_validator("compress", mode="before")
    @classmethod
    def _compress_flag(cls, value: object) -> object:
        # The setting was a flag before it had modes: true kept meaning "every state".
        flags = {"true": "always", "1": "always", "yes": "always", "on": "always",
                 "false": "off", "0": "off", "no": "off"}  # fmt: skip
        if isinstance(value, bool):
            return "always" if value else "off"
        if isinstance(value, str):
            return flags.get(value.strip().lower(), value.strip().lower())
        return value

    @model_validator(mode="after")
    def _one_source_of_keys(self) -> Settings:
        # Two sources given, one would be ignored: a store sealed with the other key.
        given = [n for n, v in (("CTXSTORE_ENCRYPTION_KEY", self.encryption_key),
                                ("CTXSTORE_KEY_FILE", self.key_file), ("CTXSTORE_KMS", self.kms))
                 if v is not None]  # fmt: skip
        if len(given) > 1:
            raise ValueError(
                f"{' and '.join(given)} are both set: give one source of the key-encryption "
                "key (rotate from a key to a key file with `ctxstore keys rotate`)"
            )
        return self

    def resolved_url(self) -> str:
        """The URL in force: CTXSTORE_URL, else the embedded SQLite file."""
        return self.url or f"sqlite:///{self.data_dir / 'ctxstore.db'}"

    def price_of(self, model: str) -> ModelPrice | None:
        """The model's price: its own entry, else the longest entry it extends by a `-`."""
        if model in self.prices:
            return self.prices[model]
        named = [n for n in self.prices if model.startswith(n + "-")]
        return self.prices[max(named, key=len)] if named else None

    @property
    def encrypts(self) -> bool:
        return bool(self.encryption_key or self.key_file or self.kms)


def load_settings(**given: object) -> Settings:
    """The settings in force (arguments, CTXSTORE_* variables, the config file); raises
    ConfigurationError naming the setting or file that is wrong, in one line."""
    named = os.environ.get("CTXSTORE_CONFIG")
    if named is not None and not Path(named).is_file():
        raise ConfigurationError(f"CTXSTORE_CONFIG names {named}, which is not a file")
    path = named or CONFIG_FILE
    try:
        return Settings(**given)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ConfigurationError(_invalid(exc, path)) from None
    except SettingsError as exc:  # a nested setting's value is not JSON
        field = re.search(r'field "([^"]+)"', str(exc))
        prefix = f"CTXSTORE_{(field.group(1) if field else '').upper()}"
        names = sorted(k for k in os.environ if k.upper().startswith(prefix)) or [prefix]
        cause = exc.__cause__ or exc
        raise ConfigurationError(f"{', '.join(names)}: not valid JSON ({cause})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"config file {path}: not valid TOML ({exc})") from None
    except OSError as exc:
        raise ConfigurationError(f"config file {path}: {exc.strerror or exc}") from None


def _invalid(exc: ValidationError, path: str) -> str:
    """The first problem of a validation error, named as the variable that sets it."""
    first = exc.errors()[0]
    more = f"; and {len(exc.errors()) - 1} more" if len(exc.errors()) > 1 else ""
    if not first["loc"]:  # a rule across settings: it names them, and no value is shown
        return str(first["msg"]).removeprefix("Value error, ") + more
    loc = [str(p) for p in first["loc"]]
    variable = "CTXSTORE_" + "__".join(p.upper() for p in loc)
    where = f"{variable} (or {'.'.join(loc)} in {path})" if Path(path).is_file() else variable
    got = repr(first.get("input"))[:60]
    return f"{where}: {first['msg']}, got {got}{more}"
