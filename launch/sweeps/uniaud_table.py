"""UniAud's Fig. 3 / Table IV on mnist_subset (README "Auditing DP-SGD"): one job per audit."""

from launch.sweep import Sweep, product

SWEEP = Sweep(
    name="uniaud_table",
    module="experiments.dpsgd_audit",
    description="README table: one-run and UniAud audits at eps 1, 2, 4, 8, inf; m = 2000, 10000",
    fixed={"dataset": "mnist_subset", "epsilons": "1,2,4,8,inf", "num_canaries": "2000,10000",
           "epochs": 100, "learning_rate": 0.5, "num_repeats": 3},
    grid=product(audits=["one_run:in_distribution", "one_run:mislabelled", "uniaud:gaussian",
                         "uniaud:orthogonal"]),
)
