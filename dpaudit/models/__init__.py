"""Flax models used by the DP-SGD audits: MLP, LeNet-5-style CNN and Wide-ResNet-16-4, and UniAud++'s two-head MLP."""

from dpaudit.models.classifiers import (
    MODEL_NAMES,
    MLP,
    LeNet5,
    TwoHeadMLP,
    WideResNet,
    make_model,
)

__all__ = ["MODEL_NAMES", "MLP", "LeNet5", "TwoHeadMLP", "WideResNet", "make_model"]
