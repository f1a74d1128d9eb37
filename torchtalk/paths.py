"""Where TorchTalk keeps things: cache, config, the fetched PyTorch tree.

`TORCHTALK_CACHE_DIR` and `TORCHTALK_CONFIG_DIR` override the user dirs;
`TORCHTALK_PYTORCH_SRC` names a PyTorch tree to use when none is given.
"""

from __future__ import annotations

import os
from pathlib import Path

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
