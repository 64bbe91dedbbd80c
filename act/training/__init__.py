"""Training: what turns batches into weights (augmentation, weight averaging)."""
