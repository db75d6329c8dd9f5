"""MST (McKenna et al. 2021) on private-pgm: a real generator. It is fitted on real Adult rows
and its samples' 1-way and 2-way marginals are held against the data; the zCDP conversion,
the binning and the bad inputs are checked on their own."""

import math

import jax
import numpy as np
import pytest

from dpaudit import data
from dpaudit.data import sources
from dpaudit.mechanisms import mst

COLUMNS = ("marital_status", "relationship", "race", "sex")


@pytest.fixture(scope="module")
def adult_table(tmp_path_factory):
  ds = data.load("adult", "train[:3000]", data_dir=str(tmp_path_factory.mktemp("tfds")))
  names = [c.name for c in sources.ADULT_COLUMNS]
  cats = [mst.Binning(n, num_categories=len(sources.ADULT_COLUMNS[names.index(n)].categories))
          for n in COLUMNS]
  columns = [mst.Binning("age", edges=tuple(range(15, 95, 10)), integer=True), *cats,
             mst.Binning("income", num_categories=2)]
  values = np.column_stack([ds.features[:, names.index("age")]]
                           + [ds.features[:, names.index(n)] for n in COLUMNS] + [ds.labels])
  return values, columns


def _tv(a, b, sizes):
  index = np.ravel_multi_index([c.astype(int) for c in a.T], sizes)
  other = np.ravel_multi_index([c.astype(int) for c in b.T], sizes)
  p = np.bincount(index, minlength=np.prod(sizes)) / len(a)
  q = np.bincount(other, minlength=np.prod(sizes)) / len(b)
  return 0.5 * np.abs(p - q).sum()


def test_samples_match_the_data_marginals(adult_table):
  values, columns = adult_table
  config = mst.MstConfig(epsilon=20.0, delta=1e-9, iters=300, select_iters=100)
  fitted = mst.fit_mst(jax.random.key(0), values, columns, config)
  assert len(fitted.edges) == len(columns) - 1  # a spanning tree
  synth = mst.sample_mst(jax.random.key(1), fitted, len(values))
  assert synth.shape == values.shape
  ages = synth[:, 0]
  assert np.all(ages == np.round(ages)) and 15 <= ages.min() and ages.max() < 85
  assert abs(ages.mean() - values[:, 0].mean()) < 1.5
  sizes = [c.size for c in columns]
  for i in range(1, len(columns)):  # every categorical 1-way marginal
    assert _tv(values[:, [i]], synth[:, [i]], sizes[i:i + 1]) < 0.03, columns[i].name
  # the strongest pair of Adult, which the tree must carry: relationship x sex
  pair = [COLUMNS.index("relationship") + 1, COLUMNS.index("sex") + 1]
  assert _tv(values[:, pair], synth[:, pair], [sizes[j] for j in pair]) < 0.05
  # a product of the 1-way marginals is far from it: the 2-way measurement matters
  shuffled = np.column_stack([values[:, pair[0]], np.random.default_rng(0).permutation(
      values[:, pair[1]])])
  assert _tv(values[:, pair], shuffled, [sizes[j] for j in pair]) > 0.2
  again = mst.sample_mst(jax.random.key(1), fitted, len(values))
  np.testing.assert_array_equal(again, synth)  # explicit keys: reproducible


def test_zcdp_rho_inverts_the_conversion():
  for epsilon, delta in ((1.0, 1e-9), (10.0, 1e-5), (0.1, 1e-6)):
    rho = mst.zcdp_rho(epsilon, delta)
    assert rho + 2 * math.sqrt(rho * math.log(1 / delta)) == pytest.approx(epsilon, rel=1e-12)


def test_binning_round_trip():
  age = mst.Binning("age", edges=(0, 10, 20, 30), integer=True)
  codes = age.encode(np.array([-5, 0, 9, 10, 29, 31]))
  np.testing.assert_array_equal(codes, [0, 0, 0, 1, 2, 2])
  back = age.decode(codes, np.array([0.0, 0.5, 0.999, 0.0, 0.5, 0.999]))
  np.testing.assert_array_equal(back, [0, 5, 9, 10, 25, 29])
  cat = mst.Binning("sex", num_categories=2)
  np.testing.assert_array_equal(cat.encode(np.array([0.0, 1.0])), [0, 1])
  with pytest.raises(ValueError, match="outside its 2 category codes"):
    cat.encode(np.array([2.0]))


@pytest.mark.parametrize("kwargs,match", [
    (dict(name="a"), "exactly one of"),
    (dict(name="a", edges=(1.0,)), "at least 2 increasing"),
    (dict(name="a", edges=(0.0, 0.5), integer=True), "integer edges"),
    (dict(name="a", num_categories=0), "num_categories=0"),
])
def test_bad_binnings(kwargs, match):
  with pytest.raises(ValueError, match=match):
    mst.Binning(**kwargs)


def test_bad_inputs():
  columns = [mst.Binning("a", num_categories=2), mst.Binning("b", num_categories=2)]
  with pytest.raises(ValueError, match=r"values must have shape \(N, 2\)"):
    mst.fit_mst(jax.random.key(0), np.zeros((4, 3)), columns, mst.MstConfig())
  with pytest.raises(ValueError, match="distinct"):
    mst.fit_mst(jax.random.key(0), np.zeros((4, 2)), [columns[0], columns[0]], mst.MstConfig())
  with pytest.raises(ValueError, match="epsilon"):
    mst.MstConfig(epsilon=0.0)
