"""Smoke test of `python -m experiments.tightness` and its error path."""

import os
import subprocess
import sys

from dpaudit.results import read_json

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*flags):
  return subprocess.run([sys.executable, "-m", "experiments.tightness", *flags],
                        capture_output=True, text=True, cwd=ROOT)


def test_one_family_writes_results_plot_and_table(tmp_path):
  out = _run(f"--output_dir={tmp_path}", f"--compilation_cache_dir={tmp_path / 'cache'}",
             "--families=noisy_argmax,ngram", "--noisy_argmax_trials=2000",
             "--ngram_models=32", "--ngram_steps=3")
  assert out.returncode == 0, out.stderr
  results = read_json(tmp_path / "results.json")
  assert [r["audit"] for r in results["rows"]] == [
      "noisy_argmax 2-cut", "noisy_argmax k-cut", "ngram canary reconstruction"]
  assert results["config"]["noisy_argmax_trials"] == 2000
  assert results["experiment"] == "tightness" and "wall_time_s" in results
  assert (tmp_path / "tightness.png").exists()
  assert "ngram canary reconstruction" in out.stdout


def test_bad_flag_is_one_line(tmp_path):
  out = _run(f"--output_dir={tmp_path}", "--families=dpsgd,domias")
  assert out.returncode == 2
  assert out.stderr.strip().splitlines()[-1].startswith("error: families=")
  assert "Traceback" not in out.stderr
