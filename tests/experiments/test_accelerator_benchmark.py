"""`python -m experiments.benchmarks.accelerator`: the tiny suite runs every workload and writes
the JSON and Markdown a device run writes; failures and the time budget are reported."""

import json
import math

import numpy as np
import pytest

from dpaudit.results import read_json

# Only the flag-free module: importing the CLI would define its absl flags in this process,
# where other tests import other CLIs.
from experiments.benchmarks import accelerator_workloads as w
from tests.conftest import run_cli_cases
from tests.experiments.test_performance_docs import assert_table

ROW_KEYS = {"workload", "name", "unit", "accelerator", "cpu", "accelerator_over_cpu", "peer",
            "peer_rate", "accelerator_over_peer", "max_rel_err", "target", "met", "note",
            "details"}
REPORT_KEYS = {"benchmark", "device", "device_kind", "platform", "cpu_cores", "tiny", "scale",
               "measure_s", "budget_s", "workloads", "versions", "command", "wall_time_s"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """The suite's command lines in one process (tests.conftest.run_cli_cases): the tiny suite
  (one worker process: in CI the other xdist worker already keeps the second core busy), a
  run past its time budget, and a merge of two runs' results (written by the test first)."""
  tiny, budget, merge = (tmp_path_factory.mktemp(n) for n in ("tiny", "budget", "merge"))
  for i, report in enumerate(MERGED):
    (merge / f"r{i}.json").write_text(json.dumps(report))
  outs = run_cli_cases(
      "experiments.benchmarks.accelerator",
      ("--tiny", "--processes=1", f"--output_dir={tiny}"),
      ("--only=montecarlo,ngram", "--budget_s=1e-9", "--processes=1",
       f"--output_dir={budget}"),
      (f"--from_results={merge / 'r0.json'},{merge / 'r1.json'}",
       f"--output_dir={merge / 'merged'}"))
  return {"tiny": (outs[0], tiny), "budget": (outs[1], budget), "merge": (outs[2], merge)}


def test_tiny_suite_reports_every_workload(runs):
  out, tmp_path = runs["tiny"]
  assert out.returncode == 0, out.stderr[-3000:]
  report = read_json(tmp_path / "results.json")
  assert REPORT_KEYS <= set(report) and report["tiny"] is True and report["platform"] == "cpu"
  assert "--xla_backend_optimization_level=0" in report["xla_flags"]
  assert list(report["workloads"]) == list(w.WORKLOADS)  # all of them, in the suite's order
  table = (tmp_path / "results.md").read_text()
  assert table in out.stdout + "\n"
  for name, entry in report["workloads"].items():
    assert entry["error"] is None and not entry.get("skipped"), (name, entry)
    assert entry["rows"], name
    for row in entry["rows"]:
      assert set(row) == ROW_KEYS and row["workload"] == name
      for side in ("accelerator", "cpu"):  # every workload reported a number on each side
        assert math.isfinite(row[side]) and row[side] > 0, (row["name"], side)
      assert row["met"] is None  # targets are judged on an accelerator only
      assert f"| {name} | {row['name']} |" in table
  estimator_rows = report["workloads"]["estimators"]["rows"]
  assert len(estimator_rows) == 14  # seven estimators, two precisions, one tiny size
  for row in estimator_rows:
    # No accelerator here: float64 is the reference itself, float32 close to it.
    assert row["max_rel_err"] <= (0.0 if row["name"].endswith("float64") else 1e-3), row
  montecarlo = report["workloads"]["montecarlo"]["rows"]
  assert montecarlo[0]["target"] == 1e9 and montecarlo[0]["peer_rate"] > 0
  for workload in ("many_run", "ngram"):
    assert report["workloads"][workload]["rows"][0]["details"]["equality_check"]["passed"]
  # On a CPU alone: each measurement once (against its peer where it has one), no goal judged.
  assert_table(report["table"], sum(len(e["rows"]) for e in report["workloads"].values()))
  assert all(r["target"] is None and r["met"] is None for r in report["table"])
  assert report["table"][0]["peer"] == montecarlo[0]["peer_rate"]
  assert report["machine"]["device"] == "cpu:cpu"


def test_budget_skips_workloads_and_exits_non_zero(runs):
  out, tmp_path = runs["budget"]  # --only=montecarlo,ngram --budget_s=1e-9
  assert out.returncode == 1
  assert out.stderr.strip().splitlines()[-1].endswith(
      f"workloads failed or skipped: montecarlo, ngram (see {tmp_path}/results.json)")
  report = read_json(tmp_path / "results.json")
  for entry in report["workloads"].values():
    assert entry["rows"] == [] and "past --budget_s" in entry["skipped"]


def test_a_failing_workload_is_reported_and_the_rest_go_on(monkeypatch):
  def broken(ctx):
    raise RuntimeError("out of device memory")

  monkeypatch.setitem(w.WORKLOADS, "broken", broken)
  ctx = w.Context(accelerator=None, cpu=None)
  entry = w.run_workload("broken", ctx)
  assert entry["rows"] == [] and entry["error"] == "RuntimeError: out of device memory"


def test_split_workloads_balances_and_keeps_order():
  names = list(w.WORKLOADS)
  groups = w.split_workloads(names, 2)
  assert sorted(sum(groups, [])) == sorted(names)
  for group in groups:
    assert group == sorted(group, key=names.index)
  costs = [sum(w.COMPILE_COST[n] for n in g) for g in groups]
  assert max(costs) - min(costs) <= max(w.COMPILE_COST.values())
  assert w.split_workloads(["ngram"], 4) == [["ngram"]]


def test_max_rel_err_against_a_loop():
  rng = np.random.default_rng(0)
  ref = np.concatenate([rng.normal(size=50), [0.0, np.inf, -np.inf, 1e-40]])
  got = ref * (1 + rng.normal(scale=1e-6, size=ref.size))
  got[-4:] = [0.0, np.inf, -np.inf, 0.0]
  floor = np.finfo(np.float32).tiny * 1e6
  expected = max(abs(g - r) / abs(r) for g, r in zip(got, ref)
                 if abs(r) > floor and not np.isinf(r))
  assert w.max_rel_err(got, ref, np.float32) == pytest.approx(expected, rel=1e-12)
  got[50] = 1e-3  # an exact zero that moved
  assert w.max_rel_err(got, ref, np.float32) == 1.0


def test_judge_only_on_an_accelerator():
  rows = [w.row("montecarlo", "a", "trials/s", 2e9, 1e7, target=1e9),
          w.row("montecarlo", "b", "trials/s", 5e8, 1e7, target=1e9),
          w.row("dpsgd", "c", "examples/s", 1.0, 1.0)]
  assert [r["met"] for r in w.judge([dict(r) for r in rows], on_cpu=True)] == [None] * 3
  assert [r["met"] for r in w.judge(rows, on_cpu=False)] == [True, False, None]
  assert rows[0]["accelerator_over_cpu"] == 200.0


def _report(kind, workloads, command="run"):
  return {"device": "cuda:0", "device_kind": kind, "cpu_cores": 16, "command": command,
          "wall_time_s": 1.0, "workloads": workloads}


GOOD = {"rows": [w.row("estimators", "cp", "pairs/s", 2.0, 1.0)], "wall_s": 1.0, "error": None}
FAILED = {"rows": [], "wall_s": 1.0, "error": "RuntimeError: x"}
MERGED = (_report("H100", {"montecarlo": GOOD, "estimators": FAILED}, "all"),
          _report("H100", {"estimators": GOOD, "montecarlo": FAILED}, "--only=estimators"))


def test_merge_takes_each_workload_from_the_last_run_that_finished_it(runs):
  first, second = MERGED
  merged = w.merge_reports([first, second])
  assert merged["workloads"] == {"montecarlo": GOOD, "estimators": GOOD}
  assert [m["command"] for m in merged["merged_from"]] == ["all", "--only=estimators"]
  with pytest.raises(ValueError, match="mixes devices"):
    w.merge_reports([first, _report("H200", {})])
  # The CLI writes the merged files without running anything (runs: --from_results=r0,r1).
  out, tmp_path = runs["merge"]
  assert out.returncode == 0, out.stderr
  assert read_json(tmp_path / "merged" / "results.json")["workloads"]["estimators"] == GOOD
