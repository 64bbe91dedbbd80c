"""Plumbing shared by the simulation, the data and the evaluation, with neither torch nor MuJoCo:
atomic file writes (``io``), mp4 writing (``video``), success rates with their intervals (``metrics``)
and the check of a choice against its valid values (``checks``)."""
