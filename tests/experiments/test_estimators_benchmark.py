"""Smoke test of `python -m experiments.benchmarks.estimators` (tiny sizes) and its errors."""

import os
import subprocess
import sys

from dpaudit.results import read_json, loads

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*flags):
  return subprocess.run([sys.executable, "-m", "experiments.benchmarks.estimators", *flags],
                        capture_output=True, text=True, cwd=ROOT)


def test_tiny_benchmark_prints_and_writes_json(tmp_path):
  out = _run(f"--output_dir={tmp_path}", "--scale=0.0005", "--repeats=2", "--only=cp,one_run")
  assert out.returncode == 0, out.stderr
  printed = loads(out.stdout)
  written = read_json(tmp_path / "results.json")
  assert printed == written
  assert written["experiment"] == "benchmarks.estimators"
  assert written["config"]["groups"] == ["cp", "one_run"]
  assert written["all_targets_met"] is None  # targets are judged at full scale only
  names = [w["name"] for w in written["workloads"]]
  assert sum(name.startswith("clopper_pearson") for name in names) == 6
  assert any(name.startswith("one_run_epsilon m=") for name in names)
  for w in written["workloads"]:
    ours = w["dpaudit"]
    assert ours["median_s"] > 0 and ours["first_call_s"] > 0 and ours["compile_s"] >= 0
    assert ours["recompiles_on_new_values"] == 0  # new values of the same shapes compile nothing
    if w["group"] == "cp":
      assert set(w["peers"]) == {"scipy"} and w["fastest_peer"] == "scipy"
      assert abs(w["ratio"] - w["peers"]["scipy"]["median_s"] / ours["median_s"]) < 1e-9
      assert w["max_rel_diff"] < 1e-10  # the same limits as scipy's Beta quantiles
    assert w["target_met"] == (w["name"] not in written["unmet"])


def test_bad_flags_give_one_line_errors(tmp_path):
  out = _run(f"--output_dir={tmp_path}", "--only=cp,sorting")
  assert out.returncode == 2
  assert out.stderr.strip().splitlines()[-1].startswith(
      "error: --only=cp,sorting names unknown groups ['sorting']")
  out = _run(f"--output_dir={tmp_path}", "--scale=2")
  assert out.returncode == 2
  assert out.stderr.strip().splitlines() == ["error: --scale=2.0 is outside the valid range (0, 1]"]
  assert not (tmp_path / "results.json").exists()
