"""Smoke test of `python -m experiments.domias`: two studies, tables, figures, resume, errors."""

import pytest

from dpaudit.results import read_json
from tests.conftest import run_cli_cases

TINY = ("--study=minority,epsilon", "--num_repeats=1", "--tvae_epochs=5",
        "--attacks=domias,eq1,mc,gan_leaks",  # LOGAN, CAL: tests/attacks, tests/audits
        "--num_members=40", "--num_reference=200", "--num_synthetic=200",
        "--generators=dp_tvae", "--epsilons=4", "--dp_epochs=1")
BAD_INPUT = [
    (("--attacks=domias,spy",), "error: --attacks='spy' is not one of"),
    (("--study=epochs", "--num_members=9000", "--num_reference=10000"), "needs 28000 records"),
    (("--data_csv={csv}",), "column 'b' is constant"),
    (("--study=prior", "--knowledge=oracle"), "--knowledge='oracle' is not one of"),
    (("--study=shift", "--shift_shares=0,1.5"), "--shift_shares"),
    (("--baselines=code",), "baselines"),
    # now --num_repeats (--repetitions its deprecated alias): one name everywhere
    (("--seeds=2",), "Unknown command line flag 'seeds'"),
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """This module's command lines in one process (tests.conftest.run_cli_cases): the refused
  inputs (each with its own directory and constant-column CSV), then the tiny run (its
  --output_dir copied to ``first_dir`` once it ends) and its rerun on the same --output_dir."""
  out_dir = tmp_path_factory.mktemp("domias")
  first_dir = out_dir.parent / f"{out_dir.name}_first"
  bad = []
  for flags, _ in BAD_INPUT:
    tmp_path = tmp_path_factory.mktemp("bad")
    csv = tmp_path / "d.csv"
    csv.write_text("a,b\n1,2\n3,2\n5,2\n")
    bad.append((f"--output_dir={tmp_path / 'out'}", *(f.format(csv=csv) for f in flags)))
  *refused, first, again = run_cli_cases(
      "experiments.domias", *bad,
      {"argv": [f"--output_dir={out_dir}", *TINY], "copy_after": [[str(out_dir), str(first_dir)]]},
      (f"--output_dir={out_dir}", *TINY))
  return {"out_dir": out_dir, "first_dir": first_dir, "first": first, "again": again,
          **{flags: out for (flags, _), out in zip(BAD_INPUT, refused)}}


def test_tiny_run_writes_tables_figures_and_resumes(runs):
  tmp_path = runs["first_dir"]  # as the first run left it
  out = runs["first"]
  assert out.returncode == 0, out.stderr
  studies = read_json(tmp_path / "results.json")["studies"]
  [minority] = studies["minority"]
  assert set(minority["groups"]) == {"minority", "rest"}
  assert set(minority["groups"]["minority"]) == {"domias", "eq1", "mc", "gan_leaks"}
  assert all(0 <= m["auc"] <= 1 for m in minority["attacks"].values())
  [dp_tvae] = studies["epsilon"]
  assert dp_tvae["setting"] == "dp_tvae eps=4" and 0 < dp_tvae["claimed_epsilon"] <= 4
  assert dp_tvae["attacks"]["domias"]["epsilon_one_run"] <= dp_tvae["claimed_epsilon"]
  assert (tmp_path / "fig5.png").stat().st_size > 10_000
  assert "minority (minority)" in out.stdout and "dp_tvae eps=4" in out.stdout
  again = runs["again"]
  assert again.returncode == 0, again.stderr
  assert again.stderr.count("(reused)") == 2
  assert read_json(runs["out_dir"] / "results.json")["studies"] == studies
  assert read_json(runs["out_dir"] / "results.json")["config"]["repetitions"] == 1  # unchanged


@pytest.mark.parametrize("flags, message", BAD_INPUT)
def test_bad_input_is_one_line(runs, flags, message):
  out = runs[flags]
  assert out.returncode == 2
  [line] = out.stderr.strip().splitlines()
  assert message in line, line
