"""Recipes around training: `make demo`'s time budget, the runs of seeds and ablations, their tables and plots
(the commands themselves are in act/apps/)."""
