"""The commands' orchestration: a sweep run in its run folder, stage by stage (the driver's top)."""
