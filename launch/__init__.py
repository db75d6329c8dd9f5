"""Sweeps over experiments: a local runner, xmanager launchers, multi-host start-up.

Only experiment entry points (``python -m experiments.NAME``) are launched; of dpaudit, only
:mod:`dpaudit.results` is imported (its directory locks, by :mod:`launch.processes`)."""
