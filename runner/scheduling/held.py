"""What one command owns across its stages (a plain sweep is a study of one stage): its engine actors (their logs,
the engines retiring, the engine pool's side), the lanes' placement-group bundles (removing a group would kill the
engines in it), the first actor's memory report, and what each lane left loaded when its stage ended.

Each stage has its own Scheduler and lanes, and only plans trials. Where later stages may follow (an adaptive
study), a lane's engines stay loaded when its stage ends: a lane of the next stage with the same key (its bundle,
or its index on CPU, whose cores are bound per lane) starts with them as its residents, so that an engine loads at
most once per command; they go on the usual way (woken for their turn, evicted least-soon-needed for room,
retired when the command ends). Where none may follow, a lane's engines retire as it ends.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from runner.scheduling.actors import EngineActors, bundle_key
from runner.scheduling.cluster import LaneBundles
from runner.scheduling.lane import Lane, Resident


@dataclass(kw_only=True)
class HeldEngines:
    actors: EngineActors
    bundles: LaneBundles = field(default_factory=LaneBundles)
    left: dict[str, dict[str, Resident]] = field(default_factory=dict)  # lane key -> engine_id -> resident
    memory: Optional[dict] = None  # the first actor's report of its node's memory: plans later stages' lanes
    reserved: list[tuple] = field(default_factory=list)  # the bundles, once reserved
    width: int = 0  # GPUs per bundle

    @staticmethod
    def key(lane: Lane) -> str:
        return bundle_key(lane.bundle) if lane.bundle is not None else f"lane-{lane.index}"

    def engines_left(self) -> set[str]:
        return {engine_id for residents in self.left.values() for engine_id in residents}

    def leave(self, lane: Lane, *, keep: bool) -> None:
        """The lane's stage is over: with `keep` (later stages may follow) its resident engines stay loaded for
        them, out of the lane; else they stay in the lane, for it to retire."""
        if keep and lane.residents:
            self.left.setdefault(self.key(lane), {}).update(lane.residents)
            lane.residents = {}

    def take(self, lane: Lane) -> None:
        """A new stage's lane starts with what the lane of its key left loaded."""
        lane.residents = self.left.pop(self.key(lane), {})

    def arrange(self, per_lane: list[list]) -> list[list]:
        """The stage's lanes (each a list of steps) reordered so that lane i gets the steps whose engines lane i
        left loaded, as far as a reordering of whole lanes allows (lanes are alike but for their bundle); lanes
        with no steps are dropped then. Nothing left loaded: as they are."""
        if not self.left:
            return per_lane
        per_lane = [steps for steps in per_lane if steps]
        if len(per_lane) <= 1:
            return per_lane
        held = [set(self.left.get(f"lane-{i}", {})) | set(self.left.get(self._bundle_key(i), {}))
                for i in range(len(per_lane))]
        free = list(range(len(per_lane)))
        order: list[Optional[int]] = [None] * len(per_lane)
        for i in sorted(range(len(per_lane)), key=lambda i: -len(held[i])):
            best = max(free, key=lambda j: len(held[i] & {s.engine_id for s in per_lane[j]}))
            order[i] = best
            free.remove(best)
        return [per_lane[j] for j in order]

    def _bundle_key(self, index: int) -> str:
        return bundle_key(self.reserved[index]) if index < len(self.reserved) else ""

    def bundles_for(self, *, lanes: int, width: int, timeout_s: float, detached_name: Optional[str]) -> list[tuple]:
        """The lanes' bundles: those an earlier stage reserved where they serve (as many or fewer lanes of the same
        width), else fresh ones (the engines in the old group go first: removing it would kill them)."""
        if self.reserved and width == self.width and lanes <= len(self.reserved):
            return self.reserved[:lanes]
        if self.reserved:
            self.drop()
        self.reserved = self.bundles.reserve(lanes=lanes, width=width, timeout_s=timeout_s,
                                             detached_name=detached_name)
        self.width = width
        return self.reserved

    def left_actors(self) -> list:
        return [r.actor for residents in self.left.values() for r in residents.values()]

    def drop(self) -> None:
        """Every engine left loaded is shut down (bounded), and the bundles released."""
        for residents in self.left.values():
            for resident in residents.values():
                self.actors.retire(resident.engine, resident.actor)
        self.left.clear()
        self.actors.reap(wait=True)
        self.bundles.release()
        self.reserved, self.width = [], 0

    def abandoned(self) -> list:
        """A stop signal: the engines left loaded, out of these (the caller kills them with the lanes')."""
        actors = self.left_actors()
        self.left.clear()
        return actors
