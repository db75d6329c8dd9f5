"""DOMIAS's Figs. 3-6, 12, 15 and the epsilon table at the paper's sizes (README "DOMIAS"): one
job per study, 8 games per setting, BNAF for the density-based attacks of Fig. 4."""

from launch.sweep import Sweep, product

SWEEP = Sweep(
    name="domias",
    module="experiments.domias",
    description="README DOMIAS figures: every study of experiments.domias, 8 games each",
    fixed={"num_repeats": 8},
    grid=product(study=["members", "epochs", "reference", "synthetic", "minority", "generators",
                        "epsilon", "prior", "shift"]),
)
