"""The DOMIAS game: a copying generator is caught, a generator that never saw the members is not,
and the epsilon a DP generator's scores certify stays below its accountant's."""

import dataclasses
import math

import jax
import numpy as np
import pytest
from scipy import stats

from dpaudit.attacks import domias as domias_attacks
from dpaudit.audits import domias
from dpaudit.models import tabular_generators


def _gaussian_data(n, seed=0, d=3):
  rng = np.random.default_rng(seed)
  cov = np.array([[1.0, 0.5, 0.0], [0.5, 1.0, 0.3], [0.0, 0.3, 1.0]])[:d, :d]
  return rng.multivariate_normal(np.zeros(d), cov, size=n)


class _TrueDistribution:
  """A 'generator' that ignores its training rows and samples the data's true distribution:
  it fits on disjoint data in effect, so no attack can tell members from non-members."""

  def __init__(self, d):
    self.d = d


def _fit_true(key, data, config, discrete_columns):
  del key, config, discrete_columns
  return _TrueDistribution(data.shape[1])


def _sample_true(key, model, n):
  seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
  return _gaussian_data(n, seed=seed, d=model.d)


tabular_generators.register_generator(
    "true_distribution_for_tests", tabular_generators.AdditiveNoiseConfig, _fit_true,
    _sample_true, replace=True)
ATTACKS = ("domias", "eq1", "mc", "gan_leaks")  # the fast ones (LOGAN, CAL: other tests)


def _config(**changes):
  base = dict(num_members=150, num_reference=600, num_synthetic=600, num_holdout=0,
              generator="additive_noise", generator_config={"noise": 0.0}, attacks=ATTACKS)
  return domias.DomiasConfig(**{**base, **changes})


def test_a_generator_that_copies_its_members_is_caught():
  """D_syn: 2,000 draws from 50 members. Distance attacks see the copies exactly (AUC 1);
  DOMIAS's KDE smooths them with Scott's bandwidth (about 0.34 of each spread here), so its
  AUC is high but not 1 (0.92 measured), and above Eq. 1's (0.87)."""
  result = domias.run(jax.random.key(0), _config(num_members=50, num_synthetic=2000),
                      data=_gaussian_data(1000))
  auc = {name: metrics["auc"] for name, metrics in result.attacks.items()}
  assert auc["gan_leaks"] == auc["mc"] == 1.0, auc
  assert auc["domias"] > 0.85 and auc["domias"] > auc["eq1"], auc
  assert result.attacks["gan_leaks"]["precision_at_top"]["0.2"] == 1.0
  assert result.claimed_epsilon == math.inf and result.num_members == 50
  # Fixed-size membership: the one-run bound's premise does not hold, so it is not reported.
  assert math.isnan(result.attacks["gan_leaks"]["epsilon_one_run"])
  assert math.isnan(result.attacks["gan_leaks"]["epsilon_one_run_fdp"])  # the same premise


def test_a_copier_in_california_housings_dimension_gives_domias_an_auc_near_one():
  """In 8 dimensions (California Housing's), Scott's bandwidth is narrow against the spacing of
  50 members, each member's own copies dominate the KDE at its point, and DOMIAS's AUC is
  about 1 (1.0 and 0.999 measured on two keys; 0.98 and 0.98 in 5 dimensions)."""
  rng = np.random.default_rng(0)
  idx = np.arange(8)
  data = rng.multivariate_normal(np.zeros(8), 0.5 ** np.abs(idx[:, None] - idx[None, :]),
                                 size=1000)
  result = domias.run(jax.random.key(0), _config(num_members=50, num_synthetic=2000,
                                                  attacks=("domias", "gan_leaks")), data=data)
  assert result.attacks["domias"]["auc"] >= 0.98, result.attacks["domias"]["auc"]
  assert result.attacks["gan_leaks"]["auc"] == 1.0


def test_a_generator_of_the_true_distribution_gives_chance_auc():
  """Null: |AUC - 1/2| within 4 standard deviations of the Mann-Whitney statistic,
  sqrt((n1 + n2 + 1) / (12 n1 n2)) = 0.033 for 150 vs 150, on every attack and 2 games."""
  tolerance = 4 * math.sqrt((150 + 150 + 1) / (12 * 150 * 150))
  for seed in range(2):
    result = domias.run(jax.random.key(seed), _config(generator="true_distribution_for_tests",
                                                      generator_config=None),
                        data=_gaussian_data(1000, seed=10 + seed))
    for name, metrics in result.attacks.items():
      assert abs(metrics["auc"] - 0.5) < tolerance, (seed, name, metrics["auc"])


def test_bernoulli_membership_certifies_epsilon_for_a_copier():
  copier = domias.run(jax.random.key(3), _config(membership="bernoulli", attacks=("gan_leaks",)),
                      data=_gaussian_data(1000))
  assert copier.attacks["gan_leaks"]["epsilon_one_run"] > 1.0
  # f-DP (Gaussian family) on the same guesses: at delta = 0 its mu is the figure (eps = inf)
  metrics = copier.attacks["gan_leaks"]
  assert metrics["mu_one_run_fdp"] > 1.0 and metrics["epsilon_one_run_fdp"] == math.inf
  assert 120 < copier.num_members < 180  # Binomial(300, 1/2)


def test_dp_generator_audited_epsilon_stays_below_its_accountant_epsilon():
  data = _gaussian_data(1000, seed=4)
  config = _config(membership="bernoulli", num_members=60, num_reference=200,
                   num_synthetic=300, attacks=("domias", "gan_leaks"), generator="dp_tvae",
                   generator_config={"epsilon": 2.0, "delta": 1e-5, "epochs": 3,
                                     "batch_size": 32, "latent_dim": 4, "hidden": (16,)},
                   delta=1e-5)
  # One game here (each Bernoulli draw has its own |D_mem|, hence its own compilation); the
  # epsilon study of experiments/domias.py repeats it over 8 games per generator.
  result = domias.run(jax.random.key(0), config, data=data)
  assert 0 < result.claimed_epsilon <= 2.0 + 1e-9
  for name, metrics in result.attacks.items():
    assert 0 <= metrics["epsilon_one_run"] <= result.claimed_epsilon, (name, metrics)
    assert 0 <= metrics["epsilon_one_run_fdp"] < math.inf, (name, metrics)


def test_groups_quality_and_wasserstein_against_scipy():
  data = _gaussian_data(1000)
  seen = []
  result = domias.run(jax.random.key(1), _config(num_holdout=100, attacks=("gan_leaks",)),
                      data=data, groups={"left": lambda x: x[:, 0] < 0,
                                         "right": lambda x: x[:, 0] >= 0},
                      progress=lambda done, total, message: seen.append((done, total, message)))
  # one report per timed phase (generator, sample, gan_leaks, quality), the last done == total
  assert [(d, t) for d, t, _ in seen] == [(1, 4), (2, 4), (3, 4), (4, 4)]
  assert [m.split(":")[0] for *_, m in seen] == ["generator", "sample", "gan_leaks", "quality"]
  # the result round-trips through plain values (the store's validator)
  assert domias.Result.from_dict(result.to_dict()) == result
  assert set(result.groups) == {"left", "right"}
  for group in result.groups.values():
    # Copies are found in both halves: all but the ~2% of members that 600 draws from 150
    # never picked ((1 - 1/150)^600 = e^-4).
    assert group["gan_leaks"]["auc"] > 0.95
  # Quality (W1 to the hold-out set, 100 points each side): noise of 2 std worsens it.
  noisy = domias.run(jax.random.key(1), _config(num_holdout=100, attacks=("gan_leaks",),
                                                 generator_config={"noise": 2.0}), data=data)
  assert 0 < result.quality < noisy.quality - 0.5, (result.quality, noisy.quality)
  # Exact W1 in one dimension (equal sizes): scipy's closed form.
  rng = np.random.default_rng(2)
  a, b = rng.normal(size=(80, 1)), rng.exponential(size=(80, 1))
  ours = domias.wasserstein_distance(jax.random.key(0), a, b)  # in units of b's std
  assert ours * b.std() == pytest.approx(stats.wasserstein_distance(a[:, 0], b[:, 0]),
                                         rel=1e-9)


def test_split_is_disjoint_and_bad_settings_fail():
  data = np.arange(3000.0).reshape(1000, 3)
  split = domias.split_data(jax.random.key(0), data, _config(num_holdout=50))
  rows = np.concatenate([split.candidates, split.reference, split.holdout])[:, 0]
  assert len(np.unique(rows)) == rows.size == 300 + 600 + 50
  with pytest.raises(ValueError, match="needs 1500 records"):
    domias.split_data(jax.random.key(0), data[:500], _config(num_reference=1200))
  with pytest.raises(ValueError, match="attacks='spy' is not one of"):
    _config(attacks=("spy",))
  with pytest.raises(ValueError, match="generator='gpt' is not one of"):
    _config(generator="gpt")
  with pytest.raises(ValueError, match="does not fit"):
    _config(generator_config={"nois": 1.0})
  with pytest.raises(ValueError, match="column 2 of data is constant"):
    domias.run(jax.random.key(0), _config(), data=np.c_[data[:, :2], np.ones(1000)])


def test_result_round_trips_through_json_and_the_store_reuses_it(tmp_path):
  """``Result.from_dict(to_dict())`` after strict JSON (NaN bounds of fixed membership
  included); a damaged dict is refused; ``store=`` computes once and reuses the game."""
  from dpaudit import results
  config = _config(num_members=20, num_reference=40, num_synthetic=60, attacks=("gan_leaks",))
  data = _gaussian_data(200)
  store = results.CellStore(str(tmp_path))
  first = domias.run(jax.random.key(0), config, data=data, store=store)
  plain = results.loads(results.dumps(first.to_dict()))
  assert results.dumps(domias.Result.from_dict(plain).to_dict()) == results.dumps(
      first.to_dict())
  for damaged in ({**plain, "quality": "x"}, {k: v for k, v in plain.items() if k != "attacks"},
                  {**plain, "attacks": {"gan_leaks": {"auc": 0.5}}}):
    with pytest.raises((KeyError, TypeError, ValueError)):
      domias.Result.from_dict(damaged)
  seen = []
  again = domias.run(jax.random.key(0), config, data=data, store=store,
                     progress=lambda *a: seen.append(a))
  assert seen == [(3, 3, "reused")]
  assert results.dumps(again.to_dict()) == results.dumps(first.to_dict())


def test_shifted_split_draws_members_from_a_and_the_reference_from_the_mixture():
  """App. E: members (and hold-out) have A = 1, D_ref holds round(share |D_ref|) records with
  A = 0, the non-members follow D_ref's mixture (the paper) or all records (the authors' code),
  and column A is hidden from every set."""
  rng = np.random.default_rng(5)
  data = np.c_[np.arange(400.0), rng.normal(size=400), np.arange(400) % 4 == 0]  # A: 100 of 400
  a_of = lambda rows: data[np.searchsorted(data[:, 0], rows[:, 0]), 2]  # noqa: E731
  config = _config(num_members=30, num_reference=40, num_non_members=20, num_holdout=10,
                   shift_column=2, reference_shift=0.25)
  split = domias.split_data(jax.random.key(0), data, config)
  assert split.candidates.shape == (50, 2) and split.reference.shape == (40, 2)
  assert a_of(split.members).all() and a_of(split.holdout).all()
  assert a_of(split.reference).sum() == 30 and a_of(split.candidates[~split.is_member]).sum() == 15
  rows = np.concatenate([split.candidates, split.reference, split.holdout])[:, 0]
  assert len(np.unique(rows)) == rows.size
  population = domias.split_data(jax.random.key(0), data, dataclasses.replace(
      config, shift_non_members="population"))
  assert a_of(population.members).all() and a_of(population.reference).sum() == 30
  with pytest.raises(ValueError, match="needs 130 records with A = 1"):
    domias.split_data(jax.random.key(0), data, dataclasses.replace(config, reference_shift=0.0,
                                                                   num_reference=70))
  with pytest.raises(ValueError, match="fixed member set"):
    _config(shift_column=2, membership="bernoulli")


def test_the_prior_replaces_the_reference_density_and_needs_no_reference_attacks():
  """App. C: with the Gaussian prior DOMIAS changes, Eq. 1 (the same generator and synthetic
  data) does not; attacks that need D_ref are refused."""
  data = _gaussian_data(400)
  config = _config(num_members=40, num_reference=60, num_synthetic=200, attacks=("domias", "eq1"),
                   generator_config={"noise": 0.3})
  with_data = domias.run(jax.random.key(4), config, data=data)
  prior = domias.run(jax.random.key(4), dataclasses.replace(
      config, reference_density="gaussian_prior", prior_columns=(0,)), data=data)
  assert prior.attacks["eq1"] == with_data.attacks["eq1"]
  assert prior.attacks["domias"]["auc"] != with_data.attacks["domias"]["auc"]
  with pytest.raises(ValueError, match="no reference data"):
    _config(reference_density="gaussian_prior", attacks=("domias", "logan_d1"))
  with pytest.raises(ValueError, match="beyond the 3"):
    domias.run(jax.random.key(4), dataclasses.replace(
        config, reference_density="gaussian_prior", prior_columns=(3,)), data=data)


_FITS = []


def _fit_counted(key, data, config, discrete_columns):
  _FITS.append(data.shape[0])
  return tabular_generators.GENERATORS["additive_noise"].fit(key, data, config, discrete_columns)


tabular_generators.register_generator(
    "counted_noise_for_tests", tabular_generators.AdditiveNoiseConfig, _fit_counted,
    tabular_generators.GENERATORS["additive_noise"].sample, replace=True)


def test_baselines_choose_the_form_of_gan_leaks_cal_and_logan():
  """The paper's GAN-leaks CAL fits a reference generator to D_ref; the authors' code's uses
  D_ref itself (one fit only), and LOGAN 0 then takes a CtganCriticConfig."""
  config = _config(num_members=20, num_reference=40, num_synthetic=60, attacks=("gan_leaks_cal",),
                   generator="counted_noise_for_tests")
  _FITS.clear()
  domias.run(jax.random.key(0), config, data=_gaussian_data(200))
  assert _FITS == [20, 40]
  _FITS.clear()
  domias.run(jax.random.key(0), dataclasses.replace(config, baselines="authors_code"),
             data=_gaussian_data(200))
  assert _FITS == [20]
  authors = _config(baselines="authors_code", logan_config={"epochs": 3})
  assert authors.logan() == domias_attacks.CtganCriticConfig(epochs=3)
  with pytest.raises(ValueError, match="logan_config"):
    _config(baselines="authors_code", logan_config={"iterations": 3})
  with pytest.raises(ValueError, match="baselines='code' is not one of"):
    _config(baselines="code")


def test_mst_generator_needs_public_edges_and_samples_inside_them():
  """MST with a public binning: whole-number columns stay whole, every value inside the edges;
  at a tiny epsilon every column is merged to one value and sampling still works."""
  rng = np.random.default_rng(6)
  data = np.c_[rng.normal(size=60), rng.integers(0, 3, 60)]
  edges = domias.public_binning(data, bins=4)
  assert edges[1] == (0.0, 1.0, 2.0, 3.0)  # one bin per value of the 3-valued column
  generator = tabular_generators.fit_generator(
      jax.random.key(0), "mst", data, {"edges": edges, "epsilon": 1e-3, "iters": 10,
                                        "select_iters": 5})
  rows = generator.sample(jax.random.key(1), 50)
  assert rows.shape == (50, 2) and set(np.unique(rows[:, 1])) <= {0.0, 1.0, 2.0}
  assert edges[0][0] <= rows[:, 0].min() and rows[:, 0].max() <= edges[0][-1]
  assert generator.model.epsilon == 1e-3
  with pytest.raises(ValueError, match="needs public bin edges"):
    tabular_generators.fit_generator(jax.random.key(0), "mst", data, {})


def test_stored_games_keep_their_cells_when_later_fields_hold_their_defaults():
  from dpaudit.audits.domias import _LATER_FIELDS, _cell_config
  fields = {f.name for f in dataclasses.fields(domias.DomiasConfig)}
  assert set(_cell_config(domias.DomiasConfig())) == fields - set(_LATER_FIELDS)
  assert _cell_config(domias.DomiasConfig(baselines="authors_code"))["baselines"] == (
      "authors_code")
