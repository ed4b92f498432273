"""The engine stack's byte-compilation at the command's start (runner.scheduling.bytecode): what it compiles."""
import sys

from runner.scheduling.bytecode import compile_command, package_dirs


def test_finds_installed_packages_without_importing_them():
    before = set(sys.modules)
    folders = package_dirs(("vllm", "no_such_package_here"))
    assert [f.name for f in folders] == ["vllm"]
    assert "vllm" not in set(sys.modules) - before


def test_compiles_on_every_core_quietly():
    command = compile_command(package_dirs(("vllm",)))
    assert command[1:6] == ["-m", "compileall", "-q", "-j", "0"] and command[-1].endswith("vllm")
