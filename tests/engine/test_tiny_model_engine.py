"""The embedded tiny MTP model on one real engine: trained weights load and drafts are accepted."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.engine


@pytest.mark.engine
def test_vllm_accepts_mtp_drafts_of_the_trained_model():
    """One engine (k=1) in a child process: trained weights load, drafts are accepted, greedy is repeatable."""
    from runner.models.measure_acceptance import measure_in_subprocess
    from runner.models.tiny import ensure_tiny_model

    ensure_tiny_model()  # the shipped weights (trains only where the code's spec or recipe moved)
    result = measure_in_subprocess(k=1, prompts=4, input_len=96, output_len=32)
    assert result.draft_tokens > 0
    assert result.acceptance_rate > 0.2, result
    assert result.deterministic
