"""Settings that reach vLLM (spec.<method> extras, the model folder, prompt files), names that become paths and
addresses: refused before anything starts, each with its fix, through the functions the CLI calls."""
from __future__ import annotations

import pytest

from runner.config.checks import address_problem, plain_name_problem

from tests.support.malformed import INPUTS, with_inputs, write_inputs
from tests.support.plans import plan_error


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return write_inputs(tmp_path_factory.mktemp("inputs"))


@pytest.mark.parametrize("case", INPUTS, ids=[" ".join(c[0]) for c in INPUTS])
def test_refused_with_its_fix(case, inputs):
    overrides, message, fix = with_inputs(case, inputs)
    error = plan_error(overrides)
    assert message in error, error
    assert fix in error, error


ACCEPTED = [
    ["model=hf", "model.path={inputs}/model"],
    ["model=hf", "model.path={inputs}/no_tokenizer", "model.tokenizer={inputs}/model"],
    ["++spec.ngram.prompt_lookup_max=8", "++spec.mtp.enforce_eager=true"],
    ["++workload.decode.prompt_source=jsonl", "++workload.decode.prompt_file={inputs}/good.jsonl"],
    ["run=baseline-2.v1", "sweep.name=my_sweep"],
    ["cluster.address=auto"],
    ["cluster.address=head-node.local:6379"],
]


@pytest.mark.parametrize("overrides", ACCEPTED, ids=[" ".join(a) for a in ACCEPTED])
def test_accepted(overrides, inputs):
    (inputs / "good.jsonl").write_text('{"prompt": "a"}\n\n{"prompt_token_ids": [5, 6]}\n"plain"\n')
    overrides, _, _ = with_inputs((overrides, "", ""), inputs)
    assert plan_error(overrides) == ""


@pytest.mark.parametrize("address,ok", [
    (None, True), ("auto", True), ("127.0.0.1:6379", True), ("ray://head:10001", True), ("[::1]:6379", True),
    ("head", False), ("head:0", False), ("head:65536", False), ("head:65535", True), ("[nope]:1", False),
    ("two words:1", False),
])
def test_address_form(address, ok):
    assert (address_problem(address) is None) == ok


@pytest.mark.parametrize("name,ok", [
    ("default", True), ("run-2_b.c", True), (".", False), ("..", False), ("a/b", False), ("", False),
    ("/abs", False), ("a b", False), ("..a", True),
])
def test_plain_names(name, ok):
    assert (plain_name_problem(name, where="run", example="run-1") is None) == ok
