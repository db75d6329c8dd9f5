"""Theoretical privacy upper bounds: the exact noisy-argmax law and the GNMax RDP bounds, and
DP-SGD accounting (RDP and PLD via dp_accounting)."""

from dpaudit.accounting.dpsgd import (
    calibrate_noise_multiplier,
    dpsgd_delta,
    dpsgd_epsilon,
    dpsgd_epsilon_replace_one,
    dpsgd_event,
    dpsgd_group_rdp,
    dpsgd_privacy_profile,
    dpsgd_rdp,
)
from dpaudit.accounting.noisy_argmax import (
    RenyiPair,
    default_num_nodes,
    gnmax_data_dependent_rdp,
    gnmax_data_independent_rdp,
    gnmax_log_q_bound,
    noisy_argmax_class_probabilities,
    noisy_argmax_log_probabilities,
    noisy_argmax_renyi,
)

__all__ = [
    "RenyiPair",
    "calibrate_noise_multiplier",
    "default_num_nodes",
    "dpsgd_delta",
    "dpsgd_epsilon",
    "dpsgd_epsilon_replace_one",
    "dpsgd_event",
    "dpsgd_group_rdp",
    "dpsgd_privacy_profile",
    "dpsgd_rdp",
    "gnmax_data_dependent_rdp",
    "gnmax_data_independent_rdp",
    "gnmax_log_q_bound",
    "noisy_argmax_class_probabilities",
    "noisy_argmax_log_probabilities",
    "noisy_argmax_renyi",
]
