"""Smoke test of `python -m experiments.benchmarks.first_calls` (tiny sizes) and its errors."""

from dpaudit.results import loads, read_json
from tests.conftest import run_module
from tests.experiments.test_performance_docs import assert_table


def _run(*flags):
  return run_module("experiments.benchmarks.first_calls", *flags)


def test_each_workload_compiles_in_fresh_processes(tmp_path):
  out = _run(f"--output_dir={tmp_path}", "--scale=0.001", "--num_rounds=1",
             "--only=one_run_m1e7_r100", "--emitters=loop")
  assert out.returncode == 0, out.stderr
  written = read_json(tmp_path / "results.json")
  assert loads(out.stdout) == written
  assert written["config"]["emitters"] == "loop" and written["config"]["rounds"] == 1
  assert written["all_targets_met"] is None  # judged at full scale only
  assert [w["name"] for w in written["workloads"]] == ["one_run_m1e7_r100"]
  for w in written["workloads"]:
    # A fresh process: the first call compiles its programs.
    assert len(w["compile_s"]) == 1 and min(w["compile_s"]) > 0
    assert w["compile_range_s"] == [min(w["compile_s"]), max(w["compile_s"])]
    assert min(w["first_call_s"]) >= min(w["compile_s"]) * 0.5
    assert w["target_met"] is None
  [row] = written["table"]
  assert_table([row])
  assert row["dpaudit"] == written["workloads"][0]["compile_median_s"] and row["peer"] == 2.0
  assert row["target"] is None  # judged at full scale only


def test_bad_flags_give_one_line():
  for flags, words in ((("--only=clopper_pearson_1e2",), "unknown workloads"),
                       (("--num_rounds=0",), "--num_rounds=0")):
    out = _run(*flags)
    assert out.returncode != 0
    assert words in out.stderr and "Traceback" not in out.stderr
