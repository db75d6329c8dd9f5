"""The private-prediction audit over histogram models: known answers, validity, composition."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit import accounting
from dpaudit.audits import private_prediction as pp
from dpaudit.mechanisms import histograms as H

ORDERS = (2.0, 8.0)


def _config(**kwargs):
  base = dict(algorithm="pate", sigma=2.0, num_trials=20_000, orders=ORDERS,
              k_cut_method="goodman", num_histograms=512, chunk_size=4096)
  base.update(kwargs)
  return pp.PredictionAuditConfig(**base)


def test_certain_votes_give_the_exact_divergence_of_two_fixed_histograms():
  """P and P' one-hot: H_S and H_S' are fixed, so the mixture divergence is Eq. (4)'s."""
  model = H.pate_model([0.0, 1.0, 0.0], [1.0, 0.0, 0.0], 8)
  result = pp.run(jax.random.key(0), _config(), models=[model])
  exact = accounting.noisy_argmax_renyi(jnp.array([0.0, 8.0, 0.0]), jnp.array([1.0, 7.0, 0.0]),
                                        2.0, jnp.asarray(ORDERS)).forward
  divergence = result.per_query.model_divergence
  np.testing.assert_allclose(divergence[0], exact, rtol=1e-10)
  assert np.all(result.class_probabilities_standard_error < 1e-12)  # every histogram is the same
  assert np.all(result.per_query.model_divergence_sd < 1e-12)  # and so every resample
  assert np.all(result.per_query.two_cut[0] <= divergence[0])
  assert np.all(result.per_query.k_cut[0] <= divergence[0])
  assert np.all(divergence[0] <= result.per_query.data_independent[0])
  assert result.counts.shape == (1, 2, 3) and np.all(result.counts.sum(-1) == 20_000)


def _coverage(algorithm, model, truth_key, config, reps):
  truth = pp.run(truth_key, config.__class__(**{
      **config.__dict__, "num_trials": 4, "num_histograms": 50_000}),
      models=[model]).per_query.model_divergence[0]
  assert np.all(truth > 0.01)  # a model that leaks, so the bound has something to approach
  misses = 0
  for rep in range(reps):
    result = pp.run(jax.random.key(100 + rep), config, models=[model])
    misses += bool(np.any(result.per_query.two_cut[0] > truth))
  return misses, truth


@pytest.mark.parametrize("algorithm", ["pate", "private_knn"])
def test_two_cut_stays_below_the_model_divergence_as_often_as_promised(algorithm):
  """The bar of issue 14: over repeated audits, the 2-cut bound exceeds the model's exact
  divergence in at most about `significance` of them (here at any of the orders, which is
  stricter)."""
  # Two classes: the one non-trivial set makes the 2-cut the whole divergence, so a bound
  # that ignored its confidence would exceed the truth about half the time.
  if algorithm == "pate":
    model = H.pate_model([0.7, 0.3], [0.0, 1.0], 6)
    config = _config(significance=0.05, num_histograms=64)
  else:
    votes = H.KnnVoteModel(np.array([0.7, 0.3]), np.array([0.6, 0.4]))
    model = H.knn_model(votes, 6, poison_label=1, inclusion=0.9)
    config = _config(algorithm="private_knn", sampling_rate=0.3, significance=0.05,
                     num_histograms=64)
  reps = 40 if algorithm == "pate" else 60
  misses, truth = _coverage(algorithm, model, jax.random.key(1), config, reps)
  tolerance = 3 * np.sqrt(0.05 * 0.95 / reps)
  # (with the confidence ignored, significance 0.9 in place of 0.05, the misses were 18 of 60
  # for PATE and 11 of 60 for Private-kNN)
  assert misses / reps <= 0.05 + tolerance, (misses, truth)


def test_composition_worst_and_average_over_queries():
  strong = H.pate_model([0.6, 0.3, 0.1], [0.0, 0.0, 1.0], 6)
  weak = H.pate_model([0.6, 0.3, 0.1], [0.6, 0.3, 0.1], 6)
  result = pp.run(jax.random.key(2), _config(num_histograms=4096), models=[strong, weak])
  per = result.per_query
  assert per.model_divergence.shape == per.model_divergence_sd.shape == (2, 2)
  # P' = P: the same law on both sides; the mixture estimate (common random numbers) says so
  # to within its sampling error
  np.testing.assert_array_less(per.model_divergence[1], 1e-4)
  assert np.all(per.model_divergence[0] > 0.05)
  for name in pp.CURVES:
    curve = getattr(per, name)
    np.testing.assert_allclose(result.composed[name], curve.sum(axis=0))
    np.testing.assert_allclose(result.worst_query[name], curve.max(axis=0))
    np.testing.assert_allclose(result.average_query[name], curve.mean(axis=0))
  np.testing.assert_allclose(per.data_independent[0], np.asarray(ORDERS) / 4.0)  # alpha/sigma^2
  # the spread of the worst query is the spread of the strong query's estimate (which is the
  # maximum in every replicate); the sum's sd is no smaller
  np.testing.assert_allclose(result.worst_query["model_divergence_sd"],
                             per.model_divergence_sd[0], rtol=1e-9)
  natural = result.composition()
  assert natural["kind"] == "natural" and natural["num_queries"] == 2
  assert np.all(np.asarray(natural["rdp"]["model_divergence_sd"])
                >= per.model_divergence_sd[0] - 1e-12)
  assert natural["epsilon"]["model_divergence"] < natural["epsilon"]["data_independent"]
  repeated = result.composition(query_repeats=10)
  assert repeated["kind"] == "repeated" and repeated["num_queries"] == 10
  for name in pp.CURVES:
    np.testing.assert_allclose(repeated["rdp"][name], 10 * result.worst_query[name])
  np.testing.assert_allclose(repeated["rdp"]["model_divergence_sd"],
                             10 * result.worst_query["model_divergence_sd"], rtol=1e-9)
  plain = result.to_dict(query_repeats=10)
  assert plain["num_queries"] == 2 and plain["config"]["algorithm"] == "pate"
  # what the numbers are, stored with them
  assert plain["composed"]["caveat"] == pp.COMPOSITION_CAVEAT
  assert plain["caveats"] == [pp.COMPOSITION_CAVEAT]
  assert "freshly trained teachers" in pp.COMPOSITION_CAVEAT
  assert plain["model_divergence_method"] == "monte_carlo"
  for key in ("worst_query", "two_cut", "k_cut", "model_divergence", "model_divergence_sd",
              "composed", "composed.epsilon"):
    assert key in plain["meaning"]
  assert "no composition assumption" in plain["meaning"]["worst_query"]
  assert "NOT an (epsilon, delta) lower bound" in plain["meaning"]["composed.epsilon"]
  # the validator of stored cells accepts it, and refuses an empty or edited cell
  from dpaudit import results
  stored = results.loads(results.dumps(plain))
  pp.check_cell(stored)
  with pytest.raises(KeyError, match="cell has no 'orders'"):
    pp.check_cell({})
  edited = results.loads(results.dumps(plain))
  del edited["composed"]["caveat"]
  with pytest.raises(KeyError, match="cell composed has no 'caveat'"):
    pp.check_cell(edited)
  edited = results.loads(results.dumps(plain))
  edited["per_query"]["two_cut"] = edited["per_query"]["two_cut"][:1]  # a query dropped
  with pytest.raises(ValueError, match=r"per_query\['two_cut'\] has shape \(1, 2\); "
                                       r"expected \(2, 2\)"):
    pp.check_cell(edited)
  edited = results.loads(results.dumps(plain))
  edited["worst_query"]["k_cut"] = [5.0, 5.0]
  with pytest.raises(ValueError, match="worst_query\\['k_cut'\\] disagrees with per_query"):
    pp.check_cell(edited)
  edited = results.loads(results.dumps(plain))
  edited["composed"]["epsilon"]["two_cut"] = -1.0
  with pytest.raises(ValueError, match="composed epsilon"):
    pp.check_cell(edited)


def test_a_curve_of_zero_reads_no_leakage_measured():
  """Thm. 1 never reaches 0 (its floor is 0.138 at delta = 1e-6 over orders up to 64), but a
  curve that is 0 at every order is no leakage: 0.0 in results, "0 (no leakage measured)" in
  displays."""
  from dpaudit import results
  from dpaudit.audits import noisy_argmax as na
  orders = (2.0, 8.0, 64.0)
  eps, order = na.thm1_epsilon(np.zeros(3), orders, 1e-6)
  assert eps == 0.0 and np.isnan(order)
  tiny, _ = na.thm1_epsilon(np.full(3, 1e-9), orders, 1e-6)
  assert 0.1 < tiny < 0.2  # the floor that used to be shown for "nothing measured"
  curves = {name: np.zeros(3) for name in pp.CURVES}
  curves["data_independent"] = np.asarray(orders) / 4.0
  block = pp.composition(curves, orders, 1e-6, 5, "natural")
  assert block["epsilon"]["two_cut"] == block["epsilon"]["k_cut"] == 0.0
  assert block["epsilon"]["data_independent"] > 0
  assert set(block["no_leakage_measured"]) == {"two_cut", "k_cut", "model_divergence",
                                                "data_dependent"}
  assert na.format_epsilon(block["epsilon"]["two_cut"]) == "0 (no leakage measured)"
  assert na.format_epsilon(results.spread([0.0, 0.0])) == "0 (no leakage measured)"
  assert na.format_epsilon(0.1234) == "0.123"
  assert na.epsilon_table({"zero": np.zeros(3)}, orders, 10, 1e-6)[0] == {"zero": 0.0}


def test_bootstrap_sd_of_the_model_divergence_matches_the_spread_over_seeds():
  """The bootstrap over sampled histograms (common indices for S and S') gives about the
  standard deviation that independent reruns show."""
  model = H.pate_model([0.7, 0.3], [0.0, 1.0], 6)
  # (20 seeds: the standard deviation of 10 values is itself uncertain by a quarter; seeds
  # 300-309 happened to give 0.46 of the bootstrap's, 300-339 gave 0.92)
  runs = [pp.model_divergence(jax.random.key(seed), H.PATE, model, 2.0, 256, ORDERS, 200)
          for seed in range(20)]
  across_seeds = np.std([r.value for r in runs], axis=0, ddof=1)
  bootstrap = np.mean([r.sd for r in runs], axis=0)
  assert np.all(bootstrap > 0.5 * across_seeds) and np.all(bootstrap < 2.0 * across_seeds), (
      bootstrap, across_seeds)
  assert runs[0].replicates.shape == (200, 2)
  np.testing.assert_allclose(runs[0].sd, runs[0].replicates.std(axis=0, ddof=1))


def test_runner_up_poison_labels():
  """The runner-up label: the class with most clean votes other than the true one."""
  votes = np.array([[6, 3, 1],   # truth 0 is the plurality: the runner-up, 1
                    [1, 2, 7],   # truth 2: 1 (tie-free runner-up)
                    [2, 5, 2],   # truth 0, plurality 1 is wrong: 1 (still a mislabel)
                    [0, 9, 0],   # truth 1 holds every vote: the next class, 2
                    [4, 0, 4]])  # truth 1: classes 0 and 2 tie: the lower, 0
  assert pp.runner_up_labels(votes, [0, 2, 0, 1, 1]).tolist() == [1, 1, 1, 2, 0]
  x = np.arange(12, dtype=float).reshape(6, 2)
  y = np.array([0, 1, 2, 0, 1, 2])
  _, cy, _, _ = pp.crafted_points("pois_miaq", x, y, 2, 3, poison=[2, 0])
  assert cy.tolist() == [2, 0]
  _, cy, _, _ = pp.crafted_points("nat_miaq", x, y, 2, 3, poison=[2, 0])
  assert cy.tolist() == [0, 1]  # Nat-MIAQ keeps the true labels
  _, cy, _, _ = pp.crafted_points("pois_minq", x, y, 3, 3, poison=[2])
  assert cy.tolist() == [2]
  with pytest.raises(ValueError, match="crafts 1 points"):
    pp.crafted_points("pois_minq", x, y, 3, 3, poison=[2, 1])
  # Private-kNN: the labels among the crafted point's own k nearest neighbours in S
  train_x = np.array([[0.0], [0.1], [0.2], [0.3], [5.0], [5.1]])
  train_y = np.array([0, 2, 2, 1, 1, 1])
  test_x, test_y = np.array([[0.05], [5.05]]), np.array([0, 1])
  # point 0 (truth 0): its 4 nearest have labels 0, 2, 2, 1 -> 2 (next: 1); point 1 (truth 1):
  # labels 1, 1, 1, 2 -> 2 (next: 2)
  for rule, expected in (("next", [1, 2]), ("runner_up", [2, 2])):
    config = pp.KnnAuditConfig(adversary="pois_miaq", num_neighbors=4, sampling_rate=0.5,
                               num_queries=2, poison_label=rule)
    _, chosen = pp.knn_models(train_x, train_y, test_x, test_y, 3, config)
    assert chosen["crafted_labels"] == expected and chosen["poison_label"] == rule
  with pytest.raises(ValueError, match="poison_label='second'"):
    pp.KnnAuditConfig(poison_label="second")
  with pytest.raises(ValueError, match="poison_label='second'"):
    pp.EnsembleAuditConfig(poison_label="second")


def test_clean_votes_probe_of_the_ensemble():
  """The probe trains clean teachers only (S alone): on a point whose true class no training
  example has, they vote the majority class, which the runner-up rule then picks."""
  from dpaudit import models as models_lib
  from dpaudit import teachers
  rng = np.random.default_rng(0)
  x = rng.normal(size=(40, 4)).astype(np.float32)
  y = np.where(rng.random(40) < 0.9, 2, 1)  # no class 0
  model = models_lib.make_model("logistic", (4,), 3)
  config = pp.EnsembleAuditConfig(adversary="pois_miaq", model="logistic", num_teachers=4,
                                  num_instantiations=2, instantiations_per_call=2,
                                  num_queries=2,
                                  teacher=teachers.TeacherConfig(epochs=5, learning_rate=0.05))
  votes = pp.clean_votes(jax.random.key(0), model, x, y, x[:2], x[:2], "random", config)
  assert votes.shape == (2, 4, 2)
  hist = np.eye(3, dtype=int)[votes].sum(axis=(0, 1))  # (points, classes) over 2 x 4 teachers
  assert np.all(hist[:, 2] > hist[:, 1]), hist
  assert pp.runner_up_labels(hist, [0, 0]).tolist() == [2, 2]  # "next" would give 1


def test_knn_data_independent_bound_is_the_subsampled_gaussian():
  config = _config(algorithm="private_knn", sampling_rate=0.2, sigma=30.0)
  expected = accounting.dpsgd_rdp(30.0 / np.sqrt(2.0), 0.2, 1, np.asarray(ORDERS))
  np.testing.assert_allclose(pp.data_independent_rdp(config), expected)


def test_bad_input():
  with pytest.raises(ValueError, match="algorithm='patee'"):
    _config(algorithm="patee")
  with pytest.raises(ValueError, match="sampling_rate is required"):
    _config(algorithm="private_knn")
  with pytest.raises(ValueError, match="sampling_rate=1.5"):
    _config(algorithm="private_knn", sampling_rate=1.5)
  with pytest.raises(ValueError, match=r"sigma=inf is outside the valid range \(0, inf\)"):
    _config(sigma=float("inf"))
  with pytest.raises(ValueError, match="num_histograms=512.5 must be an integer >= 2"):
    _config(num_histograms=512.5)
  with pytest.raises(ValueError, match="num_trials=True must be an integer >= 4"):
    _config(num_trials=True)
  with pytest.raises(ValueError, match="num_bootstrap=1 must be an integer >= 2"):
    _config(num_bootstrap=1)
  assert type(_config(num_histograms=np.int64(64)).num_histograms) is int
  with pytest.raises(ValueError, match="num_instantiations=2.0 must be an integer >= 2"):
    pp.EnsembleAuditConfig(num_instantiations=2.0)
  model = H.pate_model([0.5, 0.5], [1.0, 0.0], 4)
  with pytest.raises(ValueError, match="models\\[0\\] is a PateModel; algorithm='capc' needs "
                                       "CapcModel"):
    pp.run(jax.random.key(0), _config(algorithm="capc"), models=[model])
  with pytest.raises(ValueError, match="models is empty"):
    pp.run(jax.random.key(0), _config(), models=[])


def test_crafted_points_of_each_adversary():
  x = np.arange(12, dtype=float).reshape(6, 2)
  y = np.array([0, 1, 2, 0, 1, 2])
  cx, cy, q, qy = pp.crafted_points("nat_miaq", x, y, 3, 3)
  np.testing.assert_array_equal(cx, q) and np.testing.assert_array_equal(cy, y[:3])
  _, cy, _, _ = pp.crafted_points("pois_miaq", x, y, 3, 3)
  np.testing.assert_array_equal(cy, (y[:3] + 1) % 3)
  cx, cy, q, qy = pp.crafted_points("pois_minq", x, y, 4, 3)
  assert cx.shape == (1, 2) and cy.tolist() == [1] and q.shape == (4, 2)
  np.testing.assert_array_equal(qy, y[1:5])
  with pytest.raises(ValueError, match="num_queries=6 needs 7 test points"):
    pp.crafted_points("pois_minq", x, y, 6, 3)


def test_model_fit_is_one_for_multinomial_votes():
  rng = np.random.default_rng(3)
  votes = rng.choice(3, size=(4000, 7, 5), p=[0.5, 0.3, 0.2])  # independent teachers
  assert pp.model_fit(votes, 7, 3)["dispersion_ratio"] == pytest.approx(1.0, abs=0.05)
  alike = np.repeat(votes[:, :1], 7, axis=1)  # all teachers vote alike: over-dispersed
  assert pp.model_fit(alike, 7, 3)["dispersion_ratio"] > 5


def test_knn_models_of_each_adversary():
  rng = np.random.default_rng(4)
  train_x, test_x = rng.normal(size=(60, 3)), rng.normal(size=(12, 3))
  train_y, test_y = rng.integers(0, 3, 60), rng.integers(0, 3, 12)
  config = pp.KnnAuditConfig(adversary="pois_miaq", num_neighbors=5, sampling_rate=0.3,
                             num_queries=4)
  models, chosen = pp.knn_models(train_x, train_y, test_x, test_y, 3, config)
  assert len(models) == 4 and chosen["inclusion_probabilities"] == [0.3] * 4  # rank 1: gamma
  for m, y in zip(models, test_y[:4]):
    assert int(np.argmax(m.poison_class)) == (y + 1) % 3
  config = pp.KnnAuditConfig(adversary="pois_minq", num_neighbors=5, sampling_rate=0.3,
                             num_queries=4, poison_source="train")
  models, chosen = pp.knn_models(train_x, train_y, test_x, test_y, 3, config)
  # E(x) by brute force: the chosen training point has the largest expected top-k count
  queries = test_x[1:5]
  d_train = ((queries[:, None] - train_x[None]) ** 2).sum(-1)
  ranks = 1 + (d_train[:, None, :] < d_train[:, :, None]).sum(-1)
  expected = np.asarray(H.knn_inclusion_probability(ranks, 5, 0.3)).sum(0)
  assert chosen["poison_index"] == int(np.argmax(expected))
  assert chosen["expected_top_k_queries"] == pytest.approx(expected.max())
  with pytest.raises(ValueError, match="num_neighbors=80 exceeds the 60 training points"):
    pp.knn_models(train_x, train_y, test_x, test_y, 3,
                  pp.KnnAuditConfig(num_neighbors=80, num_queries=4))


def test_rao_blackwell_two_cut_is_valid_and_matches_counting_here():
  """Beyond the paper: the 2-cut from Eq. (4) averaged over sampled histograms (empirical
  Bernstein). Validity over repeated audits; and on this model, where the histogram's own
  randomness dominates, it certifies about what counting the same number of releases does."""
  model = H.pate_model([0.7, 0.3], [0.0, 1.0], 6)
  truth = np.array([0.07062125, 0.15213699])  # exact mixture divergence, 50,000 histograms
  misses = 0
  reps = 20
  for rep in range(reps):
    rb = pp.rao_blackwell_two_cut(jax.random.key(200 + rep), H.PATE, model, 2.0, 1000, ORDERS,
                                  significance=0.05)
    misses += bool(np.any(rb.lower_bound > truth))
    assert rb.sets.shape == (2, 2)
  # (with zero-width intervals, i.e. the point estimates, this fails: 0.05 is a real limit)
  assert misses / reps <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / reps)
  assert np.all(rb.lower_bound > 0)  # 1,000 histograms certify something here


def test_model_fit_of_capc_uses_each_teachers_own_distribution():
  rng = np.random.default_rng(5)
  p_teacher = rng.dirichlet(np.ones(3), size=6)  # six teachers, each its own P^i
  votes = np.stack([rng.choice(3, size=(3000, 4), p=p) for p in p_teacher], axis=1)
  assert pp.model_fit(votes, 6, 3, "capc")["dispersion_ratio"] == pytest.approx(1.0, abs=0.06)
  assert pp.model_fit(votes, 6, 3, "pate")["dispersion_ratio"] < 0.95  # pooled: too wide


def test_histogram_models_from_votes_pate_and_capc():
  """Votes (G, k + M, Q) -> one model per query: MIAQ pairs query j with crafted point j's
  teacher, Pois-MINQ every query with the one poison's teacher."""
  rng = np.random.default_rng(6)
  votes = rng.integers(0, 3, size=(10, 4 + 2, 2))  # k = 4 teachers, M = 2 crafted points
  votes[:, 4, 0] = 2  # crafted point 0's teacher always votes 2 on query 0
  miaq = pp.EnsembleAuditConfig(adversary="pois_miaq", num_teachers=4, num_queries=2)
  models = pp.histogram_models(votes, "pate", miaq, 3)
  assert len(models) == 2 and all(isinstance(m, H.PateModel) for m in models)
  np.testing.assert_array_equal(models[0].neighbor_class, [0.0, 0.0, 1.0])
  assert [t.shape for t in models[0].table_k.thresholds] == [
      t.shape for t in models[1].table_k.thresholds]  # one window: one compiled program
  capc = pp.histogram_models(votes[:, :5], "capc", pp.EnsembleAuditConfig(
      adversary="pois_minq", num_teachers=4, num_queries=2), 3)
  assert all(isinstance(m, H.CapcModel) for m in capc)
  assert capc[0].random.shape == capc[1].random.shape
  counts = np.stack([np.bincount(votes[:, 0, 0], minlength=3)]) / 10
  np.testing.assert_allclose(capc[0].first, counts[0], atol=1e-6)
  np.testing.assert_allclose(capc[0].neighbor_first, np.bincount(votes[:, 4, 0], minlength=3)
                             / 10, atol=1e-6)


def test_embedding_adversary_is_the_weighted_mean_of_the_queries_neighbours():
  train_x = np.array([[0.0, 0.0], [1.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
  queries = np.array([[0.1, 0.0], [0.9, 0.0], [0.0, 9.0]])
  points, classes = pp.embedding_candidates(queries, np.array([0, 0, 2]), train_x, 3, top=2)
  # class 0: both queries' top 2 are points 0 and 1 (twice each); class 2: points 3 and 0
  np.testing.assert_allclose(points, [[0.5, 0.0], [0.0, 5.0]])
  assert classes.tolist() == [0, 2]
  rng = np.random.default_rng(5)
  train_x, test_x = rng.normal(size=(60, 3)), rng.normal(size=(12, 3))
  train_y, test_y = rng.integers(0, 3, 60), rng.integers(0, 3, 12)
  config = pp.KnnAuditConfig(adversary="pois_minq", num_neighbors=5, sampling_rate=0.3,
                             num_queries=4, poison_source="embedding")
  models, chosen = pp.knn_models(train_x, train_y, test_x, test_y, 3, config)
  assert len(models) == 4 and chosen["poison_source"] == "embedding"
  assert 0 < chosen["expected_top_k_queries"] <= 0.3 * 4


class _CopyingTeacher:
  """A stand-in for the language model: it answers its prompt's example label (the first
  answer in the prompt), or the class an All-same prompt forces."""

  def __init__(self, task):
    self.task = task

  def __call__(self, params, config, tokenizer, prompts, names):
    votes = []
    for prompt in prompts:
      if prompt.startswith("Whatever"):
        word = prompt.split("answer ", 1)[1].split(" ", 1)[0]
      else:
        word = prompt.split(f"{self.task.answer}: ", 1)[1].split("\n", 1)[0]
      votes.append(names.index(word))
    return np.array(votes, np.int32)


def _task(labels):
  from dpaudit.data import text_classification as tc
  return tc.TextClassification(
      name="toy", split="train", texts=[f"t{i}" for i in range(len(labels))],
      labels=np.array(labels, np.int32), class_names=("red", "green", "blue"),
      description="Name the colour.", item="Text")


def test_promptpate_minq_adversaries_with_a_copying_teacher(monkeypatch):
  from dpaudit.audits import noisy_argmax as na_audit
  from dpaudit.models import llama
  train, test = _task([0, 0, 0, 1, 2]), _task([1, 2])
  monkeypatch.setattr(llama, "greedy_label", _CopyingTeacher(train))
  audit = na_audit.NoisyArgmaxAuditConfig(sigma=1.0, num_trials=2000, orders=ORDERS,
                                          num_bootstrap=10, k_cut_method="goodman")
  out = pp.promptpate_audit(jax.random.key(0), (None, None, None), train, test, "pois_minq",
                            5, 2, 1, audit)
  # every query sees the teachers' example labels: 3 red, 1 green, 1 blue
  assert out["histograms"] == [[3, 1, 1], [3, 1, 1]]
  adv = out["minq_adversaries"]
  # runner-up of (3, 1, 1) is green; teacher 0 (red) is moved to green by confident,
  # unconfident and all_same; mapping sends red to the class most often second: green
  for name in ("confident", "unconfident", "all_same"):
    assert adv[name]["label"] == 1 and adv[name]["votes_changed"] == 2
  assert adv["mapping"]["mapping"][0] == 1 and adv["mapping"]["votes_changed"] == 2
  assert out["neighbor_histograms"] == [[2.0, 2.0, 1.0], [2.0, 2.0, 1.0]]
  best = out["best_minq_adversary"]
  leakage = [a["model_divergence_epsilon"] for a in adv.values()]
  assert adv[best]["model_divergence_epsilon"] == max(leakage)
  assert out["composed"]["epsilon"]["model_divergence"] == max(leakage)
  pp.check_cell(out)  # the layout of every cell; the model divergence exact here
  assert out["model_divergence_method"] == "exact" and out["composed"]["kind"] == "natural"
  assert np.all(np.asarray(out["per_query"]["model_divergence_sd"]) == 0.0)
  assert out["teacher_accuracy"] == pytest.approx(np.mean([[0, 0], [0, 0], [0, 0], [1, 0],
                                                           [0, 1]]))
  miaq = pp.promptpate_audit(jax.random.key(0), (None, None, None), train, test, "pois_miaq",
                             5, 2, 10, audit)
  # Pois-MIAQ: a teacher that answered query 0's truth (green: teacher 3) gets it mislabelled
  assert miaq["adversary"][0] == {"teacher": 3, "crafted_label": 2, "vote_before": 1,
                                  "vote_after": 2}
  assert miaq["neighbor_histograms"][0] == [3.0, 0.0, 2.0]
  pp.check_cell(miaq)
  assert miaq["composed"]["kind"] == "repeated" and miaq["composed"]["num_queries"] == 10
  runner_up = pp.promptpate_audit(jax.random.key(0), (None, None, None), train, test,
                                  "pois_miaq", 5, 2, 10, audit, poison_label="runner_up")
  # query 0's clean votes (3 red, 1 green, 1 blue), truth green: the runner-up label is red
  assert runner_up["adversary"][0] == {"teacher": 3, "crafted_label": 0, "vote_before": 1,
                                       "vote_after": 0}
  assert runner_up["poison_label"] == "runner_up"


def test_minq_poisons_choose_by_agreement():
  hist = np.array([[5, 0, 0], [2, 2, 1], [1, 3, 1], [0, 4, 1]])
  poisons = pp.minq_poisons(hist, 3)
  assert poisons["confident"] == {"query": 0, "label": 1}  # 5 votes; lone class -> next
  assert poisons["unconfident"] == {"query": 1, "label": 1}  # gap 0
  # runner-ups: 1, 1, 0, 2 -> all_same forces class 1
  assert poisons["all_same"] == {"label": 1}
  # first class 0 -> runner-up 1; first 1 -> runner-ups 0 and 2 (tie: lower); first 2: none
  assert poisons["mapping"] == {"mapping": [1, 0, 0]}


def test_text_knn_audit_embeds_with_the_language_model(monkeypatch):
  from dpaudit.models import llama
  seen = []

  def fake_embed(params, config, tokenizer, texts, batch_size):  # a text's class as feature
    seen.append(len(texts))
    return np.array([[float(t.endswith("1")), float(t.endswith("0"))] for t in texts])

  monkeypatch.setattr(llama, "embed_texts", fake_embed)
  train = _task([0, 1, 2, 0, 1, 2, 0, 1])
  train = train.take(range(8))
  knn = pp.KnnAuditConfig(adversary="nat_miaq", num_neighbors=3, sampling_rate=0.5,
                          num_queries=2, query_repeats=4)
  out = pp.text_knn_audit(jax.random.key(0), (None, None, None), train, _task([1, 0, 2]),
                          knn, _config(algorithm="private_knn", sampling_rate=0.5,
                                       num_trials=2000, num_histograms=16))
  assert seen == [8, 3] and out["task"] == "toy"
  assert out["feature_layer"] == "llm_mean_final_hidden_state"
  assert out["composed"]["kind"] == "repeated" and out["composed"]["num_queries"] == 4
  pp.check_cell(out)
  with pytest.raises(ValueError, match="algorithm='private_knn'"):
    pp.text_knn_audit(jax.random.key(0), (None, None, None), train, _task([1, 0, 2]), knn,
                      _config())


def test_run_resumes_from_finished_queries(tmp_path, monkeypatch):
  models = [H.pate_model([0.6, 0.4], [0.0, 1.0], 6), H.pate_model([0.5, 0.5], [1.0, 0.0], 6)]
  config = _config(num_trials=4000, num_histograms=32)
  first = pp.run(jax.random.key(0), config, models=models, checkpoint_dir=str(tmp_path))
  assert sorted(p.name for p in tmp_path.iterdir()) == ["query_00000.npz", "query_00001.npz"]
  kept = (tmp_path / "query_00000.npz").stat().st_mtime_ns
  (tmp_path / "query_00001.npz").unlink()
  calls = []
  original = pp._query_counts
  monkeypatch.setattr(pp, "_query_counts", lambda *a: calls.append(1) or original(*a))
  again = pp.run(jax.random.key(0), config, models=models, checkpoint_dir=str(tmp_path))
  assert len(calls) == 1  # only the missing query ran
  assert (tmp_path / "query_00000.npz").stat().st_mtime_ns == kept
  for name in ("two_cut", "k_cut", "model_divergence", "model_divergence_sd", "data_dependent"):
    np.testing.assert_array_equal(getattr(again.per_query, name),
                                  getattr(first.per_query, name))
  np.testing.assert_array_equal(again.counts, first.counts)
  # another key writes and reads its own queries: nothing stale is reused
  pp.run(jax.random.key(1), config, models=models, checkpoint_dir=str(tmp_path))
  assert len(calls) == 3


def test_teacher_votes_resume_per_call(tmp_path):
  from dpaudit import models as models_lib
  rng = np.random.default_rng(0)
  x, y = rng.normal(size=(24, 5)).astype(np.float32), rng.integers(0, 3, 24)
  model = models_lib.make_model("logistic", (5,), 3)
  config = pp.EnsembleAuditConfig(adversary="pois_minq", model="logistic", num_teachers=3,
                                  num_instantiations=3, instantiations_per_call=2,
                                  num_queries=2)
  args = (jax.random.key(0), model, x, y, x[:1], y[:1], x[:2], "random", config)
  first = pp.teacher_votes(*args, checkpoint_dir=str(tmp_path))
  assert sorted(p.name for p in tmp_path.iterdir()) == ["votes_000000.npz", "votes_000002.npz"]
  kept = (tmp_path / "votes_000000.npz").stat().st_mtime_ns
  (tmp_path / "votes_000002.npz").unlink()
  again = pp.teacher_votes(*args, checkpoint_dir=str(tmp_path))
  np.testing.assert_array_equal(again, first)
  assert (tmp_path / "votes_000000.npz").stat().st_mtime_ns == kept
  assert first.shape == (3, 4, 2)


def test_result_round_trips_progress_and_store(tmp_path):
  """``Result.from_dict(to_dict())`` rebuilds every array (after strict JSON too); a damaged
  dict is refused; progress ends at done == total; ``store=`` reuses the whole result."""
  from dpaudit import results
  models = [H.pate_model([0.6, 0.4], [0.0, 1.0], 6), H.pate_model([0.5, 0.5], [1.0, 0.0], 6)]
  config = _config(num_trials=400, num_histograms=16, num_bootstrap=4)
  seen = []
  store = results.CellStore(str(tmp_path))
  result = pp.run(jax.random.key(0), config, models=models, store=store,
                  progress=lambda *a: seen.append(a))
  assert seen[-1] == (1600, 1600, "query 2/2") and all(d <= t for d, t, _ in seen)
  for plain in (result.to_dict(), results.loads(results.dumps(result.to_dict()))):
    back = pp.Result.from_dict(plain)
    assert back.config == result.config
    np.testing.assert_array_equal(back.model_divergence_replicates,
                                  result.model_divergence_replicates)
    np.testing.assert_array_equal(back.counts, result.counts)
    assert back.counts.dtype == np.int64
    assert results.dumps(back.to_dict()) == results.dumps(result.to_dict())
  plain = result.to_dict()
  for damaged in ({**plain, "counts": [[1]]}, {k: v for k, v in plain.items() if k != "config"},
                  {**plain, "model_divergence_replicates": [[1.0]]}):
    with pytest.raises((KeyError, TypeError, ValueError)):
      pp.Result.from_dict(damaged)
  seen.clear()
  again = pp.run(jax.random.key(0), config, models=models, store=store,
                 progress=lambda *a: seen.append(a))
  assert seen == [(1600, 1600, "reused")]
  assert results.dumps(again.to_dict()) == results.dumps(result.to_dict())
