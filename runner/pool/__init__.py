"""Engine pools (execution.keep_engines): engines that outlive the command that loaded them, as detached, named
Ray actors in the namespace `vllm-sweep-pool-<pool>`, woken by a later command instead of loaded.

One interface on the driver's side, used by a sweep's session and by the `pool` subcommand alike
(runner.pool.pools.EnginePool): claim, park, release, list. The rest of the package:
- identity: what must be equal for a later command to wake an engine (pure), and the Ray names from it;
- member: a pooled engine's lease and idle clock (pure);
- liveness: whether the command holding an engine still runs, through Ray's public API (or: cannot tell);
- actor: the pooled engine actor (actor code: the engine actor plus its pool calls);
- head: the Ray head a pool lives on where no cluster was named.
"""
