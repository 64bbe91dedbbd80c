"""The commands: one module per script, each the whole story of its command in one file.

``scripts/<command>.py`` parses the command line with Hydra and calls ``act.apps.<command>.main(cfg)`` through
``act.apps.cli.run_main``. Each ``main`` reads its settings from the config into typed objects, builds what the
command needs from the library, runs it and reports, one function per stage. This package is the only one that
imports Hydra or OmegaConf; everything below it takes dataclasses or plain values (tests/unit/test_layers.py).
"""
