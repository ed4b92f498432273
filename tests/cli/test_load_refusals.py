"""Bad production-shaped load through `python -m runner`: a rate ≤ 0, a trace with unsorted or negative timestamps,
a prompt file not in its declared format, a mix naming a category the file lacks, open-loop arrivals on the offline
API. Refused before anything starts, naming the line and the override that fixes it."""
from __future__ import annotations

import json
from pathlib import Path


QUESTIONS = Path(__file__).resolve().parents[1] / "fixtures" / "load" / "questions_3cat.jsonl"


def refuse(cli, tmp_path, *overrides) -> str:
    proc = cli("dry_run=false", "tracking=none", "run=bad", *overrides, output_root=tmp_path / "out")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert not list((tmp_path / "out").rglob("*.parquet")) and not list((tmp_path / "out").rglob("logs"))
    return proc.stderr


def trace(tmp_path, name, timestamps) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps({"timestamp": t, "input_length": 8, "output_length": 2, "hash_ids": [1]}) + "\n"
                            for t in timestamps))
    return path


def test_bad_rate_unsorted_trace_and_a_misdeclared_prompt_file_are_refused_at_once(tmp_path, warm_cli):
    unsorted = trace(tmp_path, "unsorted.jsonl", [0, 40, 30])
    err = refuse(warm_cli, tmp_path, "workload=[decode,trace,prompt_set]", "workload.decode.arrival=poisson",
                 "workload.decode.request_rate=[2,0]", f"workload.trace.trace_file={unsorted}",
                 f"workload.prompt_set.prompt_file={QUESTIONS}", "workload.prompt_set.prompt_format=sharegpt")
    assert "request_rate=0 must be > 0 req/s" in err and "fix: workload.decode.request_rate=" in err
    assert "unsorted.jsonl line 3: timestamp 30 is before line 2's 40" in err
    assert "fix: workload.trace.trace_file=" in err
    assert "questions_3cat.jsonl line 1: no 'conversations' list: not ShareGPT" in err
    assert "prompt_format=mt_bench) (fix: workload.prompt_set.prompt_format=mt_bench)" in err


def test_a_mix_naming_a_missing_category_a_negative_timestamp_and_offline_arrivals_are_refused(tmp_path, warm_cli):
    negative = trace(tmp_path, "negative.jsonl", [-5, 0])
    err = refuse(warm_cli, tmp_path, "workload=[decode,trace,prompt_set]", "workload.decode.arrival=gamma",
                 "workload.decode.request_rate=inf", "workload.decode.api=offline",
                 f"workload.trace.trace_file={negative}", f"workload.prompt_set.prompt_file={QUESTIONS}",
                 "workload.prompt_set.prompt_format=mt_bench", "workload.prompt_set.mix={code:1,maths:2}")
    assert "names category 'maths', which the prompt file lacks; it has: code, prose, counting" in err
    assert "fix: workload.prompt_set.mix=" in err
    assert "negative.jsonl line 1: timestamp=-5 is negative" in err
    assert "fix: workload.decode.api=async" in err


PUBLIC = Path(__file__).resolve().parents[1] / "fixtures" / "public"


def test_an_over_long_trace_and_files_in_another_format_are_refused_naming_their_sizes_and_format(tmp_path,
                                                                                                  warm_cli):
    sharegpt_as_jsonl = tmp_path / "chats.jsonl"
    sharegpt_as_jsonl.write_text((PUBLIC / "sharegpt_glaive_toolcall_12.json").read_text())
    err = refuse(warm_cli, tmp_path, "workload=[trace,prompt_set]", "sweep.grid.max_model_len=[32768]",
                 f"workload.trace.trace_file={PUBLIC / 'mooncake_conversation_200.jsonl'}",
                 "workload.trace.max_requests=14", f"workload.prompt_set.prompt_file={sharegpt_as_jsonl}")
    assert ("1 of the 14 requests replayed exceed max_model_len=32768 (the first at line 12: 87169 in + 402 out = "
            "87571 tokens; the longest needs 87571) (fix: workload.trace.over_length=skip or =clip") in err
    assert "chats.jsonl line 1: the file is one JSON value over several lines, not one a line (it looks like " \
           "ShareGPT: prompt_format=sharegpt) (fix: workload.prompt_set.prompt_format=sharegpt)" in err
    err = refuse(warm_cli, tmp_path, "workload=[trace]",
                 f"workload.trace.trace_file={PUBLIC / 'azure_llm_conv_2023_199.csv'}")
    assert "(it looks like azure: trace_format=azure) (fix: workload.trace.trace_format=azure)" in err


def test_a_prompt_longer_than_the_model_takes_is_refused_with_its_count_line_and_fix(tmp_path, warm_cli):
    long = tmp_path / "long.jsonl"
    long.write_text(json.dumps({"category": "short", "turns": ["Hi."]}) + "\n"
                    + json.dumps({"category": "long", "turns": ["word " * 400]}) + "\n")
    err = refuse(warm_cli, tmp_path, "workload=[prompt_set]", "~workload.decode",
                 f"workload.prompt_set.prompt_file={long}", "workload.prompt_set.prompt_format=mt_bench",
                 "workload.prompt_set.output_len=32", "sweep.grid.max_model_len=[256]")
    assert "1 conversation(s) send a prompt (chat_template, history included) over 224 tokens" in err, err[-2000:]
    assert "long.jsonl line 2 turn 1: " in err and "over_length=clip" in err
    assert "fix: sweep.grid.max_model_len=[1024]" in err  # the next power of two that holds it
