"""DP-SGD engine: per-example clipping (ghost norms or vmap), Gaussian noise as an optax
transform, Poisson batches with static shapes, and a resumable training loop."""

from dpaudit.dpsgd.clipping import (
    ClippedGradients,
    GhostUnsupportedError,
    clipped_grad_sum,
    ghost_supported,
    resolve_strategy,
    softmax_cross_entropy,
)
from dpaudit.dpsgd.noise import GaussianNoiseState, dp_aggregate, gaussian_noise
from dpaudit.dpsgd.sampling import PoissonBatch, microbatch, num_microbatches, poisson_sample
from dpaudit.dpsgd.training import (
    StepMetrics,
    TrainConfig,
    TrainResult,
    TrainState,
    accuracy,
    init_state,
    make_optimizer,
    make_step,
    predict,
    train,
)

__all__ = [
    "ClippedGradients",
    "GaussianNoiseState",
    "GhostUnsupportedError",
    "PoissonBatch",
    "StepMetrics",
    "TrainConfig",
    "TrainResult",
    "TrainState",
    "accuracy",
    "clipped_grad_sum",
    "dp_aggregate",
    "gaussian_noise",
    "ghost_supported",
    "init_state",
    "make_optimizer",
    "make_step",
    "microbatch",
    "num_microbatches",
    "poisson_sample",
    "predict",
    "resolve_strategy",
    "softmax_cross_entropy",
    "train",
]
