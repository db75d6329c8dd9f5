"""Fig. 4 of Stock et al.: n-gram canary leakage against the RDP bound (README), at two seeds."""

from launch.sweep import Sweep, product

SWEEP = Sweep(
    name="fig4",
    module="experiments.ngram_reconstruction",
    description="README Fig. 4 table (seed 0) and a second seed",
    grid=product(seed=[0, 1]),
)
