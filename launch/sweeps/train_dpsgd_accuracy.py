"""DP-SGD accuracy against epsilon on digits and mnist_subset (README "DP-SGD")."""

from launch.sweep import Sweep, zip_

SWEEP = Sweep(
    name="train_dpsgd_accuracy",
    module="experiments.train_dpsgd",
    description="README accuracy table: MLP, Adam, 30 epochs, 3 seeds, eps 1, 4, 8, inf",
    grid=zip_(dataset=["digits", "mnist_subset"], learning_rate=[0.003, 0.001]),
)
