"""The seam's contract with the installed vLLM (the CPU build here): each piece of runner/vllm/ looks up the vLLM
names it relies on (its own `check()`, which changes nothing) and says whether it is active here. A vLLM upgrade
that renames what a piece uses fails here, by name, instead of dropping a speed-up or a check without a word.

Inactive here by design: the CUDA-only pieces (their names are still checked). On a CUDA machine they are active.
"""
from __future__ import annotations

import pytest

from runner.vllm import fork_server, ngram_jit, sleep_pinning
from runner.vllm.engine import vllm_version
from runner.vllm.versions import CPU_BUILD, GPU_STUDIES, PIECES, Kind, piece


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.fixture(scope="module")
def verdicts() -> dict:
    return {p.name: p.check() for p in PIECES}


@pytest.mark.parametrize("name", [p.name for p in PIECES])
def test_each_piece_finds_its_names_in_the_installed_vllm(name, verdicts):
    verdict = verdicts[name]
    if piece(name).cuda_only and not _cuda():
        assert not verdict.active and verdict.reason.startswith("CUDA only") and "names are present" in \
            verdict.reason, verdict.reason
    elif vllm_version() not in piece(name).checked_on:  # off by design where its names were never read
        assert not verdict.active and verdict.reason.startswith(f"not checked on vLLM {vllm_version()}")
    else:
        assert verdict.active, f"{name} on vLLM {vllm_version()}: {verdict.reason}"


def test_the_inactive_pieces_here_are_the_cuda_only_ones(verdicts):
    """States which pieces do nothing on this machine's vLLM, and why."""
    inactive = {name: v.reason for name, v in verdicts.items() if not v.active}
    if vllm_version() != CPU_BUILD:  # the draft count set between trials ran on the CPU build only
        assert inactive.pop("draft_count").startswith(f"not checked on vLLM {vllm_version()}")
    if _cuda():
        assert inactive == {}
    else:
        assert sorted(inactive) == ["ngram_jit", "nvml", "sleep_pinning", "spec_compat"], inactive


# Pieces whose names were checked on the CPU build only: the GPU build's contract run adds GPU_STUDIES.
NOT_YET_ON_GPU = {"draft_count"}


def test_every_piece_was_checked_on_both_versions_and_the_installed_one_is_among_them():
    assert all(p.checked_on == (GPU_STUDIES, CPU_BUILD) for p in PIECES if p.name not in NOT_YET_ON_GPU)
    assert all(p.checked_on == (CPU_BUILD,) for p in PIECES if p.name in NOT_YET_ON_GPU)
    assert vllm_version() in (GPU_STUDIES, CPU_BUILD)
    assert {p.name for p in PIECES if p.kind is Kind.PATCH} == {"fork_server", "sleep_pinning", "ngram_jit",
                                                                "model_info", "draft_count"}


def test_the_draft_count_is_set_through_vllms_own_lookup_builder():
    """The utility method builds the lookup the scheduler would build for a schedule engine, capped at the
    engine's k, and restores the engine's own."""
    from types import SimpleNamespace

    from runner.vllm import draft_count

    scheduler = SimpleNamespace(dynamic_sd_lookup=None, num_spec_tokens=3,
                                scheduler_config=SimpleNamespace(max_num_seqs=8))
    core = SimpleNamespace(scheduler=scheduler)
    ranges = draft_count.static_ranges(1, max_num_seqs=8)
    assert draft_count._set_draft_count(core, ranges) == {"engine_k": 3, "ks": [1], "lookup": True}
    assert scheduler.dynamic_sd_lookup == [0] + [1] * 8
    assert draft_count._set_draft_count(core, [[1, 2, 3], [3, 8, 2]])["ks"] == [2, 3]
    assert draft_count._set_draft_count(core, [[1, 8, 5]])["ks"] == [3]  # capped at the engine's k, as vLLM does
    assert draft_count._set_draft_count(core, draft_count.OWN) == {"engine_k": 3, "ks": [3], "lookup": False}
    assert scheduler.dynamic_sd_lookup is None
    assert draft_count.checked("0.26.0").startswith("not checked on vLLM 0.26.0")


def test_a_patch_says_when_it_does_not_apply(capsys):
    assert not ngram_jit.install() or _cuda()  # the CPU worker runs in a process of its own
    assert fork_server.use_fork_server(False) is False
    lines = capsys.readouterr().err.splitlines()
    if not _cuda():
        assert any(line.startswith("runner: vllm patch ngram_jit: not applied: CUDA only") for line in lines)
    assert "runner: vllm patch fork_server: not applied: engine_start=spawn: the engine core starts as vLLM has it" \
        in lines


def test_sleep_pinning_says_whether_it_applied(monkeypatch, capsys):
    class Worker:
        def load_model(self): ...

        def compile_or_warm_up_model(self): ...

        def sleep(self, level=1): ...

    class Allocator:
        @classmethod
        def get_instance(cls): ...

    monkeypatch.setattr(sleep_pinning, "_vllm_classes", lambda: (Worker, Allocator))
    assert sleep_pinning.install()

    def renamed():
        raise AttributeError("missing Worker.compile_or_warm_up_model")

    monkeypatch.setattr(sleep_pinning, "_vllm_classes", renamed)
    assert not sleep_pinning.install()
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("runner: vllm patch sleep_pinning: applied (")
    assert lines[1] == ("runner: vllm patch sleep_pinning: not applied: AttributeError: missing "
                        "Worker.compile_or_warm_up_model; the first sleep pins as vLLM has it")


def test_a_renamed_step_field_is_not_read_as_zero(capsys):
    """The stat logger's figures go through the seam: a field vLLM renamed leaves the step uncounted and says so,
    once, instead of counting every step as batch size 0."""
    from types import SimpleNamespace

    from runner.vllm import step_stats

    assert step_stats.step_requests(SimpleNamespace(num_running_reqs=3),
                                    SimpleNamespace(finished_requests=[1])) == (3, 1)
    assert step_stats.step_requests(SimpleNamespace(num_running_reqs=2), None) == (2, 0)
    renamed = SimpleNamespace(running_requests=3)
    assert step_stats.step_requests(renamed, None) is None
    assert step_stats.step_requests(renamed, None) is None
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "vllm read step_stats" in ln]
    assert len(lines) == 1 and "has no integer num_running_reqs" in lines[0] and "stay null" in lines[0]


def test_the_step_logger_reads_scheduler_stats_only_through_the_seam():
    import inspect

    from runner.execution import step_logger

    source = inspect.getsource(step_logger)
    assert "num_running_reqs" not in source and "finished_requests" not in source


def test_the_plans_reading_of_an_engine_argument_agrees_with_the_imported_fields():
    """The plan reads whether vLLM takes per_request_spec_decode_metrics from its arg_utils.py, without importing
    it; here, against AsyncEngineArgs' fields."""
    from runner.plan.engine_args import installed_takes
    from runner.vllm.engine import engine_arg_names, per_request_spec_supported

    assert installed_takes("per_request_spec_decode_metrics") is per_request_spec_supported()
    assert all(installed_takes(name) for name in ("max_model_len", "enable_prefix_caching", "speculative_config"))
    assert installed_takes("not_an_engine_argument") is False
    assert {"max_model_len", "speculative_config"} <= engine_arg_names()
