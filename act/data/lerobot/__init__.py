"""LeRobotDataset v3.0 folders, read in place and written from ACT episodes (needs ``pip install -e .[lerobot]``).

``format``: the layout, names and ``meta/info.json`` (the one definition, as ``schema`` is for HDF5);
``video``: AV1 mp4 through PyAV; ``stats``: ``meta/stats.json`` statistics; ``reader``: a v3 folder
as an episode source for training; ``writer``: ACT episodes -> v3 files.
"""
