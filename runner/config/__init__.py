"""The run's configuration: typed sections (schema), their registration with Hydra (store), composing the
config once with diagnostics for bad overrides (overrides). The plan and everything below take these objects."""
