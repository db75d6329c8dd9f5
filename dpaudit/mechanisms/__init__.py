"""Randomized mechanisms as pure sampling functions ``f(key, ...)``."""

from dpaudit.mechanisms.noisy_argmax import noisy_argmax

__all__ = ["noisy_argmax"]
