"""The holder's liveness: an answer is alive, Ray's word that the holder actor died is gone, and anything else
is unknown with its reason; unknown is never taken for alive nor gone (a claim is refused saying so)."""
from __future__ import annotations

import asyncio

import pytest

from runner.pool.liveness import check_holder
from runner.pool.member import HolderCheck, Liveness, Membership, PoolEntry


class Holder:
    def __init__(self, answer):
        self.alive = self
        self.answer = answer

    def remote(self):
        return self._call()

    async def _call(self):
        if self.answer == "hang":
            await asyncio.sleep(60)
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer


def check(answer, timeout_s=0.2) -> HolderCheck:
    return asyncio.run(check_holder(Holder(answer), timeout_s=timeout_s))


def test_an_answer_is_alive():
    assert check(True).liveness is Liveness.ALIVE


def test_a_dead_holder_actor_is_gone():
    from ray.exceptions import ActorDiedError

    assert check(ActorDiedError()).liveness is Liveness.GONE


@pytest.mark.parametrize("answer,why", [
    ("hang", "did not answer within"),
    (RuntimeError("the GCS is down"), "check failed: RuntimeError: the GCS is down"),
])
def test_anything_else_is_unknown_with_its_reason(answer, why):
    result = check(answer)
    assert result.liveness is Liveness.UNKNOWN and why in result.reason


def test_an_unavailable_holder_actor_is_unknown_not_gone():
    from ray.exceptions import ActorUnavailableError

    result = check(ActorUnavailableError("restarting", b"\x00" * 16))
    assert result.liveness is Liveness.UNKNOWN and "unavailable" in result.reason


def test_no_holder_actor_to_ask_is_unknown():
    result = asyncio.run(check_holder(None))
    assert result.liveness is Liveness.UNKNOWN and "no holder actor" in result.reason


def test_a_claim_is_refused_saying_the_check_is_unavailable():
    m = Membership(entry=PoolEntry(pool="study", name="engine-x", identity={}, summary="e", ttl_s=60.0))
    m.hold("01000000", None)
    refusal = m.refusal("02000000", HolderCheck(liveness=Liveness.UNKNOWN, reason="holder actor did not answer"))
    assert "cannot be checked (holder actor did not answer)" in refusal
    assert "fix: vllm-sweep pool release study" in refusal
    assert m.refusal("02000000") is not None  # not checked: refused, never taken as gone
