"""Recipes around training: `make demo`'s workflow and its time budget, learning curves, the runs of seeds and
ablations, their tables and plots;
workflows over a trained policy or the expert: the latency table's sweep, the latent probe, the camera extent
(the commands themselves are in act/apps/)."""
