"""One tfds data directory per test run in which the bundled datasets are prepared once."""

import pytest


@pytest.fixture(scope="session")
def data_dir(request, tmp_path_factory):
  """A data directory for the tests that read prepared datasets (never the user's default).

  Under pytest-xdist the workers share one directory (the parent of their base temporary
  directories), so that each dataset is prepared once per run: ``builders.prepare`` locks a
  dataset while one process prepares it and the others then reuse that copy.
  """
  if not hasattr(request.config, "workerinput"):  # not an xdist worker
    return str(tmp_path_factory.mktemp("tensorflow_datasets"))
  shared = tmp_path_factory.getbasetemp().parent / "dpaudit_tensorflow_datasets"
  shared.mkdir(exist_ok=True)
  return str(shared)
