"""UniAud's Table IV at the paper's canary shape (docs/dpsgd.md, README "UniAud at the paper's
setting"): Case I (canaries only), d = C = 1000, q = 0.1 (expected batch 0.1 m), delta = 1e-5,
95%; with comparison = the uniaud game (self-comparison, Alg. 2), without = one_run on the same
synthetic canaries, each included with probability 1/2. One job per (m, canaries, comparison),
each over eps = 1, 2, 4, 8, inf and three seeds. The paper's 2-layer ReLU MLP has 1e5 hidden
units; these jobs train the width and epochs that the committed CPU figures used."""

from launch.sweep import Sweep, cross, product, zip_

SWEEP = Sweep(
    name="uniaud_paper",
    module="experiments.dpsgd_audit",
    description="UniAud Table IV: m = 2000, 10000; eps 1, 2, 4, 8, inf; gaussian and "
                "orthogonal canaries with and without comparison; d = C = 1000, Case I, q = 0.1",
    fixed={"canaries_only": True, "canary_dim": 1000, "num_canary_classes": 1000,
           "epsilons": "1,2,4,8,inf", "hidden_sizes": 1000, "epochs": 40, "learning_rate": 1.0,
           "physical_batch_size": 200, "delta": 1e-5, "significance": 0.05, "num_repeats": 3,
           "plot": False},
    grid=cross(zip_(num_canaries=[2000, 10000], batch_size=[200, 1000]),
               product(audits=["uniaud:gaussian", "one_run:gaussian", "uniaud:orthogonal",
                               "one_run:orthogonal"])),
)
