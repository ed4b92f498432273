"""The project as an installed package: a non-editable wheel in a fresh virtualenv finds its Hydra configs
(`pkg://runner.conf`: conf/ and the sweeps/ group, shipped inside the package), runs from any folder, and keeps
its caches in the user's cache folder.

Offline: the wheel is built without build isolation and installed without dependencies; the fresh venv gets
them from the running interpreter's site-packages through a `.pth` file. About a minute on two cores."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What the build reads. Built from a copy, so that setuptools' build/ and egg-info stay out of the checkout.
SOURCES = ("pyproject.toml", "README.md", "runner", "conf", "sweeps")

USER_SWEEP = """\
# @package _global_
defaults:
  - override /workload: [decode]

sweep:
  name: my_study
  grid:
    spec_method: ["off"]
    max_model_len: [512]
    concurrency: [1, 2, 3]
"""


def run(cmd, *, cwd: Path, env: dict, timeout: int = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (f"{' '.join(map(str, cmd))} exited {proc.returncode}\n--- stdout\n"
                                  f"{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}")
    return proc


def build_wheel(tmp: Path) -> Path:
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif path.exists():
            shutil.copy2(path, src / name)
    dist = tmp / "dist"
    run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "-w", dist], cwd=src, env=os.environ.copy())
    (wheel,) = dist.glob("vllm_sweep_runner-*.whl")
    return wheel


def dependency_dirs() -> list[str]:
    """The running interpreter's site-packages: the fresh venv's dependencies, without internet."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("install")
    wheel = build_wheel(tmp)
    venv = tmp / "venv"
    run([sys.executable, "-m", "venv", venv], cwd=tmp, env=os.environ.copy())
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv),
               PYTHONNOUSERSITE="1", WANDB_MODE="offline")
    site = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp, env=env)
    # Plain path lines: appended to sys.path after the venv's own site-packages (their own .pth files,
    # such as the checkout's editable install, are not run).
    (Path(site.stdout.strip()) / "_deps_from_runner_env.pth").write_text("\n".join(dependency_dirs()) + "\n")
    # --ignore-installed: the checkout's editable install is visible through the .pth; never touch it.
    run([python, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "-q", wheel],
        cwd=tmp, env=env)
    work = tmp / "work"  # the user's folder: not the checkout
    work.mkdir()
    return {"tmp": tmp, "venv": venv, "python": python, "env": env, "work": work, "wheel": wheel}


def test_the_wheel_ships_every_package_and_the_configs(installed):
    names = zipfile.ZipFile(installed["wheel"]).namelist()
    packages = {str(p.parent.relative_to(ROOT)).replace(os.sep, ".") for p in (ROOT / "runner").rglob("__init__.py")}
    shipped = {n.rsplit("/", 1)[0].replace("/", ".") for n in names if n.endswith("/__init__.py")}
    assert packages <= shipped, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(packages - shipped)}"
    configs = {n for n in names if n.startswith("runner/conf/") and n.endswith(".yaml")}
    expected = {f"runner/conf/{p.relative_to(ROOT / 'conf').as_posix()}" for p in (ROOT / "conf").rglob("*.yaml")
                if p.relative_to(ROOT / "conf").parts[0] != "sweep"}
    expected |= {f"runner/conf/sweep/{p.name}" for p in (ROOT / "sweeps").glob("*.yaml")}
    assert configs == expected


def test_the_installed_package_runs_not_the_checkout(installed):
    env = {**installed["env"], "XDG_CACHE_HOME": str(installed["tmp"] / "xdg")}
    env.pop("RUNNER_CACHE_DIR", None)
    probe = ("import runner, runner.config.store as s, runner.cache as c, runner.models.tiny as t; "
             "from importlib import resources; "
             "print(runner.__file__); print(s.CONF_DIR); print(resources.files('runner.conf')); "
             "print(c.cache_root()); print(t.tiny_model_dir())")
    out = run([installed["python"], "-c", probe], cwd=installed["work"], env=env).stdout.splitlines()
    venv = installed["venv"].resolve()
    assert Path(out[0]).resolve().is_relative_to(venv), out[0]
    assert out[1] == "pkg://runner.conf"
    assert Path(out[2]).resolve().is_relative_to(venv), out[2]
    assert Path(out[3]) == installed["tmp"] / "xdg" / "vllm-sweep"
    assert Path(out[4]).parent == installed["tmp"] / "xdg" / "vllm-sweep" / "models"
    override = run([installed["python"], "-c", probe], cwd=installed["work"],
                   env={**env, "RUNNER_CACHE_DIR": str(installed["tmp"] / "mine")}).stdout.splitlines()
    assert Path(override[3]) == installed["tmp"] / "mine"


def test_help_lists_the_shipped_config_groups(installed):
    out = run(["vllm-sweep", "--help"], cwd=installed["work"], env=installed["env"]).stdout
    assert re.search(r"^  workload +decode, ", out, re.MULTILINE), out
    studies = {line.split()[0] for line in out.split("studies (", 1)[1].splitlines()[1:] if line.startswith("  ")}
    assert {"demo", "draft_count"} <= studies, out


def test_dry_run_of_the_default_sweep_prints_the_plan(installed):
    out = run(["vllm-sweep", "dry_run=true"], cwd=installed["work"], env=installed["env"]).stdout
    assert re.search(r"^plan: \d+ engine configs, \d+ trials", out, re.MULTILINE), out
    assert re.search(r"^devices: cpu", out, re.MULTILINE), out
    assert not (installed["work"] / "outputs" / "demo" / "default" / "trials.parquet").exists()


@pytest.mark.parametrize("how", ["searchpath", "config-dir"])
def test_a_users_own_sweep(installed, how):
    """A sweep file of the user's own, in <folder>/sweep/: added to the search path (the shipped configs
    stay primary) by `hydra.searchpath=[file://<folder>]` or `--config-dir <folder>`."""
    mine = installed["tmp"] / f"my-configs-{how}"
    (mine / "sweep").mkdir(parents=True)
    (mine / "sweep" / "my_study.yaml").write_text(USER_SWEEP)
    where = [f"hydra.searchpath=[file://{mine}]"] if how == "searchpath" else ["--config-dir", mine]
    out = run(["vllm-sweep", *where, "sweep=my_study", "dry_run=true"],
              cwd=installed["work"], env=installed["env"]).stdout
    assert re.search(r"^plan: 1 engine configs, 3 trials", out, re.MULTILINE), out
