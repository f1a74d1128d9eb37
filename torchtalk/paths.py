"""Where TorchTalk keeps things: cache, config, the fetched PyTorch tree,
a tree's fact DB.

`TORCHTALK_CACHE_DIR` and `TORCHTALK_CONFIG_DIR` override the user dirs;
`TORCHTALK_PYTORCH_SRC` names a PyTorch tree to use when none is given.
Cheap to import (no DuckDB, no Datalog): `torchtalk query` finds its DB
here before it asks a query server (Note [Query server] in torchtalk/qserver.py).
"""

from __future__ import annotations

import os
from pathlib import Path


def switched_on(name: str) -> bool:
    """Whether the on/off environment variable `name` is on: unset, or
    anything but 0, off, no or false (any case).

    Example:
        >>> switched_on("TORCHTALK_NO_SUCH_SWITCH")
        True
    """
    return os.environ.get(name, "1").strip().lower() not in ("0", "off", "no", "false")

PYTORCH_VERSION = "2.6.0"
PYTORCH_DEB_VERSION = "2.6.0+dfsg-7"


def cache_dir() -> Path:
    """The user cache dir (fact databases, parse caches, fetched trees)."""
    env = os.environ.get("TORCHTALK_CACHE_DIR")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("torchtalk"))


def config_dir() -> Path:
    """The user config dir (user rules in `rules/`)."""
    env = os.environ.get("TORCHTALK_CONFIG_DIR")
    if env:
        return Path(env)
    from platformdirs import user_config_dir

    return Path(user_config_dir("torchtalk"))


def default_source() -> Path:
    """The PyTorch tree used when no --source is given."""
    env = os.environ.get("TORCHTALK_PYTORCH_SRC")
    if env:
        return Path(env)
    return cache_dir() / "src" / f"pytorch-v{PYTORCH_VERSION}"


# ------------------------------------------------------------------ db paths

NATIVE_TREE = "aten/src/ATen/native/native_functions.yaml"
NATIVE_WHEEL = "torchgen/packaged/ATen/native/native_functions.yaml"


def db_dir() -> Path:
    """Where default databases live (in the user cache dir)."""
    return cache_dir() / "db"


def default_db(root: Path) -> Path:
    """The default DB of the tree at `root`: keyed by its resolved path, so
    `--source` alone finds it again. Example: `.../db/pytorch-v2.6.0-1a2b3c4d5e6f.duckdb`."""
    import hashlib

    key = hashlib.sha1(str(Path(root).resolve()).encode()).hexdigest()[:12]
    return db_dir() / f"{Path(root).resolve().name}-{key}.duckdb"


def facts_dir(db: Path) -> Path:
    """The fact files of `db` (Soufflé -F dir): `<stem>.facts/` beside it."""
    return db.with_name(db.stem + ".facts")


def source_db(source: str | Path) -> Path:
    """The default DB of the tree (or installed torch) at `source`, whether
    it exists yet or not. Example: `source_db("~/pytorch").name`
    'pytorch-1a2b3c4d5e6f.duckdb'."""
    return default_db(_source_root(Path(source).expanduser().resolve()))


def resolve_db(source: str | Path | None = None, db: str | Path | None = None) -> Path:
    """The DB to read: `db` if given, else the default DB of `source` (default:
    the default PyTorch tree). Raises StoreError when none is indexed.

    Example:
        >>> resolve_db(source="~/pytorch")
        PosixPath('/root/.cache/torchtalk/db/pytorch-1a2b3c4d5e6f.duckdb')
    """
    from torchtalk.errors import InputError, StoreError

    if db is not None:
        path = Path(db).expanduser()
        if not path.is_file():
            raise StoreError(f"no such database: {path}", hint="run `torchtalk index --source PATH --db FILE`")
        return path
    src = Path(default_source() if source is None else source).expanduser()
    if not src.exists():
        raise InputError(f"no such directory: {src}")
    path = source_db(src)
    if not path.is_file():
        raise StoreError(f"{src} is not indexed yet", hint=f"run `torchtalk index --source {src}`")
    return path


def _source_root(p: Path) -> Path:
    """The root a DB is keyed by, without validating the tree (cheap)."""
    if not (p / NATIVE_TREE).is_file() and (p.parent / NATIVE_WHEEL).is_file():
        return p.parent
    return p
