"""`python -m experiments.panoramia`: a tiny text run (tables, figures, resume) and the
one-line errors. The pipeline is tested in tests/audits/test_panoramia_*.py."""

import pytest

from dpaudit.results import read_json
from tests.conftest import run_cli_cases

TINY = ("--modality=text", "--max_examples=500", "--num_canaries=100", "--num_audit=100",
        "--num_classifier_train=100", "--num_helper_train=100", "--helpers=generated,none",
        "--classifier_epochs=2", "--generator_epochs=1", "--helper_epochs=1",
        "--target_batch_size=100", "--text_max_length=32",
        "--text_hidden_size=32", "--top_k=20")
BAD_FLAGS = [
    ("--modality=audio", "modality='audio'"),
    ("--target=x5", "target='x5' must be eN"),
    ("--target_model=resnet", "target_model='resnet' is not one of"),
    ("--helper_model=resnet18", "applies to modality='image' only"),
    ("--num_canaries=4", "RM;RN variant needs at least 8"),
    ("--filter_fraction=0.99", "--filter_fraction=0.99"),
    ("--top_p=0", "--top_p=0"),
    ("--prompt_length=33", "--prompt_length=33"),
    ("--tabular_hidden_sizes=150,x", "--tabular_hidden_sizes=150,x must be a comma-separated"),
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """This module's command lines in one process (tests.conftest.run_cli_cases): the refused
  flags, then the tiny run with two repetitions (its --output_dir copied to ``first_dir`` once
  it ends) and its rerun with one on the same --output_dir."""
  out_dir = tmp_path_factory.mktemp("panoramia")
  first_dir = out_dir.parent / f"{out_dir.name}_first"
  flags = (*TINY, "--target=dp8", "--null_samples=30", f"--output_dir={out_dir}")
  bad = [(*TINY, f"--output_dir={tmp_path_factory.mktemp('bad')}", flag) for flag, _ in BAD_FLAGS]
  *refused, first, again = run_cli_cases(
      "experiments.panoramia", *bad,
      {"argv": [*flags, "--num_repeats=2"], "copy_after": [[str(out_dir), str(first_dir)]]},
      flags)
  return {"out_dir": out_dir, "first_dir": first_dir, "first": first, "again": again,
          **{flag: out for (flag, _), out in zip(BAD_FLAGS, refused)}}


def test_tiny_text_run_writes_tables_and_figures_and_resumes(runs):
  """Two repetitions (seeds 0 and 1) of a two-baseline audit: c_lb is the strongest baseline's,
  the null reference and the spread over repetitions are in results.json and the tables; a
  rerun with one repetition reuses seed 0's setup and cell."""
  tmp_path = runs["first_dir"]  # as the first run left it
  out = runs["first"]  # --num_repeats=2
  assert out.returncode == 0, out.stderr
  results = read_json(tmp_path / "results.json")
  assert results["experiment"] == "panoramia" and results["config"]["seeds"] == [0, 1]
  assert [r["seed"] for r in results["repetitions"]] == [0, 1]
  cells = results["cells"]
  assert list(cells) == ["dp8"] and cells == results["repetitions"][0]["cells"]
  assert 0 < cells["dp8"]["accountant_epsilon"] <= 8.0 and cells["dp8"]["noise_multiplier"] > 0
  for repetition in results["repetitions"]:
    cell = repetition["cells"]["dp8"]
    assert cell["eps_tilde"] == pytest.approx(max(0.0, cell["c_plus_eps_lb"] - cell["c_lb"]))
    assert cell["c_lb"] == max(cell["baseline_c_lb"].values())
    assert cell["baseline_c_lb"][cell["strongest_baseline"]] == cell["c_lb"]
    assert set(cell["baseline_c_lb"]) == {"generated", "none"}
    assert cell["one_run_rm_rn"] >= 0 and cell["one_run_rm_gn"] >= 0
    assert cell["one_run_rm_rn_fdp_mu"] >= 0 and cell["one_run_rm_gn_fdp_mu"] >= 0  # f-DP
    assert cell["null_eps_tilde"]["n"] == 30 and 0 < cell["eps_tilde_p_value"] <= 1
    # PANORAMIA RM;RN (--rm_rn by default) on the 100 candidates, half of them audited
    assert cell["panoramia_rm_rn"] >= 0 and 0 <= cell["panoramia_rm_rn_mia_auc"] <= 1
    assert 49 <= cell["panoramia_rm_rn_num_audit"] <= 51
  summary = results["summary"]["targets"]["dp8"]
  values = [r["cells"]["dp8"]["eps_tilde"] for r in results["repetitions"]]
  assert summary["eps_tilde"]["values"] == values and summary["repetitions"] == 2
  assert min(values) <= summary["eps_tilde"]["median"] <= max(values)
  assert 0 <= summary["beyond_null"] <= 2
  assert "Table 3: baselines over 2 repetitions" in out.stdout and "Table 4" in out.stdout
  assert "null eps~ q95" in out.stdout and "not a lower bound on epsilon" in out.stdout
  assert "PANORAMIA RM;RN" in out.stdout and "c_lb = 0" in out.stdout
  assert (tmp_path / "precision_recall.png").stat().st_size > 10_000
  assert len((tmp_path / "samples.txt").read_text().splitlines()) == 100

  again = runs["again"]
  assert again.returncode == 0, again.stderr
  assert "seed 0: audit setup (reused)" in again.stderr and "seed 0: dp8 (reused)" in again.stderr
  assert again.stderr.count("(reused)") == 2 and "[2/2]" in again.stderr
  assert read_json(runs["out_dir"] / "results.json")["cells"] == cells


@pytest.mark.parametrize("flag,match", BAD_FLAGS)
def test_bad_flag_is_one_line_error(runs, flag, match):
  out = runs[flag]
  assert out.returncode == 2
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1 and match in lines[0], out.stderr
