"""absl entry points: ``python -m experiments.NAME``. Each parses flags, calls one ``run``,
writes ``results.json`` (config, result, versions, wall time) and plots to ``--output_dir``."""
