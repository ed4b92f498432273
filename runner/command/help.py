"""`vllm-sweep --help`: what the command is for, examples to copy, the config groups and the shipped studies,
read from the config folder itself (so a new group option or study shows without an edit here)."""
from __future__ import annotations

from typing import Iterable

import yaml

from runner.config.location import conf_root

PURPOSE = """\
vllm-sweep: runs vLLM engine configurations (speculative decoding, prefix caching, any engine argument)
against workloads on Ray, repeats spread over the sweep, and answers which one serves the traffic best.
Results (Parquet, report.md) go to outputs/<sweep>/<run>/; the same command resumes a stopped run."""

USAGE = """\
usage: vllm-sweep [KEY=VALUE | GROUP=OPTION ...]   a sweep (Hydra overrides of conf/config.yaml)
       vllm-sweep pool {list,release} ...          engines kept between commands (execution.keep_engines)
       vllm-sweep report RUN_DIR [RUN_DIR ...]      the report of finished runs, compared"""

EXAMPLES = """\
examples (add dry_run=true to print the plan and start nothing):
  vllm-sweep                                        the demo: the embedded model on this CPU
  vllm-sweep sweep=mtp_vs_prefix_cache sweep.preset=cpu
                                                    a named study, scaled for CPU
  vllm-sweep engine=gpu model=hf model.path=<folder or hub id> sweep=draft_count
                                                    your own model on your GPU
  vllm-sweep engine=gpu model=hf model.path=<folder or hub id> cluster.address=HOST:PORT \\
      engine.tensor_parallel_size=2                 many GPUs: a running Ray cluster, 2 GPUs per engine
  vllm-sweep workload=[trace,prompt_set] workload.trace.trace_file=<mooncake.jsonl> \\
      workload.prompt_set.prompt_file=<prompts.jsonl> '~workload.decode' '~workload.multi_turn'
                                                    your traffic: a trace replayed, a prompt set (the demo's
                                                    own workloads dropped)"""

# What each group of conf/ chooses (its options are read from the folder).
GROUPS = {
    "sweep": "a study (below), or your own: <folder>/sweep/<name>.yaml",
    "model": "the checkpoint; hf: model.path=<folder or hub id>",
    "engine": "the device; engine.args.<vLLM argument>=V for every engine",
    "spec": "speculative_config extras: spec.<method>.<key>=V",
    "workload": "",  # its options fill the line; the list form is under "more"
    "cluster": "cluster.address=HOST:PORT joins a running Ray cluster",
    "tracking": "W&B export; Parquet stays the record",
}

MORE = """\
more: run=<name> starts a fresh run; the same name resumes (more axis values or repeats extend it; another
  config is refused, naming the keys that differ);
  workload=[decode,trace] and workload.<name>.<param>=V (a list is an axis), sweep.grid.<axis>=[...], sweep.repeats=N,
  "sweep.engine_axes={kv_cache_dtype:[auto,fp8]}" (any vLLM engine argument); README.md has the rest.
  Hydra's own flags work as ever: --cfg job (the composed config), --info, -m/--multirun, --config-dir DIR,
  --hydra-help."""


def _options(folder) -> list[str]:
    return sorted(entry.name[:-len(".yaml")] for entry in folder.iterdir() if entry.name.endswith(".yaml"))


def _defaults(root) -> dict[str, str]:
    """The option each group starts from, as conf/config.yaml's defaults list names it."""
    chosen = {}
    for item in yaml.safe_load(root.joinpath("config.yaml").read_text()).get("defaults", []):
        if isinstance(item, dict):
            (group, option), = item.items()
            chosen[group] = ",".join(option) if isinstance(option, list) else str(option)
    return chosen


def _group_lines(root) -> list[str]:
    defaults = _defaults(root)
    lines = []
    for group, what in GROUPS.items():
        folder = root.joinpath(group)
        if not folder.is_dir():
            continue
        options = _options(folder)
        first = [o for o in defaults.get(group, "").split(",") if o in options]
        ordered = first + [o for o in options if o not in first]
        shown = ", ".join(ordered) if group != "sweep" else defaults.get(group, "")
        lines.append(f"  {group:<9} {shown}" + (f"  - {what}" if what else ""))
    return lines


def study_purpose(text: str) -> str:
    """A sweep file's `sweep.description`, else the first line of its leading comment."""
    data = yaml.safe_load(text) or {}
    description = ((data.get("sweep") or {}).get("description") or "").strip()
    if description:
        return description
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("#"):
            break
        line = line.lstrip("#").strip()
        if line and not line.startswith("@package"):
            return line.rstrip(":,")
    return ""


def _study_lines(root) -> list[str]:
    folder = root.joinpath("sweep")
    entries = sorted((e for e in folder.iterdir() if e.name.endswith(".yaml")), key=lambda e: e.name)
    width = max([len(e.name) - len(".yaml") for e in entries] or [0])
    return [f"  {e.name[:-len('.yaml')]:<{width}}  {study_purpose(e.read_text())}" for e in entries]


def help_text() -> str:
    root = conf_root()
    return "\n".join([
        PURPOSE, "", USAGE, "", EXAMPLES, "",
        "config groups (GROUP=OPTION; the default first):", *_group_lines(root), "",
        "studies (sweep=NAME; sweep.preset=cpu scales one for CPU where it has presets):", *_study_lines(root), "",
        MORE,
    ])


def wants_help(argv: Iterable[str]) -> bool:
    return any(arg in ("-h", "--help") for arg in argv)
