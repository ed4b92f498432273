"""Pure decision numerics over measured samples: intervals, the one decision rule, early stopping (race,
converge), rate brackets and probes, acceptance and step-cost predictions, draft-count schedules. No engine, no
files: config/, plan/, report/ and the actor's workloads all read them."""
