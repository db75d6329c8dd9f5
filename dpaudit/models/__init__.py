"""Flax models: the DP-SGD audits' MLP, LeNet-5-style CNN, Wide-ResNet-16-4, ResNet-18 and
UniAud++'s two-head MLP; the reconstruction audits' lazy and neural character n-gram language
models; PANORAMIA's class-conditional convolutional VAE image generator."""

from dpaudit.models.classifiers import (
    MLP,
    MODEL_NAMES,
    LeNet5,
    ResNet18,
    TwoHeadMLP,
    WideResNet,
    make_model,
)
from dpaudit.models.ngram import CharNGramLM, CharVocab, LazyNgram, sequence_nll
from dpaudit.models.vae import (
    ConditionalVAE,
    VaeConfig,
    VaeModel,
    fit_vae,
    image_grid,
    sample_vae,
    vae_loss,
)

__all__ = ["MODEL_NAMES", "MLP", "LeNet5", "ResNet18", "TwoHeadMLP", "WideResNet", "make_model",
           "CharNGramLM", "CharVocab", "LazyNgram", "sequence_nll",
           "ConditionalVAE", "VaeConfig", "VaeModel", "fit_vae", "image_grid", "sample_vae",
           "vae_loss"]
