"""API keys: a JSON file of SHA-256 hashes, constant-time lookup, and minting new keys.

Keys are 32 random bytes (`tp-` + url-safe base64), so a plain SHA-256 is enough: slow password
hashes only matter for low-entropy secrets. The file never holds a key, only its hash:

    {"keys": [{"id": "demo", "sha256": "<hex>", "models": ["*"],
               "requests_per_minute": 600, "tokens_per_minute": 60000}]}

`models` lists the model names a key may call (`*` = all); a missing limit uses the gateway's
default.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenpulse.atomic import atomic_write

KEY_PREFIX = "tp-"


class KeysFileError(ValueError):
    """The keys file is missing, malformed or inconsistent."""


@dataclass(frozen=True)
class ApiKey:
    """One key's record: id, hash, allowed models and limits (None = gateway default)."""

    id: str
    sha256: str
    models: tuple[str, ...] = ("*",)
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None

    def allows(self, model: str) -> bool:
        """Whether this key may call `model`."""
        return "*" in self.models or model in self.models


def hash_key(key: str) -> str:
    """Hex SHA-256 of a presented key."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def _parse_entry(raw: Any, where: str) -> ApiKey:
    if not isinstance(raw, dict):
        raise KeysFileError(f"{where}: each key must be an object")
    key_id, digest = raw.get("id"), raw.get("sha256")
    if not isinstance(key_id, str) or not key_id:
        raise KeysFileError(f"{where}: 'id' must be a non-empty string")
    if not isinstance(digest, str) or len(digest) != 64:
        raise KeysFileError(f"{where}: 'sha256' must be 64 hex characters")
    try:
        bytes.fromhex(digest)
    except ValueError as exc:
        raise KeysFileError(f"{where}: 'sha256' is not hex") from exc
    models = raw.get("models", ["*"])
    if not isinstance(models, list) or not all(isinstance(m, str) and m for m in models):
        raise KeysFileError(f"{where}: 'models' must be a list of model names")
    limits: dict[str, float | None] = {}
    for name in ("requests_per_minute", "tokens_per_minute"):
        value = raw.get(name)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | float) or value <= 0
        ):
            raise KeysFileError(f"{where}: {name!r} must be a positive number")
        limits[name] = None if value is None else float(value)
    return ApiKey(id=key_id, sha256=digest.lower(), models=tuple(models), **limits)


def load_keys(path: Path) -> list[ApiKey]:
    """Parse and check a keys file."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise KeysFileError(f"keys file {path} not found") from exc
    except (OSError, ValueError) as exc:
        raise KeysFileError(f"keys file {path} is not valid json: {exc}") from exc
    raw_keys = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(raw_keys, list):
        raise KeysFileError(f"keys file {path} needs a top-level 'keys' list")
    keys = [_parse_entry(raw, f"{path} key #{i}") for i, raw in enumerate(raw_keys)]
    ids = [k.id for k in keys]
    if len(set(ids)) != len(ids):
        raise KeysFileError(f"keys file {path} has duplicate ids")
    return keys


class KeyStore:
    """Looks a presented key up among the stored hashes in constant time."""

    def __init__(self, keys: list[ApiKey]) -> None:
        self._keys = [(bytes.fromhex(k.sha256), k) for k in keys]

    @classmethod
    def from_file(cls, path: Path) -> KeyStore:
        """Load the store from a keys file."""
        return cls(load_keys(path))

    def __len__(self) -> int:
        return len(self._keys)

    def lookup(self, presented: str) -> ApiKey | None:
        """The key record matching `presented`, or None.

        Every stored hash is compared with `hmac.compare_digest` and the loop never exits early,
        so the time taken does not depend on which key (if any) matched.
        """
        digest = hashlib.sha256(presented.encode("utf-8", "surrogatepass")).digest()
        found: ApiKey | None = None
        for stored, key in self._keys:
            if hmac.compare_digest(stored, digest):
                found = key
        return found


def new_key() -> str:
    """A fresh random API key."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def add_key(
    path: Path,
    key_id: str,
    *,
    models: list[str] | None = None,
    requests_per_minute: float | None = None,
    tokens_per_minute: float | None = None,
    replace: bool = False,
) -> str:
    """Mint a key, store only its hash in `path` (created if missing), and return the key once."""
    if not key_id:
        raise KeysFileError("key id must not be empty")
    entries: list[dict[str, Any]] = []
    if path.exists():
        load_keys(path)  # refuse to rewrite a file we cannot read
        entries = json.loads(path.read_text(encoding="utf-8"))["keys"]
    if any(e.get("id") == key_id for e in entries):
        if not replace:
            raise KeysFileError(f"key id {key_id!r} already exists in {path}")
        entries = [e for e in entries if e.get("id") != key_id]
    key = new_key()
    entry: dict[str, Any] = {"id": key_id, "sha256": hash_key(key), "models": models or ["*"]}
    if requests_per_minute is not None:
        entry["requests_per_minute"] = requests_per_minute
    if tokens_per_minute is not None:
        entry["tokens_per_minute"] = tokens_per_minute
    entries.append(entry)
    _parse_entry(entry, "new key")
    path.parent.mkdir(parents=True, exist_ok=True)
    # a running gateway never reads half a file; hashes only, but still private
    atomic_write(path, json.dumps({"keys": entries}, indent=2) + "\n", 0o600)
    return key
