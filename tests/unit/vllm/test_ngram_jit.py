"""The n-gram proposer's kernel compiled on a thread during the init: vLLM's own NgramProposer and kernel (CPU
build), with a stand-in config; the proposer's real call afterwards finds the compiled kernel."""
from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from runner.vllm import ngram_jit

ngram_proposer = pytest.importorskip("vllm.v1.spec_decode.ngram_proposer")


def _config(*, k=3, max_model_len=256, max_num_seqs=8):
    ns = types.SimpleNamespace
    return ns(speculative_config=ns(prompt_lookup_min=2, prompt_lookup_max=5, num_speculative_tokens=k),
              model_config=ns(max_model_len=max_model_len), scheduler_config=ns(max_num_seqs=max_num_seqs),
              parallel_config=ns(tensor_parallel_size=1))


def test_vllms_own_trigger_leaves_the_kernel_uncompiled():
    """Why this module exists: vLLM's `__init__` proposes for empty token lists, which never reach the kernel."""
    kernel = ngram_proposer.batch_propose_numba
    if kernel.signatures:
        pytest.skip("this process compiled the kernel already")
    ngram_proposer.NgramProposer(_config())
    assert kernel.signatures == []


def test_the_kernel_compiled_ahead_is_the_one_the_proposers_call_uses(capsys):
    class Proposer(ngram_proposer.NgramProposer):  # vLLM's class, wrapped without touching it for other tests
        pass

    kernel = ngram_proposer.batch_propose_numba
    ngram_jit.wrap_proposer(Proposer, kernel)
    proposer = Proposer(_config())
    proposer._runner_jit.join(timeout=120)
    assert "runner: n-gram proposer's kernel compiled ahead: done" in capsys.readouterr().err
    compiled = list(kernel.signatures)
    assert compiled, "nothing compiled"

    # The call as vLLM's V1 model runner makes it: the input batch's int32 buffers (torch tensors' numpy views).
    tokens = torch.zeros((8, 256), dtype=torch.int32).numpy()
    tokens[0, :12] = [1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4]
    lengths = torch.zeros(8, dtype=torch.int32).numpy()
    lengths[0] = 12
    drafts = proposer.propose(3, [[4], []], lengths, tokens)
    assert drafts[0] == [1, 2, 3] and drafts[1] == []
    assert list(kernel.signatures) == compiled  # no second compile: the types were the call's own


def test_a_proposer_whose_buffers_differ_leaves_the_first_decode_as_vllm_has_it(capsys):
    class Proposer:
        def __init__(self):
            self.min_n = 2  # no max_n, k or buffers: not vLLM's NgramProposer

    ngram_jit.wrap_proposer(Proposer, ngram_proposer.batch_propose_numba)
    Proposer()._runner_jit.join(timeout=30)
    assert "runner: n-gram proposer's kernel compiled ahead: failed (AttributeError" in capsys.readouterr().err
