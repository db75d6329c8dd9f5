"""Smoke test of `python -m experiments.benchmarks.montecarlo` (tiny sizes): the engine and the
NumPy baseline timed in fresh processes, and the report's table."""

from dpaudit.results import loads, read_json
from tests.conftest import run_module
from tests.experiments.test_performance_docs import assert_table


def test_tiny_benchmark_prints_and_writes_json(tmp_path):
  out = run_module("experiments.benchmarks.montecarlo", f"--output_dir={tmp_path}",
                   "--num_trials=4096", "--num_repeats=1", "--prng_impls=threefry_unrolled",
                   "--memory_trials=4096", "--chunk_size=1024")
  assert out.returncode == 0, out.stderr
  written = read_json(tmp_path / "results.json")
  assert loads(out.stdout) == written
  engine, numpy = written["engine"], written["numpy_baseline"]
  assert set(numpy) == {"float32", "float64"}
  assert written["best_engine"] in engine and written["device"].startswith("cpu")
  # One row per engine configuration (the target on the fastest, 1.5x on a CPU), then memory.
  table = written["table"]
  assert_table(table, len(engine) + 1)
  peer = numpy[written["best_numpy"]]["trials_per_s"]
  for r, (name, entry) in zip(table, engine.items()):
    assert (r["dpaudit"], r["peer"], r["unit"]) == (entry["trials_per_s"], peer, "trials/s")
    assert r["target"] == (1.5 if name == written["best_engine"] else None)
  [judged] = [r for r in table if r["target"] is not None]
  assert judged["met"] == written["meets_cpu_target"]
  assert table[-1]["unit"] == "MB" and table[-1]["peer"] is None
  assert written["machine"]["device"] == written["device"] and "montecarlo" in written["command"]
