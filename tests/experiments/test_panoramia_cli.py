"""`python -m experiments.panoramia`: a tiny text run (tables, figures, resume) and the
one-line errors. The pipeline is tested in tests/audits/test_panoramia_*.py."""

import pytest

from dpaudit.results import read_json
from tests.conftest import run_module

TINY = ("--modality=text", "--max_examples=500", "--num_canaries=100", "--num_audit=100",
        "--num_classifier_train=100", "--num_helper_train=100", "--helpers=generated",
        "--classifier_epochs=2", "--generator_epochs=1", "--helper_epochs=1",
        "--target_batch_size=100", "--text_max_length=32",
        "--text_hidden_size=32")


def _run(*flags):
  return run_module("experiments.panoramia", *flags)


def test_tiny_text_run_writes_tables_and_figures_and_resumes(tmp_path):
  flags = (*TINY, "--target=dp8", f"--output_dir={tmp_path}")
  out = _run(*flags)
  assert out.returncode == 0, out.stderr
  results = read_json(tmp_path / "results.json")
  assert results["experiment"] == "panoramia"
  cells = results["cells"]
  assert list(cells) == ["dp8"]
  assert 0 < cells["dp8"]["accountant_epsilon"] <= 8.0 and cells["dp8"]["noise_multiplier"] > 0
  for cell in cells.values():
    assert cell["eps_tilde"] == pytest.approx(max(0.0, cell["c_plus_eps_lb"] - cell["c_lb"]))
    assert cell["one_run_rm_rn"] >= 0 and cell["one_run_rm_gn"] >= 0
  assert "Table 3" in out.stdout and "Table 4" in out.stdout
  assert (tmp_path / "precision_recall.png").stat().st_size > 10_000
  assert len((tmp_path / "samples.txt").read_text().splitlines()) == 100

  again = _run(*flags)
  assert again.returncode == 0, again.stderr
  assert "audit setup: reused" in again.stderr and again.stderr.count("[reused]") == 1
  assert read_json(tmp_path / "results.json")["cells"] == cells


@pytest.mark.parametrize("flag,match", [
    ("--modality=audio", "modality='audio'"),
    ("--target=x5", "--target='x5' must be eN"),
])
def test_bad_flag_is_one_line_error(tmp_path, flag, match):
  out = _run(*TINY, f"--output_dir={tmp_path}", flag)
  assert out.returncode == 2
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1 and match in lines[0], out.stderr
