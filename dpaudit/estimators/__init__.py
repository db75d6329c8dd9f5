"""The shared estimator module: every bound dpaudit reports is computed here.

Pure JAX functions on counts and scores (jit/vmap-able, CPU/GPU/TPU, float64 when
``jax_enable_x64`` is on). Each validates its input and is tested against an independent
reference (scipy, mpmath, statsmodels, dp-accounting or a naive loop).
"""

from dpaudit.estimators.approx_dp import epsilon_from_error_counts, epsilon_from_scores
from dpaudit.estimators.binomial import (
                                         binomial_cdf,
                                         binomial_logpmf,
                                         binomial_sf,
                                         clopper_pearson,
                                         incomplete_beta_tails,
)
from dpaudit.estimators.exposure import Exposure, exposure_exact, exposure_sampled
from dpaudit.estimators.fdp_one_run import (
                                         fdp_one_run_dpsgd,
                                         fdp_one_run_dpsgd_from_scores,
                                         fdp_one_run_epsilon,
                                         fdp_one_run_from_scores,
                                         fdp_one_run_mu,
                                         fdp_one_run_p_value,
                                         gdp_delta,
                                         gdp_epsilon,
                                         gdp_tradeoff_curve,
)
from dpaudit.estimators.mia_metrics import precision_at_top, roc_auc, roc_curve, tpr_at_fpr
from dpaudit.estimators.multinomial import goodman_intervals, sison_glaz_intervals
from dpaudit.estimators.one_run import (
                                         one_run_epsilon,
                                         one_run_epsilon_ceiling,
                                         one_run_epsilon_from_scores,
                                         one_run_p_value,
)
from dpaudit.estimators.panoramia import null_p_value, panoramia_bounds, panoramia_null
from dpaudit.estimators.rdp import compose_rdp, rdp_to_epsilon
from dpaudit.estimators.reconstruction import (
                                         leakage_bits,
                                         posterior_bound,
                                         reconstruction_leakage_bound,
                                         traditional_reconstruction_bound,
)
from dpaudit.estimators.renyi_cuts import (
                                         BootstrapBound,
                                         BootstrapWarning,
                                         binary_renyi_divergence,
                                         empirical_bernstein_interval,
                                         renyi_divergence,
                                         renyi_k_cut_bootstrap,
                                         renyi_k_cut_bootstrap_lower_bound,
                                         renyi_k_cut_lower_bound,
                                         renyi_two_cut_bootstrap,
                                         renyi_two_cut_bootstrap_lower_bound,
                                         renyi_two_cut_from_intervals,
                                         renyi_two_cut_lower_bound,
)

__all__ = [
    "BootstrapBound", "BootstrapWarning", "Exposure", "binary_renyi_divergence", "binomial_cdf",
    "binomial_logpmf", "binomial_sf", "clopper_pearson", "compose_rdp",
    "empirical_bernstein_interval", "epsilon_from_error_counts", "epsilon_from_scores",
    "exposure_exact", "exposure_sampled", "fdp_one_run_dpsgd", "fdp_one_run_dpsgd_from_scores",
    "fdp_one_run_epsilon",
    "fdp_one_run_from_scores", "fdp_one_run_mu", "fdp_one_run_p_value", "gdp_delta",
    "gdp_epsilon", "gdp_tradeoff_curve", "goodman_intervals", "incomplete_beta_tails",
    "leakage_bits", "null_p_value", "one_run_epsilon", "one_run_epsilon_ceiling",
    "one_run_epsilon_from_scores", "one_run_p_value", "panoramia_bounds", "panoramia_null",
    "posterior_bound", "precision_at_top", "rdp_to_epsilon", "reconstruction_leakage_bound",
    "renyi_divergence", "renyi_k_cut_bootstrap", "renyi_k_cut_bootstrap_lower_bound",
    "renyi_k_cut_lower_bound", "renyi_two_cut_bootstrap", "renyi_two_cut_bootstrap_lower_bound",
    "renyi_two_cut_from_intervals", "renyi_two_cut_lower_bound", "roc_auc", "roc_curve",
    "sison_glaz_intervals", "tpr_at_fpr", "traditional_reconstruction_bound",
]
