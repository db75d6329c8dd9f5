"""Smoke tests of `python -m experiments.dpsgd_audit`: every game from the CLI, resuming, the
skipped-cell path, repetitions and one-line errors."""

import math
import os
import subprocess
import sys

import pytest

from dpaudit.results import read_json
from tests.conftest import run_cli_cases

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BAD_FLAGS = [
    ("--audits=uniaud:mislabelled", "canary='mislabelled' is not valid for game='uniaud'"),
    ("--audits=one_run", "must be game:canary"),
    ("--epsilons=0", "epsilon"),
    ("--num_canaries=ten", "--num_canaries=ten must be a comma-separated list of integers"),
    ("--pool_fraction=1.5", "pool_fraction"),
    ("--num_repeats=0", "--num_repeats=0 must be an integer >= 1"),
]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """This module's command lines in one process (tests.conftest.run_cli_cases): the refused
  flags, the four games (their --output_dir copied to ``first_dir`` once they end) and their
  rerun on the same --output_dir, the skipped cells and Case I, on one --data_dir."""
  data_dir = tmp_path_factory.mktemp("tensorflow_datasets")
  out_dir = tmp_path_factory.mktemp("four_games") / "out"
  first_dir = out_dir.parent / "out_first"
  skipped_dir, case_one_dir = (tmp_path_factory.mktemp(n) for n in ("skipped", "case_one"))
  four = (f"--output_dir={out_dir}", f"--data_dir={data_dir}", "--dataset=digits",
          "--audits=many_run:dirac,one_run:mislabelled,uniaud:gaussian,uniaud_plus:trigger",
          "--epsilons=4", "--num_canaries=100", "--num_runs=10", "--epochs=2",
          "--batch_size=64", "--hidden_sizes=16", "--num_tags=10")
  # and a non-private cell: no noise, the accountant's epsilon is inf ("Infinity" in JSON);
  # played twice (--num_repeats=2: seeds 7 and 8), summarised as median [min, max].
  skipped = (f"--output_dir={skipped_dir}", f"--data_dir={data_dir}", "--dataset=digits",
             "--audits=one_run:in_distribution", "--num_canaries=5000,50", "--epochs=1",
             "--hidden_sizes=8", "--epsilons=inf", "--seed=7", "--num_repeats=2")
  # UniAud's Table IV setting in miniature: Case I (canaries only), d and C of their own.
  case_one = (f"--output_dir={case_one_dir}", f"--data_dir={data_dir}", "--dataset=digits",
              "--audits=one_run:orthogonal,uniaud:gaussian", "--canaries_only",
              "--canary_dim=40", "--num_canary_classes=40", "--model=logistic",
              "--num_canaries=48", "--epochs=2", "--batch_size=16", "--epsilons=inf",
              "--noplot")
  bad = [(f"--output_dir={tmp_path_factory.mktemp('bad')}", f"--data_dir={data_dir}", flag)
         for flag, _ in BAD_FLAGS]
  *refused, first, again, skipped_out, case_one_out = run_cli_cases(
      "experiments.dpsgd_audit", *bad,
      {"argv": four, "copy_after": [[str(out_dir), str(first_dir)]]}, four, skipped, case_one)
  return {"out_dir": out_dir, "first_dir": first_dir, "first": first, "again": again,
          "skipped": (skipped_out, skipped_dir), "case_one": (case_one_out, case_one_dir),
          **{flag: out for (flag, _), out in zip(BAD_FLAGS, refused)}}


def test_all_four_games_run_write_results_and_resume(runs):
  out_dir = runs["first_dir"]  # as the first run left it
  out = runs["first"]
  assert out.returncode == 0, out.stderr
  results = read_json(out_dir / "results.json")
  cells = results["cells"]
  assert len(cells) == 4 and all(c["status"] == "done" for c in cells)
  assert {(c["config"]["game"], c["config"]["canary"]) for c in cells} == {
      ("many_run", "dirac"), ("one_run", "mislabelled"), ("uniaud", "gaussian"),
      ("uniaud_plus", "trigger")}
  for cell in cells:
    r = cell["result"]
    assert 0.0 <= r["epsilon_lower_bound"] <= r["epsilon_ceiling"]
    assert 0.0 <= r["test_accuracy"] <= 1.0
    assert r["epsilon_theory"] >= 4.0 - 1e-3 and r["noise_multiplier"] > 0
    expected_obs = 20 if cell["config"]["game"] == "many_run" else 100
    assert r["num_observations"] == expected_obs
  uniaud = [c["result"] for c in cells if c["config"]["game"] == "uniaud"]
  assert all(r["adjacency"] == "replace_one" for r in uniaud)
  assert results["data"]["num_train"] + results["data"]["num_pool"] + results["data"][
      "num_test"] == 1797
  assert (out_dir / "audit.png").stat().st_size > 0
  assert "uniaud_plus:trigger" in out.stdout
  table = out.stdout[out.stdout.index("audit "):]  # after tfds's first-use messages
  assert table.split()[:2] == ["audit", "eps"]  # one repetition: the table as ever
  assert "[" not in table and "repetitions" not in out.stdout and "rep 1/1" not in out.stderr
  assert results["config"]["repetitions"] == 1 and len(results["summary"]) == 4
  again = runs["again"]
  assert again.returncode == 0, again.stderr
  assert again.stderr.count(" reused") == 4
  assert read_json(runs["out_dir"] / "results.json")["cells"][0]["result"] == cells[0][
      "result"]


def test_cells_the_pool_cannot_fill_are_skipped_with_the_reason(runs):
  # and a non-private cell: no noise, the accountant's epsilon is inf ("Infinity" in JSON);
  # played twice (--num_repeats=2: seeds 7 and 8), summarised as median [min, max].
  out, tmp_path = runs["skipped"]  # --num_canaries=5000,50 --epsilons=inf --num_repeats=2
  assert out.returncode == 0, out.stderr
  written = read_json(tmp_path / "results.json")
  assert [(c["seed"], c["status"]) for c in written["cells"]] == [
      (7, "skipped"), (7, "done"), (8, "skipped"), (8, "done")]
  skipped, done = written["cells"][:2]
  assert skipped["status"] == "skipped" and "num_canaries=5000" in skipped["reason"]
  assert "skipped" in out.stdout
  assert done["status"] == "done" and done["result"]["epsilon_theory"] == math.inf
  assert done["result"]["noise_multiplier"] == 0.0
  assert written["config"]["repetitions"] == 2 and written["config"]["seed"] == 7
  accuracy = written["summary"][1]["spread"]["test_accuracy"]
  assert accuracy["values"] == [c["result"]["test_accuracy"] for c in written["cells"][1::2]]
  lines = out.stdout.splitlines()
  header, _, _, row = lines[lines.index(next(l for l in lines if "repetitions" in l)):][:4]
  assert header.startswith("2 repetitions (seeds 7, 8): eps_L, fdp_gauss, fdp_run and "
                           "test_acc are median [min, ")
  assert f"{accuracy['median']:.3f} [{accuracy['min']:.3f}, {accuracy['max']:.3f}]" in row
  assert "[4/4] rep 2/2 (seed 8) one_run:in_distribution eps=inf m=50 done" in out.stderr


def test_case_one_with_canaries_of_their_own_shape_and_a_model_by_name(runs):
  # UniAud's Table IV setting in miniature: Case I (canaries only), d and C of their own.
  out, tmp_path = runs["case_one"]  # --canaries_only --canary_dim=40 --model=logistic
  assert out.returncode == 0, out.stderr
  written = read_json(tmp_path / "results.json")
  assert written["config"]["canary_dim"] == 40 and written["config"]["model"] == "logistic"
  for cell in written["cells"]:
    assert cell["status"] == "done" and cell["config"]["canaries_only"]
    assert cell["result"]["num_training_examples"] == 48
    assert math.isnan(cell["result"]["test_accuracy"])


@pytest.mark.parametrize("flag, message", BAD_FLAGS)
def test_bad_flags_give_one_line_errors(runs, flag, message):
  out = runs[flag]
  assert out.returncode == 2
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], out.stderr


def test_table_shows_an_optimistic_cell_by_its_own_key():
  """correction=none cells carry ``epsilon_optimistic`` (not ``epsilon_lower_bound``); the
  table, summary and plot read either. In a process of its own: the CLI's module defines its
  flags at import (another CLI module imported in this worker would clash)."""
  code = """
from experiments import dpsgd_audit
result = {"epsilon_optimistic": 1.25, "epsilon_ceiling": 3.0, "epsilon_theory": 4.0,
          "test_accuracy": 0.9, "noise_multiplier": 1.1, "num_steps": 10, "optimistic": True}
cell = {"status": "done", "config": {"game": "one_run", "canary": "gaussian", "epsilon": 4.0,
                                     "num_canaries": 100, "tag_weight": 1.0}, "result": result}
print(dpsgd_audit.table([cell]).splitlines()[1].split()[4], dpsgd_audit._eps_l(result))
"""
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
  assert out.returncode == 0, out.stderr
  assert out.stdout.split() == ["1.25", "1.25"]


def test_uniaud_paper_sweep_is_table_iv_and_its_flags_make_valid_grids():
  """launch/sweeps/uniaud_paper.py: the Table IV grid of UniAud (m = 2000, 10000; gaussian and
  orthogonal canaries with comparison (uniaud) and without (one_run); eps 1, 2, 4, 8, inf;
  d = C = 1000; Case I; q = 0.1), each job's flags a valid grid (no training)."""
  from dpaudit.audits import dpsgd_grid
  from launch import sweep
  jobs = sweep.load(os.path.join(ROOT, "launch", "sweeps", "uniaud_paper.py")).jobs("out")
  points = {(int(j.flags["num_canaries"]), j.flags["audits"]) for j in jobs}
  assert points == {(m, f"{game}:{canary}") for m in (2000, 10000)
                    for game in ("uniaud", "one_run") for canary in ("gaussian", "orthogonal")}
  for job in jobs:
    flags = job.flags
    assert int(flags["batch_size"]) * 10 == int(flags["num_canaries"])  # q = 0.1
    assert flags["epsilons"] == "1,2,4,8,inf" and flags["canaries_only"] == "true"
    assert (flags["canary_dim"], flags["num_canary_classes"], flags["delta"]) == (
        "1000", "1000", "1e-05")
    game, canary = flags["audits"].split(":")
    dpsgd_grid.DPSGDGridConfig(
        audits=((game, canary),), epsilons=(1.0, 2.0, 4.0, 8.0, math.inf),
        num_canaries=(int(flags["num_canaries"]),), batch_size=int(flags["batch_size"]),
        canaries_only=True, canary_dim=1000, num_canary_classes=1000,
        hidden_sizes=tuple(int(w) for w in flags["hidden_sizes"].split(",")),
        epochs=float(flags["epochs"]), learning_rate=float(flags["learning_rate"]),
        physical_batch_size=int(flags["physical_batch_size"]),
        repetitions=int(flags["num_repeats"]))
