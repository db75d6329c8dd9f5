"""Attacks: the reconstruction attack's lazy sampling and generation for language models."""

from dpaudit.attacks.reconstruction import (
    GeneratedLines,
    lazy_log_probs,
    sample_lines,
    sequence_log_prob,
)

__all__ = ["GeneratedLines", "lazy_log_probs", "sample_lines", "sequence_log_prob"]
