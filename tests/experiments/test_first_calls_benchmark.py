"""Smoke test of `python -m experiments.benchmarks.first_calls` (tiny sizes) and its errors."""

from dpaudit.results import loads, read_json
from tests.conftest import run_module
from tests.experiments.test_performance_docs import assert_table


def _run(*flags):
  return run_module("experiments.benchmarks.first_calls", *flags)


def test_each_workload_runs_cold_warm_and_against_its_peer_in_fresh_processes(tmp_path):
  out = _run(f"--output_dir={tmp_path}", "--scale=0.01", "--num_rounds=1",
             "--only=clopper_pearson_1e3", "--emitters=loop")
  assert out.returncode == 0, out.stderr
  written = read_json(tmp_path / "results.json")
  assert loads(out.stdout) == written
  assert written["config"]["emitters"] == "loop" and written["config"]["rounds"] == 1
  assert written["all_targets_met"] is None  # judged at full scale only
  [w] = written["workloads"]
  assert w["name"] == "clopper_pearson_1e3" and w["peer_name"] == "scipy"
  for mode in ("cold", "warm", "peer"):
    first = w[mode]["first_call_s"]
    assert len(first["all"]) == 1 and first["median"] > 0
    assert first["range"] == [min(first["all"]), max(first["all"])]
  # A small input's first call is answered on the host, whatever the cache holds.
  assert w["cold"]["host_path"] == [True] and w["warm"]["host_path"] == [True]
  assert w["cold_met"] is None and w["warm_met"] is None
  cold, warm, peer = written["table"]
  assert_table(written["table"])
  assert cold["peer"] == 200.0 and warm["peer"] == 50.0 and cold["target"] is None
  assert "host path" in cold["workload"] and peer["peer_name"] == "scipy"
  assert peer["dpaudit"] == w["cold"]["first_call_s"]["median"] * 1e3


def test_bad_flags_give_one_line():
  for flags, words in ((("--only=clopper_pearson_1e2",), "unknown workloads"),
                       (("--num_rounds=0",), "--num_rounds=0")):
    out = _run(*flags)
    assert out.returncode != 0
    assert words in out.stderr and "Traceback" not in out.stderr
