"""The disk caches begun at the command's start (runner.scheduling.startup): what it compiles and inspects."""
from runner.scheduling.startup import compile_command, package_dirs


def test_finds_the_installed_packages_source_folders():
    folders = package_dirs(("vllm", "no_such_package_here"))
    assert [f.name for f in folders] == ["vllm"] and (folders[0] / "__init__.py").is_file()


def test_compiles_on_every_core_quietly():
    command = compile_command(package_dirs(("vllm",)))
    assert command[1:6] == ["-m", "compileall", "-q", "-j", "0"] and command[-1].endswith("vllm")


def test_model_info_for_the_model_and_its_mtp_drafters(tmp_path):
    from runner.vllm.model_info import mtp_drafters
    from runner.scheduling.startup import model_info_command

    (tmp_path / "config.json").write_text('{"architectures": ["MiMoForCausalLM"]}')
    command = model_info_command(tmp_path / "config.json", mtp=True)
    assert command[1:] == ["-m", "runner.execution.inspect_models", "MiMoForCausalLM", "--mtp"]
    assert model_info_command(tmp_path / "missing.json", mtp=False) is None
    assert mtp_drafters("MiMoForCausalLM", ["MiMoMTPModel", "Qwen3NextMTP", "MiMoForCausalLM"]) == ["MiMoMTPModel"]


def test_startup_steps_say_where_the_seconds_went():
    from runner.scheduling.startup_steps import StartupSteps

    steps = StartupSteps(origin=100.0)
    steps.mark("imports", at=101.5)
    steps.mark("validation", at=109.0)
    steps.mark("Ray", at=113.0)
    assert steps.durations() == [("imports", 1.5), ("validation", 7.5), ("Ray", 4.0)]
    assert steps.line() == "start-up: imports 1.5 s · validation 7.5 s · Ray 4.0 s (total 13.0 s before the " \
                           "first engine's actor)"


class _Fill:
    """A stand-in for the fill's process (unit tests spawn none): finished, or still running past any wait."""

    def __init__(self, *, running: bool):
        self.running, self.waits = running, []

    def wait(self, timeout=None):
        import subprocess

        self.waits.append(timeout)
        if self.running:
            raise subprocess.TimeoutExpired("fill", timeout)
        return 0


def test_the_first_engine_waits_for_the_model_info_fill_once_and_bounded():
    from runner.scheduling.startup import ModelInfoFill

    finished = _Fill(running=False)
    fill = ModelInfoFill(finished)
    fill.wait()
    fill.wait()  # later engines: nothing left to wait for
    assert finished.waits == [ModelInfoFill.WAIT_S]

    running = _Fill(running=True)
    ModelInfoFill(running).wait()  # gives up after the bound: the load inspects for itself
    assert running.waits == [ModelInfoFill.WAIT_S]
    ModelInfoFill().wait()  # no fill (CPU, a remote cluster): nothing to wait for


def test_the_model_folder_is_built_beside_rays_start_and_its_failure_stops_the_command_there():
    import threading

    import pytest

    from runner.scheduling.startup import ModelFolder, ModelInfoFill

    main = threading.current_thread()
    built_on: list = []
    fill = ModelInfoFill()
    folder = ModelFolder(lambda: built_on.append(threading.current_thread()) or fill)
    assert folder.ready() is fill and built_on and built_on[0] is not main  # on its own thread

    def bad_model():
        raise ValueError("unknown builtin model 'x'")

    with pytest.raises(ValueError, match="unknown builtin model"):
        ModelFolder(bad_model).ready()
