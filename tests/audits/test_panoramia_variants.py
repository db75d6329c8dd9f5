"""PANORAMIA's variants and options (Kazmi et al.): the RM;RN game (real non-members, c_lb = 0,
Table 4), the synthetic-sample filter (App. B.1, B.3), gradient-boosted trees for the baseline
and the MIA (App. B.3), the text sampler's top-k (App. B.2) and the study's settings for them.
Trees keep these tests cheap (no network to compile); the networks run in
tests/audits/test_panoramia_audit.py and the CLI's tiny run."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit import estimators
from dpaudit.attacks import panoramia as attacks
from dpaudit.audits import panoramia as pan
from dpaudit.audits import panoramia_modalities as mod
from dpaudit.audits import panoramia_study as study

TREES = attacks.GBTConfig(learning_rates=(0.3,), max_depths=(2,), max_iter=10)
CONFIG = pan.PanoramiaConfig(classifier=TREES)


def _no_encoder():
  raise AssertionError("trees use no encoder")


MODALITY = pan.Modality("toy", None, None, _no_encoder)


def _naive_top_k(logits, k):
  out = np.full_like(logits, -np.inf)
  for i, row in enumerate(logits):
    kth = sorted(row, reverse=True)[k - 1]
    out[i] = [v if v >= kth else -np.inf for v in row]
  return out


def test_top_k_matches_a_naive_numpy_version_ties_included():
  rng = np.random.default_rng(0)
  logits = rng.integers(-3, 4, (20, 7)).astype(np.float32)  # many ties
  logits[0, :] = -np.inf
  logits[0, 2] = 1.0
  for k in (1, 2, 5):
    np.testing.assert_array_equal(np.asarray(mod.top_k_logits(jnp.asarray(logits), k)),
                                  _naive_top_k(logits, k))
  for k in (0, 7, 200):  # off, or the whole vocabulary
    np.testing.assert_array_equal(np.asarray(mod.top_k_logits(logits, k)), logits)
  with pytest.raises(ValueError, match="top_k"):
    mod.top_k_logits(logits, -1)


def test_top_k_of_one_samples_the_likeliest_character():
  prompts = jnp.zeros((3, 6), jnp.int32)
  favourite = lambda contexts: jnp.tile(jnp.arange(10.0) % 7, (contexts.shape[0], 1))
  out = np.asarray(mod.sample_continuations(jax.random.key(0), favourite, prompts,
                                            jnp.zeros(3, jnp.int32), 2, 0, 1, 1.0, top_k=1))
  np.testing.assert_array_equal(out[:, :5], 6)  # argmax of arange(10) % 7; eos (1) last
  np.testing.assert_array_equal(out[:, 5], 1)


def test_gbt_chooses_on_validation_and_scores_members_higher():
  rng = np.random.default_rng(0)
  x = np.column_stack([rng.normal(size=300), rng.integers(0, 3, 300)])
  member = ((x[:, 0] > 0) ^ (x[:, 1] == 2)).astype(int)
  config = attacks.GBTConfig(learning_rates=(0.05, 0.3), max_depths=(1, 3), max_iter=30,
                             categorical=(False, True))
  fitted = attacks.fit_gbt(jax.random.key(0), x, attacks.no_side(300), member, config)
  assert fitted.validation_loss.shape == (2, 2) and 1 <= fitted.num_iter <= 30
  best = fitted.validation_loss[config.learning_rates.index(fitted.learning_rate),
                                config.max_depths.index(fitted.max_depth)]
  assert best == fitted.validation_loss.min()
  scores = attacks.gbt_scores(fitted, x, attacks.no_side(300))
  assert estimators.roc_auc(scores[member == 1], scores[member == 0]) > 0.95
  with pytest.raises(ValueError, match="categorical has 1 flags"):
    attacks.fit_gbt(jax.random.key(0), x, attacks.no_side(300), member,
                    attacks.GBTConfig(categorical=(True,)))
  assert study.classifier_config("tabular").categorical == mod.categorical_columns(
      mod.adult_binnings()[:-1])
  assert isinstance(study.classifier_config("tabular", "mlp", 3), attacks.ClassifierConfig)
  assert isinstance(study.classifier_config("image"), attacks.ClassifierConfig)


def test_filter_drops_the_obviously_generated_samples():
  """Half of the generator's samples are far off (x = 6): a filter dropping half keeps the
  good ones, trained only on the real examples given and its own draws."""
  rng = np.random.default_rng(1)
  real = pan.Examples(rng.normal(size=(200, 1)).astype(np.float32), np.zeros(200, np.int32))

  def sample(key, n):
    good = np.asarray(jax.random.normal(key, (n, 1)))
    bad = np.arange(n)[:, None] % 2 == 1
    return pan.Examples(np.where(bad, 6.0, good).astype(np.float32), np.zeros(n, np.int32))

  kept = pan.filter_generated(jax.random.key(0), MODALITY, real, sample, 100, 0.5, TREES)
  assert len(kept) == 100 and np.mean(kept.inputs == 6.0) < 0.05
  unfiltered = pan.filter_generated(jax.random.key(0), MODALITY, real, sample, 100, 0.0, TREES)
  assert np.mean(unfiltered.inputs == 6.0) == pytest.approx(0.5, abs=0.1)
  with pytest.raises(ValueError, match="fraction"):
    pan.filter_generated(jax.random.key(0), MODALITY, real, sample, 100, 0.99, TREES)
  with pytest.raises(ValueError, match="filter_fraction"):
    pan.PanoramiaConfig(filter_fraction=-0.1)


def test_rm_rn_measures_a_memorising_target_and_not_a_blind_one():
  """RM;RN (c_lb = 0): a target with zero loss on its members is measured well above 0, its
  bound the MIA row of panoramia_bounds; a target whose loss says nothing measures 0."""
  rng = np.random.default_rng(2)
  candidates = pan.Examples(rng.normal(size=(400, 2)).astype(np.float32), np.zeros(400, int))
  included = rng.integers(0, 2, 400)
  memorised = lambda ex: 3.0 - 3.0 * included  # noqa: E731  (always all candidates)
  out = pan.measure_real_nonmembers(jax.random.key(0), MODALITY, memorised, candidates,
                                    included, CONFIG)
  members = int(included.sum())  # the audit half: the rest after floor(n_c / 2) of each class
  assert out.num_members == members - members // 2
  assert out.num_audit == out.num_members + (400 - members) - (400 - members) // 2
  assert out.mia_auc == 1.0 and out.eps_lb > 2.0 and not out.optimistic
  assert out.eps_lb == pytest.approx(float(np.max(out.mia_curve.lower_bound)))
  blind = pan.measure_real_nonmembers(jax.random.key(0), MODALITY, lambda ex: np.ones(400),
                                      candidates, included, CONFIG)
  assert blind.eps_lb == 0.0
  with pytest.raises(ValueError, match="at least 4 of each"):
    pan.measure_real_nonmembers(jax.random.key(0), MODALITY, memorised, candidates,
                                np.r_[np.ones(397, int), np.zeros(3, int)], CONFIG)


def test_study_settings_for_the_paper():
  config = study.StudyConfig(modality="tabular")
  assert config.mst_epsilon == 1000.0 and config.tabular_hidden_sizes == (150, 100, 50, 10)
  assert config.rm_rn and (config.prompt_length, config.top_k, config.top_p) == (8, 0, 0.9)
  spec = mod.tabular_spec(mod.adult_binnings()[:-1], hidden_sizes=config.tabular_hidden_sizes)
  assert spec.module.hidden_sizes == (150, 100, 50, 10)
  signature = study._signature(config, 0, 100)  # pylint: disable=protected-access
  assert signature["tabular_hidden_sizes"] == [150, 100, 50, 10]
  assert "filter_fraction" not in signature["panoramia"]  # off: older stores keep resuming
  text = study.StudyConfig(modality="text", prompt_length=64, top_k=200, top_p=1.0)
  assert study._signature(text, 0, 100)["text_sampler"] == [64, 200, 1.0]  # pylint: disable=protected-access
  with pytest.raises(ValueError, match="prompt_length"):
    study.StudyConfig(modality="text", prompt_length=65)
  with pytest.raises(ValueError, match="RM;RN variant needs at least 8"):
    study._check_rm_rn(study.StudyConfig(num_canaries=4))  # pylint: disable=protected-access
  study._check_rm_rn(study.StudyConfig(num_canaries=0, rm_rn=False))  # pylint: disable=protected-access


def test_image_samples_sharpened_by_the_logit_scale():
  """logit_scale s: sigma(s * logit) of the same latents, s = 1 the decoder's means."""
  from dpaudit.models import vae
  module = vae.ConditionalVAE((4, 4, 1), 3, latent_dim=2, width=2)
  params = module.init(jax.random.key(0), jnp.zeros((1, 4, 4, 1)), jnp.zeros(1, jnp.int32),
                       jnp.zeros((1, 2)))["params"]
  fitted = vae.VaeModel(module, params, vae.VaeConfig(), np.zeros(1))
  labels = jnp.array([0, 2, 1], jnp.int32)
  means = np.asarray(vae.sample_vae(jax.random.key(1), fitted, labels), np.float64)
  sharp = np.asarray(mod._sharpened_sampler(module, 2.0)(  # pylint: disable=protected-access
      jax.random.key(1), params, labels), np.float64)
  logits = np.log(means) - np.log1p(-means)
  np.testing.assert_allclose(sharp, 1.0 / (1.0 + np.exp(-2.0 * logits)), atol=1e-5)
  with pytest.raises(ValueError, match="logit_scale"):
    mod.image_generator(3, vae.VaeConfig(), logit_scale=0.0)
  assert study.StudyConfig(image_logit_scale=2.0).image_logit_scale == 2.0


def test_prepare_audit_filters_the_generated_non_members():
  """filter_fraction in the pipeline: the audit's generated points avoid the off samples."""
  rng = np.random.default_rng(3)
  members = pan.Examples(rng.normal(size=(400, 1)).astype(np.float32), np.zeros(400, np.int32))

  def fit(key, d_g):
    def sample(key, n):
      good = np.asarray(jax.random.normal(key, (n, 1)))
      return pan.Examples(np.where(np.arange(n)[:, None] % 2, 6.0, good).astype(np.float32),
                          np.zeros(n, np.int32))
    return sample
  modality = pan.Modality("toy", fit, lambda key, examples: None, _no_encoder)
  config = pan.PanoramiaConfig(num_audit=100, num_classifier_train=100, num_helper_train=2,
                               baseline_helpers=("none",), classifier=TREES, filter_fraction=0.5)
  setup = pan.prepare_audit(jax.random.key(0), modality, members, config)
  generated = setup.audit.inputs[setup.is_member == 0]
  assert len(generated) > 20 and np.mean(generated == 6.0) < 0.05
