"""The pipelines around training: `make demo`, seeds, learning curves."""
