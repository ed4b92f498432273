"""Where the configs are: conf/ as the package runner.conf (installed, or through the editable install), or the
checkout's own folder. Nothing else of runner.config is imported here."""
from __future__ import annotations

import importlib.util
from pathlib import Path

PKG = "pkg://"
CONF_PACKAGE = "runner.conf"


def config_search_path() -> str:
    """Where Hydra reads conf/: the folder conf/ beside the imported runner/ when there is one (a checkout, also one
    imported through PYTHONPATH while another checkout is installed editable: its own configs, never the other's);
    else the package runner.conf (`pkg://runner.conf`; pyproject.toml maps conf/ and sweeps/ into it) of a wheel."""
    source = Path(__file__).resolve().parents[2] / "conf"
    if (source / "config.yaml").is_file():
        return str(source)
    try:
        installed = importlib.util.find_spec(CONF_PACKAGE) is not None
    except (ImportError, ValueError):
        installed = False
    return PKG + CONF_PACKAGE if installed else str(source)


CONF_DIR = config_search_path()  # hydra.main's config_path, and what compose() initializes Hydra with


def conf_root():
    """conf/ as a readable folder: the package runner.conf (installed or editable), or the checkout's conf/."""
    if CONF_DIR.startswith(PKG):
        from importlib import resources

        return resources.files(CONF_DIR[len(PKG):])
    return Path(CONF_DIR)
