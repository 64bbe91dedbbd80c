"""From Hydra configs to the library's objects, shared by the commands: a training run (``training``), an
evaluation (``evaluation``), an expert (``experts``) and what a command line overrides (``overrides``). No command
imports another command; what two share lives here, or below in the library and the pipeline."""
