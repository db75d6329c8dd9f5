"""Utility against auditing, UniAud's Fig. 9 analogue (README "Auditing DP-SGD")."""

from launch.sweep import Sweep, product

SWEEP = Sweep(
    name="uniaud_plus_tradeoff",
    module="experiments.dpsgd_audit",
    description="README trade-off table: test accuracy and eps_L against m, eps 8 and inf",
    fixed={"dataset": "mnist_subset", "epsilons": "8,inf", "num_canaries": "500,1000,2000",
           "epochs": 100, "learning_rate": 0.5, "patch_size": 6, "num_repeats": 3},
    grid=product(audits=["one_run:in_distribution", "one_run:mislabelled",
                         "uniaud_plus:trigger"]),
)
