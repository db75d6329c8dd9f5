"""PANORAMIA's modalities end to end at a tiny size (images: conditional VAE; tabular: MST on
Adult columns + MLP; text runs end to end in tests/experiments/test_panoramia_cli.py), and
their pieces:
nucleus filtering, prompted sampling, the text generator's character frequencies, the rows'
encoding, the DP targets' calibration."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit import data
from dpaudit.accounting import dpsgd as accounting
from dpaudit.attacks import panoramia as attacks
from dpaudit.audits import panoramia as pan
from dpaudit.audits import panoramia_modalities as mod
from dpaudit.data import sources
from dpaudit.mechanisms import mst
from dpaudit.models import ngram, vae

# one baseline each (the helper variants of Table 3 are covered in test_panoramia_audit.py)
TINY = pan.PanoramiaConfig(num_audit=100, num_classifier_train=100, num_helper_train=100,
                           baseline_helpers=("generated",),
                           classifier=attacks.ClassifierConfig(epochs=2, batch_size=50))
FAST = mod.TrainSpec(epochs=2, batch_size=50)


def _check(result):
  assert 0 <= result.c_lb and 0 <= result.c_plus_eps_lb and result.eps_tilde >= 0
  assert set(result.baseline_c_lb) == {"generated"}
  assert 0 <= result.mia_auc <= 1 and result.num_audit == 100


def test_image_pipeline_end_to_end(tmp_path):
  ds = data.load("mnist_subset", "train[:500]", data_dir=str(tmp_path))
  examples = pan.Examples(ds.features, ds.labels)
  # small models keep it cheap; the default sizes run in experiments.panoramia
  modality = mod.image_modality(ds.features.shape[1:], 10,
                                vae.VaeConfig(epochs=2, width=8, batch_size=50), FAST,
                                model="logistic", encoder_width=4)
  spec = mod.image_spec(ds.features.shape[1:], 10, "logistic")
  params, _ = mod.train_model(jax.random.key(0), spec, examples, FAST)
  result = pan.run(jax.random.key(1), TINY, modality=modality,
                   target_loss=mod.loss_function(spec, params), members=examples)
  _check(result)


@pytest.fixture(scope="module")
def adult_rows(tmp_path_factory):
  ds = data.load("adult", "train[:600]", data_dir=str(tmp_path_factory.mktemp("tfds")))
  names = [c.name for c in sources.ADULT_COLUMNS]
  keep = [names.index(n) for n in ("age", "education_num", "sex", "hours_per_week")]
  binnings = tuple(mod.adult_binnings()[i] for i in keep)
  return pan.Examples(ds.features[:, keep], ds.labels), binnings


def test_tabular_pipeline_end_to_end(adult_rows):
  examples, binnings = adult_rows
  modality = mod.tabular_modality(mst.MstConfig(epsilon=100.0, iters=50, select_iters=20),
                                  FAST, binnings)
  spec = mod.tabular_spec(binnings)
  params, _ = mod.train_model(jax.random.key(0), spec, examples, FAST)
  _check(pan.run(jax.random.key(1), TINY, modality=modality,
                 target_loss=mod.loss_function(spec, params), members=examples))


def test_encode_rows_one_hot_and_public_log_scale(adult_rows):
  examples, binnings = adult_rows
  x = np.asarray(mod.encode_rows(jnp.asarray(examples.inputs[:5]), binnings))
  assert x.shape == (5, 1 + 1 + 2 + 1)
  np.testing.assert_allclose(x[:, 2:4].sum(1), 1.0)  # sex one-hot
  age = examples.inputs[:5, 0]
  np.testing.assert_allclose(x[:, 0], np.log1p(age - 15) / np.log1p(95 - 15), rtol=1e-6)


@pytest.fixture(scope="module")
def lines():
  corpus = data.load_text("shakespeare", "train[:3000]")
  text = sorted({t for t in corpus.texts if 8 <= len(t) < 40})[:600]
  return text, ngram.CharVocab.from_texts(text)


def test_text_generator_matches_character_frequencies(lines):
  text, vocab = lines
  examples = mod.text_examples(vocab, text, 40)
  spec = mod.text_spec(vocab, context_size=3, hidden_size=64)
  sample = mod.text_generator(spec, mod.TrainSpec(epochs=8, batch_size=50, learning_rate=3e-3),
                              prompt_length=4, top_p=0.95)(jax.random.key(0), examples)
  generated = sample(jax.random.key(1), 300)
  assert generated.inputs.shape == (300, 40)
  ids = generated.inputs
  assert np.all(np.sum(ids == vocab.eos, axis=1) == 1)  # one eos per line, padding after
  def freq(rows):
    ids = rows[rows >= vocab.num_special]
    return np.bincount(ids, minlength=vocab.size) / ids.size
  total_variation = 0.5 * np.abs(freq(ids) - freq(examples.inputs)).sum()
  assert total_variation < 0.12, total_variation
  lengths = np.argmax(ids == vocab.eos, axis=1)
  assert 0.5 < lengths.mean() / np.argmax(examples.inputs == vocab.eos, axis=1).mean() < 2


def test_top_p_keeps_the_smallest_nucleus():
  logits = jnp.log(jnp.array([[0.5, 0.3, 0.15, 0.05], [0.05, 0.9, 0.03, 0.02]]))
  kept = np.isfinite(np.asarray(mod.top_p_logits(logits, 0.75)))
  np.testing.assert_array_equal(kept, [[True, True, False, False], [False, True, False, False]])
  assert np.all(np.isfinite(np.asarray(mod.top_p_logits(logits, 1.0))))


def test_prompts_are_kept_and_rows_end_with_eos():
  prompts = jnp.array([[5, 6, 7, -1, -1, -1], [8, -1, -1, -1, -1, -1]], jnp.int32)
  uniform = lambda contexts: jnp.zeros((contexts.shape[0], 10))
  out = np.asarray(mod.sample_continuations(jax.random.key(0), uniform, prompts,
                                            jnp.array([3, 1]), 2, 0, 1, 1.0))
  np.testing.assert_array_equal(out[0, :3], [5, 6, 7])
  assert out[1, 0] == 8
  for row in out:
    end = np.flatnonzero(row == 1)[0]
    assert np.all(row[end + 1:] == ngram.PAD)


def test_train_spec_calibrates_dp_targets():
  config = mod.TrainSpec(epochs=2, batch_size=50, epsilon=4.0, delta=1e-5).train_config(1000)
  assert config.is_private and config.num_steps == 40
  eps = accounting.dpsgd_epsilon(config.noise_multiplier, config.sampling_rate,
                                 config.num_steps, 1e-5)
  assert eps <= 4.0 and eps == pytest.approx(4.0, rel=1e-3)
  plain = mod.TrainSpec(epochs=2, batch_size=50).train_config(1000)
  assert not plain.is_private and math.isinf(plain.l2_clip_norm)
  with pytest.raises(ValueError, match="epochs"):
    mod.TrainSpec(epochs=0)
