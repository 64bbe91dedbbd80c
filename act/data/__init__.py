"""HDF5 episodes -> action-chunk samples -> batches, with normalisation statistics.

``schema`` has no torch dependency, so the recorder can use it without importing torch.
"""
