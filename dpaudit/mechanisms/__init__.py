"""Randomized mechanisms as pure sampling functions ``f(key, ...)``: the noisy argmax and the
histogram models of PATE, CaPC and Private-kNN (:mod:`dpaudit.mechanisms.histograms`)."""

from dpaudit.mechanisms import histograms
from dpaudit.mechanisms.noisy_argmax import noisy_argmax

__all__ = ["histograms", "noisy_argmax"]
