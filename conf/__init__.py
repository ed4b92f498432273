"""The Hydra configs, shipped as the package `runner.conf` (pyproject.toml maps conf/ there, and sweeps/ to its
`sweep` group): Hydra reads them through the search path `pkg://runner.conf`, from a wheel or from this folder."""
