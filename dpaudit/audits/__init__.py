"""Audit games: each joins a mechanism (or training run), Monte Carlo and the estimators, and
returns a frozen result dataclass with ``to_dict()``."""
