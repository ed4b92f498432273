import pytest

from runner.config.sections import run_config
from runner.spec_arm import SpecArm, spec_arms
from runner.plan.grid import PlanError, build_plan, stable_hash

GRID = {"spec_method": ["off", "mtp"], "num_speculative_tokens": [1, 2, 3], "enable_prefix_caching": [True],
        "gpu_memory_utilization": [0.9], "max_model_len": [1024], "concurrency": [1, 4]}


def plan(**over):
    kwargs = dict(sweep_name="s", model="m", grid=GRID, workloads={"decode": {"input_len": 8, "output_len": 4}},
                  engine_args={"enforce_eager": True})
    kwargs.update(over)
    return build_plan(run_config(**kwargs))


def test_off_takes_no_k_so_it_appears_once():
    assert [a.label for a in spec_arms(methods=["off", "mtp"], ks=[1, 2, 3])] == ["off", "mtp:1", "mtp:2", "mtp:3"]
    assert spec_arms(methods=[False], ks=[2]) == [SpecArm(method="off", k=0)]  # YAML's bare off


def test_demo_grid_expands_to_four_engines_and_eight_trials():
    p = plan()
    assert len(p.engines) == 4
    assert len(p.trials) == 8
    assert {len(p.trials_of(e.engine_id)) for e in p.engines} == {2}


def test_ids_are_stable_and_distinct():
    a, b = plan(), plan()
    assert [t.trial_id for t in a.trials] == [t.trial_id for t in b.trials]
    assert len({t.trial_id for t in a.trials}) == len(a.trials)
    assert len({e.engine_id for e in a.engines}) == len(a.engines)


def test_ids_change_with_any_setting():
    base = {e.engine_id for e in plan().engines}
    other = {e.engine_id for e in plan(engine_args={"enforce_eager": False}).engines}
    assert base.isdisjoint(other)


def test_workload_list_values_are_axes():
    p = plan(workloads={"decode": {"input_len": [8, 16], "output_len": 4}})
    assert len(p.trials) == 16
    assert {t.params.input_len for t in p.trials} == {8, 16}


def test_trials_carry_their_point_parsed_once_and_given_as_written():
    """The actor runs the parsed params as they come; the point as given keys the id and workload_params_json
    (a default the sweep did not name stays out, so a new default moves no id)."""
    import pickle

    from runner.measurement.workloads.decode import DecodeParams

    trial = plan(workloads={"decode": {"input_len": 8, "output_len": 4}}).trials[0]
    assert isinstance(trial.params, DecodeParams) and (trial.params.input_len, trial.params.seed) == (8, 0)
    assert trial.params_json == '{"input_len": 8, "output_len": 4}'
    copy = pickle.loads(pickle.dumps(trial))  # as Ray sends it to the actor
    assert copy == trial and copy.params == trial.params and copy.params_json == trial.params_json


def test_a_point_its_workload_cannot_parse_is_a_plan_error():
    with pytest.raises(PlanError, match="fix: remove or rename workload.decode.input_lenn"):
        plan(workloads={"decode": {"input_lenn": 8}})


def test_engine_axes_multiply_engines():
    p = plan(engine_axes={"max_num_seqs": [8, 16]})
    assert len(p.engines) == 8
    assert {e.vllm_args.as_dict()["max_num_seqs"] for e in p.engines} == {8, 16}


def test_duplicate_axis_values_are_refused():
    with pytest.raises(PlanError, match="twice"):
        plan(grid={**GRID, "concurrency": [1, 1]})


def test_repeats_make_distinct_trials():
    p = plan(repeats=3)
    assert len(p.trials) == 24
    assert {t.repeat for t in p.trials} == {0, 1, 2}


def test_per_workload_concurrency_overrides_the_grid():
    p = plan(workloads={"decode": {"input_len": 8, "output_len": 4, "concurrency": [2]}})
    assert {t.concurrency for t in p.trials} == {2}


def test_stable_hash_ignores_key_order():
    assert stable_hash({"a": 1, "b": 2}) == stable_hash({"b": 2, "a": 1})


def test_ids_come_from_an_explicit_identity_and_are_pinned():
    """Ids of earlier runs must not move (resume depends on them): a new EngineSettings column is not identity."""
    import dataclasses

    from runner.plan.grid import ENGINE_IDENTITY, engine_identity
    from runner.schema import EngineSettings

    plan = build_plan(run_config(sweep_name="pin", model="tiny-mtp",
                      grid={"spec_method": ["off", "mtp"], "num_speculative_tokens": [2], "max_model_len": [1024],
                            "concurrency": [1, 4]},
                      workloads={"decode": {"input_len": 128, "output_len": 64}, "second_request": {"api": "async"}},
                      engine_args={"enforce_eager": True, "seed": 0}, spec_extra={"mtp": {}}))
    assert [e.engine_id for e in plan.engines] == ["e-ab8375ed530e", "e-8b9b23816727"]
    assert [t.trial_id for t in plan.trials][:3] == ["t-839c15f6b594", "t-705b50d3304f", "t-1db7132d6650"]
    offline = build_plan(run_config(sweep_name="pin", model="tiny-mtp",
                                    grid={"spec_method": ["off"], "max_model_len": [1024]},
                                    workloads={"decode": {"api": "offline"}}, engine_args={}))
    assert [e.engine_id for e in offline.engines] == ["e-698f9f656846"]
    # Every identity field is a settings field; a settings field outside the identity leaves ids alone.
    assert set(ENGINE_IDENTITY) <= {f.name for f in dataclasses.fields(EngineSettings)}
    assert set(engine_identity(plan.engines[0].settings)) == set(ENGINE_IDENTITY)
