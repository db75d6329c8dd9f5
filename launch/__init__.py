"""Sweeps over experiments: a local runner, xmanager launchers, multi-host start-up.

Only experiment entry points (``python -m experiments.NAME``) are launched; nothing here imports
dpaudit."""
