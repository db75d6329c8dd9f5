"""PANORAMIA's Tables 3-4 and the DP targets on the offline data (docs/panoramia.md): one job per
modality, every target. The DP image tables at the paper's sizes (CIFAR-10, ResNet-18 and
WRN-16-4, Tables 5, 7, 8) are launch/sweeps/panoramia_tables578.py."""

from launch.sweep import Sweep, product

SWEEP = Sweep(
    name="panoramia",
    module="experiments.panoramia",
    description="README PANORAMIA tables: E-series and DP targets with O(1) side by side",
    fixed={"target": "e20,e50,e100,dp1,dp2,dp4,dp8,dp15,dp20,dpinf", "num_repeats": 3},
    grid=product(modality=["image", "tabular", "text"]),
)
