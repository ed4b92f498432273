"""Where the configs are: conf/ as the package runner.conf (installed, or through the editable install), or the
checkout's own folder. Nothing else of runner.config is imported here."""
from __future__ import annotations

import importlib.util
from pathlib import Path

PKG = "pkg://"
CONF_PACKAGE = "runner.conf"


def config_search_path() -> str:
    """Where Hydra reads conf/: the package runner.conf (`pkg://runner.conf`; pyproject.toml maps conf/ and
    sweeps/ into it), in a wheel or, through the editable install, in the checkout. A checkout that is not
    installed (runner imported from the source tree only) reads conf/ beside runner/ directly."""
    try:
        installed = importlib.util.find_spec(CONF_PACKAGE) is not None
    except (ImportError, ValueError):
        installed = False
    source = Path(__file__).resolve().parents[2] / "conf"
    if not installed and (source / "config.yaml").is_file():
        return str(source)
    return PKG + CONF_PACKAGE


CONF_DIR = config_search_path()  # hydra.main's config_path, and what compose() initializes Hydra with


def conf_root():
    """conf/ as a readable folder: the package runner.conf (installed or editable), or the checkout's conf/."""
    if CONF_DIR.startswith(PKG):
        from importlib import resources

        return resources.files(CONF_DIR[len(PKG):])
    return Path(CONF_DIR)
