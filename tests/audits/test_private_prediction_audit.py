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
  result = pp.run(jax.random.key(0), [model], _config())
  exact = accounting.noisy_argmax_renyi(jnp.array([0.0, 8.0, 0.0]), jnp.array([1.0, 7.0, 0.0]),
                                        2.0, jnp.asarray(ORDERS)).forward
  np.testing.assert_allclose(result.per_query.exact[0], exact, rtol=1e-10)
  assert np.all(result.class_probabilities_standard_error < 1e-12)  # every histogram is the same
  assert np.all(result.per_query.two_cut[0] <= result.per_query.exact[0])
  assert np.all(result.per_query.k_cut[0] <= result.per_query.exact[0])
  assert np.all(result.per_query.exact[0] <= result.per_query.data_independent[0])
  assert result.counts.shape == (1, 2, 3) and np.all(result.counts.sum(-1) == 20_000)


def _coverage(algorithm, model, truth_key, config, reps):
  truth = pp.run(truth_key, [model], config.__class__(**{
      **config.__dict__, "num_trials": 4, "num_histograms": 50_000})).per_query.exact[0]
  assert np.all(truth > 0.01)  # a model that leaks, so the bound has something to approach
  misses = 0
  for rep in range(reps):
    result = pp.run(jax.random.key(100 + rep), [model], config)
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
  result = pp.run(jax.random.key(2), [strong, weak], _config(num_histograms=4096))
  per = result.per_query
  assert per.exact.shape == (2, 2)
  # P' = P: the same law on both sides; the mixture estimate (common random numbers) says so
  # to within its sampling error
  np.testing.assert_array_less(per.exact[1], 1e-4)
  assert np.all(per.exact[0] > 0.05)
  for name in ("two_cut", "k_cut", "exact", "data_dependent", "data_independent"):
    curve = getattr(per, name)
    np.testing.assert_allclose(result.composed[name], curve.sum(axis=0))
    np.testing.assert_allclose(result.worst_query[name], curve.max(axis=0))
    np.testing.assert_allclose(result.average_query[name], curve.mean(axis=0))
  np.testing.assert_allclose(per.data_independent[0], np.asarray(ORDERS) / 4.0)  # alpha/sigma^2
  assert result.epsilon["exact"] < result.epsilon["data_independent"]
  plain = result.to_dict()
  assert plain["num_queries"] == 2 and plain["config"]["algorithm"] == "pate"


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
  model = H.pate_model([0.5, 0.5], [1.0, 0.0], 4)
  with pytest.raises(ValueError, match="models\\[0\\] is a PateModel; algorithm='capc' needs "
                                       "CapcModel"):
    pp.run(jax.random.key(0), [model], _config(algorithm="capc"))
  with pytest.raises(ValueError, match="models is empty"):
    pp.run(jax.random.key(0), [], _config())


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
  assert adv[best]["exact_epsilon"] == max(a["exact_epsilon"] for a in adv.values())
  assert out["epsilon"]["exact"] == adv[best]["exact_epsilon"]
  assert out["teacher_accuracy"] == pytest.approx(np.mean([[0, 0], [0, 0], [0, 0], [1, 0],
                                                           [0, 1]]))
  miaq = pp.promptpate_audit(jax.random.key(0), (None, None, None), train, test, "pois_miaq",
                             5, 2, 10, audit)
  # Pois-MIAQ: a teacher that answered query 0's truth (green: teacher 3) gets it mislabelled
  assert miaq["adversary"][0] == {"teacher": 3, "crafted_label": 2, "vote_before": 1,
                                  "vote_after": 2}
  assert miaq["neighbor_histograms"][0] == [3.0, 0.0, 2.0]


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
  assert set(out["repeated_query_epsilon"]) == {"exact", "data_independent"}
  with pytest.raises(ValueError, match="algorithm='private_knn'"):
    pp.text_knn_audit(jax.random.key(0), (None, None, None), train, _task([1, 0, 2]), knn,
                      _config())


def test_run_resumes_from_finished_queries(tmp_path, monkeypatch):
  models = [H.pate_model([0.6, 0.4], [0.0, 1.0], 6), H.pate_model([0.5, 0.5], [1.0, 0.0], 6)]
  config = _config(num_trials=4000, num_histograms=32)
  first = pp.run(jax.random.key(0), models, config, checkpoint_dir=str(tmp_path))
  assert sorted(p.name for p in tmp_path.iterdir()) == ["query_00000.npz", "query_00001.npz"]
  kept = (tmp_path / "query_00000.npz").stat().st_mtime_ns
  (tmp_path / "query_00001.npz").unlink()
  calls = []
  original = pp._query_counts
  monkeypatch.setattr(pp, "_query_counts", lambda *a: calls.append(1) or original(*a))
  again = pp.run(jax.random.key(0), models, config, checkpoint_dir=str(tmp_path))
  assert len(calls) == 1  # only the missing query ran
  assert (tmp_path / "query_00000.npz").stat().st_mtime_ns == kept
  for name in ("two_cut", "k_cut", "exact", "data_dependent"):
    np.testing.assert_array_equal(getattr(again.per_query, name),
                                  getattr(first.per_query, name))
  np.testing.assert_array_equal(again.counts, first.counts)
  # another key writes and reads its own queries: nothing stale is reused
  pp.run(jax.random.key(1), models, config, checkpoint_dir=str(tmp_path))
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
