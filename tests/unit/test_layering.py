"""Dependencies point one way (docs/reference.md, "Layout"): every import under runner/, top-level or inside a function.

The rules, over `import` statements read with `ast` (no module is imported here):
- models, plan, measurement, sinks and report never import runner.execution (what runs inside the actor) nor
  runner.scheduling (the driver);
- runner.execution (the actor side) never imports runner.scheduling (the driver);
- the driver's pure modules (PURE_DRIVER) import no Ray, not even inside a function;
- plan (pure grid expansion and validation) also never imports runner.sinks or runner.report, except the reader
  of an earlier run's measured acceptance (runner.sinks.measured_acceptance; see EXCEPTIONS);
- report (reports from persisted files only) also never imports runner.sinks, except the Parquet sink's read
  helpers (`from runner.sinks.parquet import has_table, read_frame, ...`; see READ_HELPERS);
- models, measurement and sinks never import runner.report;
- the shared value modules (the result schema, the speculative arm, the SLO) import no runner package, so that
  config, plan, execution, sinks and report can all import them;
- runner.vllm (the seam with vLLM: every import of vLLM's internals, every patch of vLLM or torch) sits low: it
  imports no runner package above it (only the shared values); what a piece needs of the run's config comes in
  as a value; plan, execution, measurement, models and scheduling may import it, report only its pure builders
  (VLLM_PURE: the speculative_config and the `vllm serve` line);
- nothing outside runner.vllm imports vllm, not even inside a function; runner.vllm's pure builders import none;
- only runner/__main__.py imports runner.cli (the entry point sits on top of everything), and only runner.cli
  imports runner.command (the commands' orchestration, just below it);
- numerics (pure decision numerics) imports only the shared values and runner.vllm's rules; traffic (the driver's
  readers of traces, prompt files and chat rendering) imports no runner package; measurement (what the actor
  runs) reads no config, plan, model or persisted result;
- no import cycles between runner's modules, nor between its packages (a package-level loop: a -> b -> a through
  any modules);
- the house has floors (FLOORS, lowest first): each package or top-level module of runner/ stands on one, and
  imports only from floors below its own, never across or back up. The entry point (runner/__main__.py) stands
  above every floor. A new package must be given a floor here.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parents[2] / "runner"

FORBIDDEN = {  # package under runner/ -> what nothing in it may import
    "models": ("runner.execution", "runner.pool", "runner.scheduling", "runner.report", "runner.cli",
               "runner.command"),
    "plan": ("runner.execution", "runner.pool", "runner.scheduling", "runner.sinks", "runner.report", "runner.cli",
             "runner.command"),
    # Pure decision numerics, low down: config/, plan/, report/ and the actor's workloads all read them.
    "numerics": ("runner.traffic", "runner.measurement", "runner.sinks", "runner.config", "runner.models",
                 "runner.plan", "runner.execution", "runner.pool", "runner.scheduling", "runner.report",
                 "runner.cli", "runner.command", "runner.labels", "runner.summary"),
    # The driver's readers of the traffic a run replays: traces, prompt files, chat rendering.
    "traffic": ("runner.numerics", "runner.measurement", "runner.sinks", "runner.config", "runner.models",
                "runner.plan", "runner.execution", "runner.pool", "runner.scheduling", "runner.report",
                "runner.cli", "runner.command", "runner.vllm", "runner.schema", "runner.labels", "runner.summary"),
    # What the actor runs: workloads, their prompts and arrivals, latency math, counters, rows.
    "measurement": ("runner.execution", "runner.pool", "runner.scheduling", "runner.report", "runner.cli",
                    "runner.command", "runner.sinks", "runner.config", "runner.plan", "runner.models"),
    "sinks": ("runner.execution", "runner.pool", "runner.scheduling", "runner.report", "runner.cli",
              "runner.command", "runner.vllm", "runner.config", "runner.plan", "runner.models"),
    "report": ("runner.execution", "runner.pool", "runner.scheduling", "runner.sinks", "runner.cli",
               "runner.command"),
    "execution": ("runner.pool", "runner.scheduling", "runner.report", "runner.cli", "runner.command"),
    # Engine pools: above the actor (a pooled actor is an engine actor), below the driver that claims from them.
    "pool": ("runner.scheduling", "runner.report", "runner.cli", "runner.command"),
    "scheduling": ("runner.report", "runner.cli", "runner.command"),
    "config": ("runner.vllm",),
    "vllm": ("runner.config", "runner.plan", "runner.execution", "runner.measurement", "runner.models",
             "runner.scheduling", "runner.sinks", "runner.report", "runner.cli", "runner.command",
             "runner.numerics", "runner.traffic"),
}
# The floors, lowest first: a package (or top-level module) of runner/ imports only from floors below its own.
FLOORS = (
    ("spec_arm", "slo", "cache"),  # shared values: import no runner package
    ("schema",),  # the one result schema (it names the speculative arm)
    ("vllm",),  # the seam with vLLM
    ("labels",),
    ("numerics", "traffic"),  # pure decision numerics; the driver's readers of traces, prompt files, chat
    ("measurement",),  # what the actor runs
    ("sinks",),  # Parquet, W&B, and reading a run folder's persisted trials back
    ("config",),
    ("models",),
    ("plan",),
    ("execution",),  # the actor side
    ("pool",),
    ("scheduling",),  # the driver
    ("report", "summary"),  # from persisted files only
    ("command",),
    ("cli",),
)
# `python -m runner`: above every floor.
ENTRY_POINTS = ("runner.__main__",)
# The driver's policies and descriptions: plain logic over the plan and the settings, testable without Ray.
PURE_DRIVER = ("order", "residency", "stops", "device", "settings", "describe", "actor_spec", "race", "lane",
               "startup_order")
# The pools' pure modules: identities and names, the lease and its clock.
PURE_POOL = ("identity", "member")
# The one exception: the Parquet sink owns the on-disk layout (part files, then one compacted file per table),
# so reading results back goes through its readers; nothing that writes may be imported.
READ_HELPERS = {"table_path", "parts_dir", "part_files", "has_table", "read_table", "read_frame", "read_rows"}
EXCEPTIONS = {  # (package, forbidden prefix) -> (module it may import, the names it may take from it)
    ("report", "runner.sinks"): ("runner.sinks.parquet", READ_HELPERS),
    # An arm may name an earlier run's measurements (`measured:<run folder>`, `auto:<run folder>`): the plan reads
    # them through the sinks' reader of persisted trials, and nothing that writes.
    ("plan", "runner.sinks"): ("runner.sinks.measured_acceptance", {"measured_rates", "measured_schedule"}),
}
# runner.vllm's pure builders: what the report may import of it (they import no vllm).
VLLM_PURE = ("runner.vllm.spec_config", "runner.vllm.serve")


def module_name(path: Path) -> str:
    parts = path.relative_to(RUNNER.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(RUNNER.rglob("*.py"))}


def imports(name: str) -> list[tuple[int, str, str | None]]:
    """(line, target, name) for every import in the module: `from a import b` gives (a.b, None) when a.b is a
    module, else (a, b); `import a` gives (a, None)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the module's package
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.append((node.lineno, full, None) if full in MODULES else (node.lineno, base, alias.name))
    return found


def within(target: str, prefix: str) -> bool:
    return target == prefix or target.startswith(prefix + ".")


def test_the_walker_sees_lazy_and_top_level_imports():
    """Guards the rules below against passing vacuously: known imports of both kinds are found."""
    assert any(t == "runner.models.source" for _, t, _ in imports("runner.execution.engine"))  # top level
    assert any(t == "runner.models.training" for _, t, _ in imports("runner.models.tiny"))  # inside a function
    assert {"runner.models", "runner.plan", "runner.measurement", "runner.sinks", "runner.report",
            "runner.scheduling.loop"} <= set(MODULES)
    assert any(t == "ray" for _, t, _ in imports("runner.scheduling.loop"))  # inside a function


def allowed(package: str, prefix: str, target: str, imported: str | None) -> bool:
    module, names = EXCEPTIONS.get((package, prefix), (None, set()))
    return target == module and imported in names


def test_the_exception_is_the_read_helpers_only():
    assert allowed("report", "runner.sinks", "runner.sinks.parquet", "read_frame")
    assert not allowed("report", "runner.sinks", "runner.sinks.parquet", "ParquetSink")
    assert not allowed("report", "runner.sinks", "runner.sinks.parquet", None)  # `import runner.sinks.parquet`
    assert not allowed("report", "runner.sinks", "runner.sinks.wandb_sink", "export_run")
    assert not allowed("plan", "runner.sinks", "runner.sinks.parquet", "read_frame")


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_layer_imports_nothing_above_it(package):
    violations = [
        f"{MODULES[name].relative_to(RUNNER.parent)}:{line} imports {target}" + (f".{imported}" if imported else "")
        for name in MODULES if within(name, f"runner.{package}")
        for line, target, imported in imports(name)
        for prefix in FORBIDDEN[package]
        if within(target, prefix) and not allowed(package, prefix, target, imported)
    ]
    assert not violations, "\n".join(violations)


@pytest.mark.parametrize("name", [f"runner.scheduling.{m}" for m in PURE_DRIVER] +
                         [f"runner.pool.{m}" for m in PURE_POOL])
def test_the_drivers_pure_modules_import_no_ray(name):
    assert name in MODULES
    package = name.rpartition(".")[0]
    seen = [name]
    for current in seen:  # what it imports from runner, transitively, must be free of Ray too
        for line, target, _ in imports(current):
            assert not within(target, "ray"), f"{MODULES[current].relative_to(RUNNER.parent)}:{line} imports {target}"
            if target in MODULES and target not in seen and within(target, package):
                seen.append(target)


SHARED_VALUES = ("runner.schema", "runner.spec_arm", "runner.slo")


@pytest.mark.parametrize("module", SHARED_VALUES)
def test_the_shared_values_import_no_runner_package(module):
    found = [f"{line}: {target}" for line, target, _ in imports(module)
             if within(target, "runner") and target not in SHARED_VALUES]
    assert not found, f"{module} imports " + ", ".join(found)


def test_only_the_entry_point_imports_the_cli():
    importers = sorted(name for name in MODULES if name not in ("runner.__main__", "runner.cli")
                       and any(within(t, "runner.cli") for _, t, _ in imports(name)))
    assert not importers


def test_only_the_cli_imports_the_commands():
    importers = sorted(name for name in MODULES if not within(name, "runner.command")
                       and name not in ("runner.cli", *ENTRY_POINTS)
                       and any(within(t, "runner.command") for _, t, _ in imports(name)))
    assert not importers


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of more than one node that reach each other (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycles():
    graph = {name: {t for _, t, _ in imports(name) if t in MODULES and t != name} for name in MODULES}
    assert not strongly_connected(graph)


def room(name: str) -> str | None:
    """The package or top-level module of runner/ a module belongs to (None: an entry point, or runner itself)."""
    if name in ENTRY_POINTS or name == "runner":
        return None
    return name.split(".")[1]


def package_arrows() -> dict[tuple[str, str], list[str]]:
    """(from, to) between runner's packages -> the imports that draw that arrow."""
    arrows: dict[tuple[str, str], list[str]] = {}
    for name in MODULES:
        for line, target, imported in imports(name):
            if not within(target, "runner") or target == "runner":
                continue
            source, dest = room(name), room(target if target in MODULES else f"{target}.{imported}")
            if source and dest and source != dest:
                arrows.setdefault((source, dest), []).append(f"{MODULES[name].relative_to(RUNNER.parent)}:{line} "
                                                           f"imports {target}")
    return arrows


def test_no_package_loop():
    graph: dict[str, set[str]] = {}
    for source, dest in package_arrows():
        graph.setdefault(source, set()).add(dest)
        graph.setdefault(dest, set())
    assert not strongly_connected(graph)


def test_every_package_stands_on_a_floor():
    floored = [room for floor in FLOORS for room in floor]
    assert len(floored) == len(set(floored))
    rooms = {room(name) for name in MODULES} - {None}
    assert rooms == set(floored), f"without a floor: {sorted(rooms - set(floored))}; gone: {sorted(set(floored) - rooms)}"


def test_no_arrow_runs_back_up():
    floor = {room: level for level, rooms in enumerate(FLOORS) for room in rooms}
    found = [f"{source} (floor {floor[source]}) -> {dest} (floor {floor[dest]}): " + "; ".join(lines)
             for (source, dest), lines in sorted(package_arrows().items())
             if floor.get(dest, -1) >= floor.get(source, -1)]
    assert not found, "\n".join(found)


def test_the_floor_rule_is_not_vacuous():
    arrows = package_arrows()
    assert ("measurement", "numerics") in arrows and ("plan", "config") in arrows
    assert room("runner.__main__") is None and room("runner.report.__main__") == "report"
    assert room("runner.numerics.stats") == "numerics" and room("runner.schema") == "schema"


def test_only_the_seam_imports_vllm():
    found = [f"{MODULES[name].relative_to(RUNNER.parent)}:{line} imports {target}"
             for name in MODULES if not within(name, "runner.vllm")
             for line, target, _ in imports(name) if within(target, "vllm")]
    assert not found, "\n".join(found)


def test_the_seam_imports_only_itself_and_the_shared_values():
    below = ("runner.vllm", *SHARED_VALUES)
    found = [f"{MODULES[name].relative_to(RUNNER.parent)}:{line} imports {target}"
             for name in MODULES if within(name, "runner.vllm")
             for line, target, _ in imports(name)
             if within(target, "runner") and not any(within(target, b) for b in below)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("module", VLLM_PURE)
def test_the_seams_pure_builders_import_no_vllm(module):
    found = [f"{line}: {target}" for line, target, _ in imports(module)
             if within(target, "vllm") or (within(target, "runner") and target not in SHARED_VALUES)]
    assert not found, f"{module} imports " + ", ".join(found)


def test_the_report_imports_only_the_seams_pure_builders():
    found = [f"{MODULES[name].relative_to(RUNNER.parent)}:{line} imports {target}"
             for name in MODULES if within(name, "runner.report")
             for line, target, _ in imports(name) if within(target, "runner.vllm") and target not in VLLM_PURE]
    assert not found, "\n".join(found)
