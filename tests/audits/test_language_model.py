"""Scoring lines and secrets of a character n-gram model (Secs. 3.2, 4.2, 4.3 of Stock et
al.): secret probabilities against a naive chain rule, the secrecy bound against the
estimator, the at-risk ranking."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit import accounting
from dpaudit.audits import language_model as lm
from dpaudit.estimators import reconstruction
from dpaudit.models import ngram

VOCAB = ngram.CharVocab.from_texts(["abc de."])
PROMPT = "ab "


@pytest.fixture(scope="module")
def model_and_params():
  model = ngram.CharNGramLM(VOCAB.size, context_size=2, hidden_size=8)
  params = model.init(jax.random.key(0), jnp.zeros((1, 3, 2), jnp.int32))["params"]
  params = jax.tree.map(lambda p: p * 5.0, params)  # a peaked, non-uniform model
  return model, params


def _naive_secret_log_prob(model, params, secret):
  """Chain rule over the secret's digits, each step restricted to the ten digits."""
  ids = list(VOCAB.encode(PROMPT)) + list(VOCAB.ids(secret))
  digits = VOCAB.ids(lm.DIGITS)
  total = 0.0
  for i in range(len(PROMPT), len(ids)):
    history = [VOCAB.bos] * 2 + ids[:i]
    logits = np.asarray(model.apply({"params": params}, jnp.asarray([[history[-2:]]])))[0, 0]
    z = logits[digits]
    total += z[list(digits).index(ids[i])] - np.log(np.sum(np.exp(z - z.max()))) - z.max()
  return total


def test_secret_log_probs_match_the_chain_rule_and_sum_to_one(model_and_params):
  model, params = model_and_params
  secrets = ["0123", "9999", "4711"]
  got = lm.secret_log_probs(model, params, VOCAB, PROMPT, secrets, batch_size=2)
  for s, g in zip(secrets, got):
    assert g == pytest.approx(_naive_secret_log_prob(model, params, s), abs=1e-4)
  # Over all 100 two-digit secrets the attack's probabilities sum to one.
  every = [f"{i:02d}" for i in range(100)]
  total = np.exp(lm.secret_log_probs(model, params, VOCAB, PROMPT, every))
  assert total.sum() == pytest.approx(1.0, rel=1e-4)


def test_line_scores_batches_agree_and_top_k_zeroes_lines(model_and_params):
  model, params = model_and_params
  lines = ["abc", "de.", "a", "cab de"]
  contexts, targets = ngram.line_examples(VOCAB, lines, 2, 8)
  nll1, ll1 = lm.line_scores(model, params, contexts, targets, batch_size=3)
  nll2, ll2 = lm.line_scores(model, params, contexts, targets, batch_size=64)
  np.testing.assert_allclose(nll1, nll2, rtol=1e-6)
  np.testing.assert_allclose(ll1, ll2, rtol=1e-6)
  logits = model.apply({"params": params}, jnp.asarray(contexts))
  np.testing.assert_allclose(nll1, np.asarray(ngram.sequence_nll(logits, jnp.asarray(targets))),
                             rtol=1e-5)
  np.testing.assert_allclose(ll1, -nll1, rtol=1e-5)  # no top-k, temperature 1: lambda = f
  _, ll_top1 = lm.line_scores(model, params, contexts, targets, top_k=1)
  assert np.all((ll_top1 == 0) | (ll_top1 == -np.inf))  # greedy: probability 1 or 0


def test_secrecy_bound_is_prior_minus_leakage_bits():
  orders = np.linspace(1.05, 40, 300)
  got = lm.secrecy_bound(0.8, 0.01, 500, 53.15, 1, orders)
  rdp = accounting.dpsgd_rdp(0.8, 0.01, 500, orders)
  leak = float(reconstruction.leakage_bits(rdp, orders, 53.15).value)
  assert got["leakage_bits"] == pytest.approx(leak)
  assert got["secrecy_bound_bits"] == pytest.approx(53.15 - leak)
  group = lm.secrecy_bound(0.8, 0.01, 500, 53.15, 3, orders)
  assert group["secrecy_bound_bits"] <= got["secrecy_bound_bits"]  # more copies leak more
  assert lm.secrecy_bound(0.0, 0.01, 500, 53.15)["secrecy_bound_bits"] == 0.0


def test_at_risk_lines_are_memorised_and_sorted_by_probability():
  texts = ["a", "b", "c", "d", "e"]
  log_lambda = np.array([-1.0, -2.0, -np.inf, -0.5, -3.0])
  calibrated = np.array([-5.0, -6.0, -9.0, 1.0, -4.0])
  got = lm.at_risk_lines(texts, log_lambda, calibrated, threshold=-3.0, count=10)
  assert [r.text for r in got] == ["a", "b", "e"]  # d not memorised, c impossible
  assert got[0].log10_probability == pytest.approx(-1 / math.log(10))
  assert len(lm.at_risk_lines(texts, log_lambda, calibrated, -3.0, count=2)) == 2


def test_canary_helpers():
  secret = lm.random_secret(jax.random.key(3), 16)
  assert len(secret) == 16 and secret.isdigit()
  assert lm.random_secret(jax.random.key(3), 16) == secret
  lines = lm.insert_canary(["x", "y"], "c", 3)
  assert lines == ("x", "y", "c", "c", "c")
  with pytest.raises(ValueError, match="repetitions"):
    lm.insert_canary(["x"], "c", -1)
  with pytest.raises(ValueError, match="same length"):
    lm.secret_examples(VOCAB, PROMPT, ["1", "22"], 2)
