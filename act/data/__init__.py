"""Episodes on disk (ACT HDF5 files or a LeRobot v3 folder) -> action-chunk samples -> batches, with
normalisation statistics; recording, inspection and conversion between the two formats.

``schema`` has no torch dependency, so the recorder can use it without importing torch; ``lerobot``
needs the ``[lerobot]`` extra (pyarrow, av) and is imported only for LeRobot folders.
"""
