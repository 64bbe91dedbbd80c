"""ACT: action-chunking transformer policy, its data pipeline, training and evaluation."""
