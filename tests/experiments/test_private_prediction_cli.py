"""Smoke test of `python -m experiments.private_prediction`: results, resume, bad flags."""

import os
import subprocess
import sys

from dpaudit.results import read_json

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# private_knn runs in tests/audits/test_private_prediction_audit.py (validity of its 2-cut).
TINY = ("--algorithms=pate,promptpate", "--feature_epochs=2", "--feature_model=mlp",
        "--adversaries=pois_miaq", "--num_teachers=5",
        "--num_instantiations=3", "--instantiations_per_call=3", "--num_queries=2",
        "--num_trials=2000", "--num_histograms=16", "--epochs=2", "--orders=2,8",
        "--model=logistic", "--k_cut_method=goodman")


def _run(*flags, env=None):
  return subprocess.run([sys.executable, "-m", "experiments.private_prediction", *flags],
                        capture_output=True, text=True, cwd=ROOT,
                        env=None if env is None else {**os.environ, **env})


def test_tiny_run_writes_results_and_resumes(tmp_path):
  out = _run(f"--output_dir={tmp_path}", *TINY)
  assert out.returncode == 0, out.stderr
  written = read_json(tmp_path / "results.json")
  cells = written["cells"]
  assert sorted(cells) == ["pate/pois_miaq", "promptpate/pois_miaq"]
  for cell_name, cell in cells.items():
    assert cell["num_queries"] == 2 and 0 <= cell["teacher_accuracy"] <= 1
    worst = cell["worst_query"]
    for name in ("two_cut", "k_cut", "exact", "data_dependent", "data_independent"):
      assert len(worst[name]) == 2
    assert all(a <= b + 1e-12 for a, b in zip(worst["exact"], worst["data_independent"]))
    expected = {"exact", "data_independent", "data_dependent"}
    assert set(cell["repeated_query_epsilon"]) == expected
  prompt = cells["promptpate/pois_miaq"]  # fixed histograms of 5 LLM teachers' votes
  assert all(sum(h) == 5 for h in prompt["histograms"] + prompt["neighbor_histograms"])
  assert (tmp_path / "audit.png").stat().st_size > 0
  assert (tmp_path / "leakage.png").stat().st_size > 10_000
  assert "pate/pois_miaq" in out.stdout and "exact" in out.stdout
  again = _run(f"--output_dir={tmp_path}", *TINY)
  assert again.returncode == 0, again.stderr
  assert again.stderr.count("[reused]") == 2
  assert read_json(tmp_path / "results.json")["cells"] == written["cells"]


def test_bad_flags_give_one_line_errors(tmp_path):
  out = _run(f"--output_dir={tmp_path}", "--adversaries=nat_miaq,spy")
  assert out.returncode == 2
  assert out.stderr.strip().splitlines() == [
      "error: --adversaries=nat_miaq,spy names ['spy']; valid: nat_miaq, pois_miaq, pois_minq"]
  assert not (tmp_path / "results.json").exists()


def test_a_text_set_not_prepared_is_one_line(tmp_path):
  out = _run(f"--output_dir={tmp_path}", "--algorithms=promptpate", "--text_dataset=sst2",
             env={"DPAUDIT_DATA_DIR": str(tmp_path / "tfds")})
  assert out.returncode == 2
  [line] = out.stderr.strip().splitlines()
  assert line.startswith("error: dataset 'glue/sst2' is not prepared") and "tfds build" in line
