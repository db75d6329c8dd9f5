"""`python -m experiments.gnmax_worst_case`: a smoke run (results, plot, resume) and the error
path. The search itself is tested in tests/accounting/test_gnmax_worst_case.py."""

import numpy as np
import pytest

from dpaudit.results import read_json
from tests.conftest import run_cli_cases

BAD_FLAGS = [
    ("--noise_multipliers=0", "--noise_multipliers contains 0.0"),
    ("--noise_multipliers=1e-11", "--noise_multipliers contains 1e-11, outside the valid range "
     "[2e-11, 10000] for --num_teachers=20"),
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """This module's command lines in one process (tests.conftest.run_cli_cases): the refused
  flags, then a small grid (its --output_dir copied to ``first_dir`` once it ends) and its
  rerun on the same --output_dir."""
  out_dir = tmp_path_factory.mktemp("gnmax_worst_case")
  first_dir = out_dir.parent / f"{out_dir.name}_first"
  flags = (f"--output_dir={out_dir}", "--num_teachers=6", "--num_classes=3",
           "--noise_multipliers=0.5,2", "--orders=2,8", "--max_steps=4", "--num_random_starts=1")
  bad = [(f"--output_dir={tmp_path_factory.mktemp('bad')}", flag) for flag, _ in BAD_FLAGS]
  *refused, first, again = run_cli_cases(
      "experiments.gnmax_worst_case", *bad,
      {"argv": list(flags), "copy_after": [[str(out_dir), str(first_dir)]]}, flags)
  return {"out_dir": out_dir, "first_dir": first_dir, "first": first, "again": again,
          **{flag: out for (flag, _), out in zip(BAD_FLAGS, refused)}}


def test_small_grid_writes_results_and_plot_and_resumes(runs):
  tmp_path = runs["first_dir"]  # as the first run left it
  out = runs["first"]
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

  again = runs["again"]
  assert again.returncode == 0, again.stderr
  assert again.stderr.count("[reused]") == 2
  assert read_json(runs["out_dir"] / "results.json")["cells"] == results["cells"]


@pytest.mark.parametrize("flag,match", BAD_FLAGS)
def test_bad_flag_is_one_line_error(runs, flag, match):
  out = runs[flag]
  assert out.returncode == 2
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1 and match in lines[0], out.stderr
