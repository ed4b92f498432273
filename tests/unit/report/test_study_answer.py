"""One answer per study, read from the saved config: a rate search deploys by its highest rate (one repeat per
probe is no "too few repeats"), a lone arm deploys nothing, a grid by its per-point decisions. Every output —
answer.json, recommendation.yaml, the Recommendation table — names the same deploy, with no NaN anywhere and no
benchmark-only setting in the serve line."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import yaml

from runner.report.build import write_report
from runner.report.study_answer import Study, StudyKind
from tests.support.results import Sweep

PROFILE = json.dumps([0.86, 0.74, 0.64])
DURATION = 10.0
# TTFT per request (s) at each offered rate, one probe each (probes stop once decided); inf: saturation.
OFF_TTFTS = {2.0: [0.1] * 10, 6.5: [0.1] * 9 + [0.3], 11.4: [0.2] * 8 + [0.4] * 2, 15.2: [0.2] * 7 + [0.45] * 3,
             18.9: [0.3] * 7 + [0.48] * 3, 21.7: [0.3] * 6 + [0.49] * 4, 23.4: [0.4] * 5 + [0.9] * 5,
             math.inf: [3.0] * 10}
MTP_TTFTS = {2.6: [0.1] * 10, 8.2: [0.1] * 10, 14.5: [0.1] * 9 + [0.3], 19.3: [0.2] * 8 + [0.4] * 2,
             22.3: [0.2] * 7 + [0.45] * 3, 25.2: [0.3] * 6 + [0.49] * 4, 27.1: [0.4] * 5 + [1.1] * 5,
             math.inf: [4.0] * 10}


def _h200_like_rate_search() -> Sweep:
    """Shaped like a rate search on the GPU: dummy weights, off against mtp:3 at forced acceptance, each offered
    rate probed once, outputs of random weights (a distinct-token share far below real text's)."""
    s = Sweep(load_format="dummy")
    s.engine("off")
    s.engine("mtp:3", spec_acceptance_profile=PROFILE)
    for arm, ttfts in (("off", OFF_TTFTS), ("mtp:3", MTP_TTFTS)):
        for rate, values in ttfts.items():
            requests = [{"session": i, "prompt_tokens": 1024, "output_tokens": 256, "ttft_s": v, "tpot_s": 0.01,
                         "e2e_s": v + 2.0, "output_hash": f"h{i}"} for i, v in enumerate(values)]
            s.trial(arm, params={"input_len": 1024, "output_len": 256, "arrival": "poisson", "request_rate": rate},
                    requests=requests, tok_s=30.0 if arm == "off" else 58.0, arrival="poisson",
                    offered_rate_req_s=rate, duration_s=DURATION, ttft_p99_s=max(values), ttft_s=sorted(values)[5],
                    request_throughput_req_s=min(rate, 19.0 if arm == "off" else 26.0),
                    goodput_req_s=sum(v <= 0.5 for v in values) / DURATION, client_behind=math.isinf(rate),
                    distinct_token_share=0.02, spec_acceptance_profile=PROFILE if arm != "off" else None)
    return s


RATE_CONFIG = {"slo": {"ttft": 500, "percentile": 99}, "model": {"load_format": "dummy", "path": "org/model"},
               "sweep": {"adaptive": "rate_search", "repeats": 3, "question": None,
                         "arms": [{"spec_method": "off"}, {"spec_method": "mtp", "num_speculative_tokens": 3}]}}


def _grid(arms: dict[str, float], *, repeats: int = 3) -> Sweep:
    """Decode at 1 and 4 sessions; each arm's tok/s per session as given (± 0.5 % over repeats)."""
    s = Sweep()
    for arm in arms:
        s.engine(arm)
    for arm, tok_s in arms.items():
        for c in (1, 4):
            for r in range(repeats):
                s.trial(arm, concurrency=c, repeat=r, tok_s=tok_s * (1 + 0.005 * (r - 1)))
    return s


def _write(tmp_path: Path, sweep: Sweep, config: dict):
    run_dir = sweep.write(tmp_path / "run")
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    report = write_report(run_dirs=[run_dir], out_dir=tmp_path / "out")
    out = tmp_path / "out"
    texts = {name: (out / name).read_text() for name in ("report.md", "recommendation.yaml", "answer.json")}
    return report, texts, yaml.safe_load(texts["recommendation.yaml"]), json.loads(texts["answer.json"])


def _recommendation_table_deploy(report_md: str) -> dict[str, str]:
    """The Recommendation section's deploy column, by workload."""
    section = report_md.split("## Recommendation", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| workload")]
    return {cells[1].strip(): cells[2].strip() for cells in (row.split("|") for row in rows)}


def _one_deploy_everywhere(texts: dict, recommended: dict, answer: dict) -> dict[str, str | None]:
    table = _recommendation_table_deploy(texts["report.md"])
    deploy = {}
    for workload, block in answer["deploy"].items():
        choice = block["choice"]
        assert recommended["workloads"][workload]["choice"] == choice
        assert table[workload] == (choice if choice else f"none: {block['why_none']}")
        deploy[workload] = choice
    for name, text in texts.items():
        assert not re.search(r"\bnan\b", text, flags=re.IGNORECASE), name
    return deploy


def test_the_study_is_read_from_the_saved_config():
    assert Study.of(RATE_CONFIG).kind is StudyKind.RATE_SEARCH
    assert Study.of({"sweep": {"adaptive": "predict_schedule"}}).kind is StudyKind.PREDICT_SCHEDULE
    grid = Study.of({"sweep": {"adaptive": None, "grid": {"num_speculative_tokens": [1, 2, 3]}}})
    assert grid.kind is StudyKind.GRID and grid.draft_counts == (1, 2, 3)


def test_a_rate_search_deploys_mtp3_with_a_production_serve_line(tmp_path):
    report, texts, recommended, answer = _write(tmp_path, _h200_like_rate_search(), RATE_CONFIG)
    assert _one_deploy_everywhere(texts, recommended, answer) == {"decode": "mtp:3"}
    block = answer["deploy"]["decode"]
    assert block["answerer"] == "highest rate within the SLO" and block["draft_count"] == 3
    serve = block["vllm_serve"]
    assert serve.startswith("vllm serve org/model") and '"method":"mtp"' in serve and '"num_speculative_tokens":3' in serve
    assert "synthetic" not in serve and "dummy" not in serve  # production never runs benchmark-only settings
    assert block["measured_with"]["speculative_config.rejection_sample_method"] == "synthetic"
    assert block["measured_with"]["load_format"] == "dummy"
    assert recommended["workloads"]["decode"]["vllm_serve"] == serve
    # The probes decide by their own intervals: one repeat each is not "too few", forced acceptance not degenerate.
    blocking = " ".join(answer["blocking"])
    assert "Too few repeats" not in blocking and "Degenerate" not in blocking and "Dummy weights" in blocking
    assert "bracket of measured rates" in block["how_sure"]
    assert "draft_count" not in recommended["workloads"]["decode"]  # no choice per offered rate
    assert not len(report.analysis.crossovers)  # arms that never met at one rate do not flip
    assert report.analysis.verdict.iloc[-1].choice == "mtp:3"


def test_a_lone_arm_is_a_measurement_not_a_choice(tmp_path):
    _, texts, recommended, answer = _write(tmp_path, _grid({"off": 100.0}), {"sweep": {"repeats": 3}})
    assert _one_deploy_everywhere(texts, recommended, answer) == {"decode": None}
    block = answer["deploy"]["decode"]
    assert block["vllm_serve"] is None and "only off measured" in block["why_none"]
    assert "vllm_serve" not in recommended["workloads"]["decode"]
    assert answer["answer"][0]["deploy"].startswith("none: only off measured")


def test_a_grid_deploys_its_per_point_choice(tmp_path):
    _, texts, recommended, answer = _write(tmp_path, _grid({"off": 100.0, "mtp:2": 130.0}),
                                           {"sweep": {"repeats": 3, "grid": {"num_speculative_tokens": [2]}}})
    assert _one_deploy_everywhere(texts, recommended, answer) == {"decode": "mtp:2"}
    block = answer["deploy"]["decode"]
    assert block["answerer"].startswith("per-point") and block["draft_count"] == 2 and block["vllm_serve"]


def test_a_grid_with_one_repeat_says_so_and_deploys_nothing(tmp_path):
    _, texts, recommended, answer = _write(tmp_path, _grid({"off": 100.0, "mtp:2": 130.0}, repeats=1),
                                           {"sweep": {"repeats": 1}})
    assert _one_deploy_everywhere(texts, recommended, answer) == {"decode": None}
    assert any("Too few repeats" in b for b in answer["blocking"])


def test_a_predict_schedule_study_is_answered_point_by_point(tmp_path):
    _, texts, recommended, answer = _write(tmp_path, _grid({"off": 100.0, "mtp:1": 90.0}),
                                           {"sweep": {"repeats": 3, "adaptive": "predict_schedule"}})
    assert _one_deploy_everywhere(texts, recommended, answer) == {"decode": "off"}
    assert answer["deploy"]["decode"]["draft_count"] is None


@pytest.mark.parametrize("value, expected", [(math.nan, None), (math.inf, "inf"), ([1.0, math.nan], [1.0, None])])
def test_no_nan_reaches_yaml_or_json(value, expected):
    from runner.report.study_answer import finite_or_none

    assert finite_or_none({"x": value}) == {"x": expected}
