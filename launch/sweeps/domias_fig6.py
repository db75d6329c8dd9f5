"""DOMIAS's Fig. 6 (quality against vulnerability) with the paper's nine generators (TVAE, CTGAN,
GAN, WGAN-GP, ADS-GAN, PATE-GAN, PrivBayes, NFlow, additive noise) plus DP-TVAE and MST (bins
cut at the whole data set's quantiles, public to the generator), sized for 2 CPU cores: the
paper's |D_mem| = 500 and |D_ref| = |D_syn| = 10,000, its ADS-GAN and noise grids, but 2 games
per setting (the paper: 8) and the DP generators at eps = 1 and 10 only; every generator at its
own defaults but WGAN-GP / ADS-GAN / GAN (1,000 iterations) and TVAE (2,000 epochs)."""

from launch.sweep import Sweep, product

GENERATORS = ("tvae", "ctgan", "gan", "wgan_gp", "ads_gan", "pate_gan", "privbayes", "nflow",
              "additive_noise", "dp_tvae", "mst")

SWEEP = Sweep(
    name="domias_fig6",
    module="experiments.domias",
    description="DOMIAS Fig. 6: 9 paper generators + DP-TVAE + MST, 2 games per setting, DP at "
                "eps 1 and 10 (sized for a 2-core CPU)",
    fixed={"generators": ",".join(GENERATORS), "num_repeats": 2, "epsilons": "1,10",
           "gan_iterations": 1000, "tvae_epochs": 2000},
    grid=product(study=["generators"]),
)
