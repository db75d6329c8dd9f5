"""`python -m experiments.gnmax_worst_case`: a smoke run (results, plot, resume) and the error
path. The search itself is tested in tests/accounting/test_gnmax_worst_case.py."""

import numpy as np
import pytest

from dpaudit.results import read_json
from tests.conftest import run_module


def _run(*flags):
  return run_module("experiments.gnmax_worst_case", *flags)


def test_small_grid_writes_results_and_plot_and_resumes(tmp_path):
  flags = (f"--output_dir={tmp_path}", "--num_teachers=6", "--num_classes=3",
           "--noise_multipliers=0.5,2", "--orders=2,8", "--max_steps=4", "--num_random_starts=1")
  out = _run(*flags)
  assert out.returncode == 0, out.stderr
  results = read_json(tmp_path / "results.json")
  assert results["experiment"] == "gnmax_worst_case"
  assert list(results["cells"]) == ["k=6, sigma=0.5", "k=6, sigma=2"]
  for cell in results["cells"].values():
    ratio = np.asarray(cell["ratio"])
    assert np.all((ratio > 0) & (ratio <= 1))
    assert all(sum(h) == 6 for h in cell["histogram"])
  assert (tmp_path / "worst_case.png").stat().st_size > 10_000
  assert "alpha/s^2" in out.stdout

  again = _run(*flags)
  assert again.returncode == 0, again.stderr
  assert again.stderr.count("[reused]") == 2
  assert read_json(tmp_path / "results.json")["cells"] == results["cells"]


@pytest.mark.parametrize("flag,match", [
    ("--noise_multipliers=0", "--noise_multipliers contains 0.0"),
    ("--noise_multipliers=1e-11", "--noise_multipliers contains 1e-11, outside the valid range "
     "[2e-11, 10000] for --num_teachers=20"),
])
def test_bad_flag_is_one_line_error(tmp_path, flag, match):
  out = _run(f"--output_dir={tmp_path}", flag)
  assert out.returncode == 2
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1 and match in lines[0], out.stderr
