"""Smoke test of `python -m experiments.tightness` and its error path."""

import os
import subprocess
import sys

import pytest

from dpaudit.results import read_json

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*flags):
  return subprocess.run([sys.executable, "-m", "experiments.tightness", *flags],
                        capture_output=True, text=True, cwd=ROOT)


def test_one_family_writes_results_plot_and_table(tmp_path):
  out = _run(f"--output_dir={tmp_path}", f"--compilation_cache_dir={tmp_path / 'cache'}",
             "--families=ngram", "--ngram_models=32", "--ngram_steps=3")
  assert out.returncode == 0, out.stderr
  results = read_json(tmp_path / "results.json")
  assert [r["audit"] for r in results["rows"]] == ["ngram canary reconstruction"]
  assert results["config"]["ngram_models"] == 32 and results["config"]["families"] == ["ngram"]
  assert results["experiment"] == "tightness" and "wall_time_s" in results
  assert (tmp_path / "tightness.png").exists()
  assert "ngram canary reconstruction" in out.stdout


@pytest.mark.parametrize("flag, message", [
    ("--families=dpsgd,domias", "error: families="),
    ("--dpsgd_audits=many_run", "error: --dpsgd_audits=many_run must be game:canary pairs"),
    ("--dpsgd_hidden_sizes=wide", "error: --dpsgd_hidden_sizes=wide must be"),
])
def test_bad_flag_is_one_line(tmp_path, flag, message):
  out = _run(f"--output_dir={tmp_path}", flag)
  assert out.returncode == 2
  assert out.stderr.strip().splitlines()[-1].startswith(message)
  assert "Traceback" not in out.stderr
