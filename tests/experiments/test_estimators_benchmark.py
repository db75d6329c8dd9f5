"""Smoke test of `python -m experiments.benchmarks.estimators` (tiny sizes) and its errors."""

import pytest

from dpaudit.results import loads, read_json
from tests.conftest import run_cli_cases
from tests.experiments.test_performance_docs import assert_table


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """This module's command lines in one process (tests.conftest.run_cli_cases): the three
  refused flags on one --output_dir, then the tiny cp and one_run groups, the throughput group
  and the f-DP group, each on its own --output_dir."""
  bad, tiny, throughput, fdp = (tmp_path_factory.mktemp(n)
                                for n in ("bad", "tiny", "throughput", "fdp"))
  outs = run_cli_cases(
      "experiments.benchmarks.estimators",
      (f"--output_dir={bad}", "--only=cp,sorting"),
      (f"--output_dir={bad}", "--scale=2"),
      (f"--output_dir={bad}", "--throughput_precisions=float16"),
      (f"--output_dir={tiny}", "--scale=0.0005", "--num_repeats=2", "--min_timed_s=0",
       "--only=cp,one_run"),
      (f"--output_dir={throughput}", "--only=throughput", "--throughput_sizes=3000",
       "--throughput_reference=500", "--num_repeats=1", "--min_timed_s=0"),
      (f"--output_dir={fdp}", "--scale=0.0004", "--num_repeats=1", "--min_timed_s=0",
       "--only=fdp"))
  return {"bad": (outs[:3], bad), "tiny": (outs[3], tiny), "throughput": (outs[4], throughput),
          "fdp": (outs[5], fdp)}


def test_tiny_benchmark_prints_and_writes_json(runs):
  # --scale=0.0005 --num_repeats=2 --min_timed_s=0 --only=cp,one_run
  out, tmp_path = runs["tiny"]
  assert out.returncode == 0, out.stderr
  printed = loads(out.stdout)
  written = read_json(tmp_path / "results.json")
  assert printed == written
  assert written["experiment"] == "benchmarks.estimators"
  assert written["config"]["groups"] == ["cp", "one_run"]
  assert written["all_targets_met"] is None  # targets are judged at full scale only
  calibration = written["calibration"]  # before the first group and after each
  assert len(calibration["compile_s"]) == 3 and min(calibration["compile_s"]) > 0
  assert calibration["median_s"] == sorted(calibration["compile_s"])[1]
  names = [w["name"] for w in written["workloads"]]
  assert sum(name.startswith("clopper_pearson") for name in names) == 6
  assert any(name.startswith("one_run_epsilon m=") for name in names)
  for w in written["workloads"]:
    ours = w["dpaudit"]
    assert ours["median_s"] > 0 and ours["first_call_s"] > 0 and ours["compile_s"] >= 0
    assert ours["first_call_excess_s"] >= 0
    relative = ours["compile_s"] / calibration["median_s"]
    assert abs(ours["compile_per_calibration"] - relative) <= 1e-12 * relative
    assert ours["recompiles_on_new_values"] == 0  # new values of the same shapes compile nothing
    assert ours["repeats"] == 4  # --num_repeats before the peers' calls and as many after
    assert "_after_peers" not in ours
    if w["group"] == "cp":
      assert set(w["peers"]) == {"scipy"} and w["fastest_peer"] == "scipy"
      assert abs(w["ratio"] - w["peers"]["scipy"]["median_s"] / ours["median_s"]) < 1e-9
      assert w["max_rel_diff"] < 1e-10  # the same limits as scipy's Beta quantiles
    assert w["target_met"] == (w["name"] not in written["unmet"])
  # One row per workload (against scipy, jax-privacy when installed, or a time limit), then
  # the compile goal; no targets below full scale.
  table = written["table"]
  assert_table(table, len(names) + 1)
  assert [r["workload"] for r in table[:-1]] == names
  assert all(r["target"] is None for r in table)
  for r, w in zip(table, written["workloads"]):
    assert r["dpaudit"] == 1e3 * w["dpaudit"]["median_s"] and r["unit"] == "ms"
    if w["peers"]:
      assert r["peer"] == 1e3 * w["peers"][w["fastest_peer"]]["median_s"]
    else:
      assert r["peer_name"].startswith(("goal: at most", "not installed: ")), r
  assert table[-1]["unit"] == "s" and table[-1]["peer"] == 2.0
  assert table[-1]["dpaudit"] == max(w["dpaudit"]["compile_s"] for w in written["workloads"])


def test_throughput_group_times_each_precision_and_checks_against_scipy(runs):
  # --only=throughput --throughput_sizes=3000 --throughput_reference=500 --num_repeats=1
  out, tmp_path = runs["throughput"]
  assert out.returncode == 0, out.stderr
  written = read_json(tmp_path / "results.json")
  assert written["config"]["throughput_sizes"] == [3000]
  assert written["all_targets_met"] is None and written["unmet"] == []  # no targets here
  rows = written["workloads"]
  # 3 ranges of n x 2 precisions x (clopper_pearson, binomial_sf)
  assert len(rows) == 12 and {r["precision"] for r in rows} == {"float32", "float64"}
  for r in rows:
    assert r["group"] == "throughput" and r["pairs"] == 3000 and r["checked_pairs"] == 500
    assert r["pairs_per_s"] > 0 and r["dpaudit"]["recompiles_on_new_values"] == 0
    limit = 1e-10 if r["precision"] == "float64" else 3e-2  # float32: n up to 1e9 is inexact
    assert r["max_rel_diff"] < limit, r
  assert_table(written["table"], 13)
  assert written["table"][0]["peer_name"] == "scipy, one core (extrapolated)"


def test_bad_flags_give_one_line_errors(runs):
  (sorting, scale, float16), tmp_path = runs["bad"]  # on one --output_dir
  out = sorting
  assert out.returncode == 2
  assert out.stderr.strip().splitlines()[-1].startswith(
      "error: --only=cp,sorting names unknown groups ['sorting']")
  out = scale
  assert out.returncode == 2
  assert out.stderr.strip().splitlines() == ["error: --scale=2.0 is outside the valid range (0, 1]"]
  out = float16
  assert out.returncode == 2
  assert out.stderr.strip().splitlines()[-1] == (
      "error: --throughput_precisions=float16 names ['float16']; valid: float64, float32")
  assert not (tmp_path / "results.json").exists()


def test_fdp_group_against_the_grid_method(runs):
  """The f-DP rows: dpaudit's epsilon at least PrivacyGuard's grid value and within one grid
  step on issue 42's triples (whose grid values it reproduces); tiny batches."""
  out, tmp_path = runs["fdp"]  # --scale=0.0004 --num_repeats=1 --min_timed_s=0 --only=fdp
  assert out.returncode == 0, out.stderr
  written = read_json(tmp_path / "results.json")
  rows = written["workloads"]
  assert [w["group"] for w in rows] == ["fdp"] * 3
  assert all(all(w["checks"].values()) for w in rows), [w["checks"] for w in rows]
  assert all(w["dpaudit"]["recompiles_on_new_values"] == 0 for w in rows)
  assert all("privacyguard_grid_reimplemented" in w["peers"] for w in rows)
  # A row against the grid per workload, a goal row for each batch, then the compile goal.
  assert_table(written["table"], 3 + 2 + 1)
