"""`python -m experiments.benchmarks.performance_docs`: docs/performance.md is what the generator
writes from the kept JSON (so the page cannot drift from it), a benchmark's table renders as
expected, and bad JSON is a one-line error. Also :func:`assert_table`, the check of a
benchmark's ``table`` that the benchmarks' smoke tests share."""

import json
import os
import re

import pytest

from experiments.benchmarks import performance_page
from tests.conftest import ROOT, run_module

MODULE = "experiments.benchmarks.performance_docs"
ROW_TYPES = {"workload": (str,), "dpaudit": (float, int), "peer": (float, int, type(None)),
             "peer_name": (str, type(None)), "unit": (str,), "ratio_of": (str,),
             "ratio": (float, int, type(None)), "target": (float, int, type(None)),
             "met": (bool, type(None))}


def assert_table(rows, min_rows: int = 1) -> None:
  """Every row has the keys and types of experiments.benchmarks.tables, a ratio in its stated
  direction, and met == (ratio >= target) where both are set (None otherwise)."""
  assert isinstance(rows, list) and len(rows) >= min_rows, rows
  for r in rows:
    assert set(r) == set(ROW_TYPES), r
    for key, kinds in ROW_TYPES.items():
      assert isinstance(r[key], kinds) and not (isinstance(r[key], bool) and bool not in kinds), (
          key, r)
    assert r["dpaudit"] >= 0 and r["unit"], r
    if r["ratio"] is not None:
      expected = (r["dpaudit"] / r["peer"] if r["ratio_of"] == "dpaudit / peer"
                  else r["peer"] / r["dpaudit"])
      assert r["ratio_of"] in ("dpaudit / peer", "peer / dpaudit"), r
      assert abs(r["ratio"] - expected) <= 1e-9 * expected, r
    if r["ratio"] is not None and r["target"] is not None:
      assert r["met"] == (r["ratio"] >= r["target"]), r
    else:
      assert r["met"] is None, r


def _generate(*flags):
  return run_module(MODULE, *flags)


def test_the_page_is_what_the_generator_writes_from_the_kept_json():
  with open(os.path.join(ROOT, "docs", "performance.md"), encoding="utf-8") as f:
    committed = f.read()
  assert performance_page.page(os.path.join(ROOT, "docs", "benchmarks")) == committed, (
      "docs/performance.md differs from the kept JSON: rerun "
      "`python -m experiments.benchmarks.performance_docs`")


def test_a_benchmark_json_renders_its_table_row(tmp_path):
  row = {"workload": "noisy argmax C=10", "dpaudit": 2.5e7, "peer": 5e6,
         "peer_name": "NumPy, float32 normals", "unit": "trials/s", "ratio_of": "dpaudit / peer",
         "ratio": 5.0, "target": 1.5, "met": True}
  report = {"command": "/x/experiments/benchmarks/montecarlo.py --output_dir=/tmp/o "
                       "--num_trials=1024", "table": [row],
            "machine": {"device": "cpu:cpu", "cpu_cores": 2, "cpu_model": "Some CPU",
                        "system": "Linux x86_64"}}
  (tmp_path / "montecarlo.json").write_text(json.dumps(report))
  page = tmp_path / "page.md"
  out = _generate(f"--benchmarks_dir={tmp_path}", f"--output={page}")  # the CLI writes the page
  assert out.returncode == 0, out.stderr
  text = page.read_text()
  assert text == performance_page.page(str(tmp_path))
  assert ("| noisy argmax C=10 | 2.5e+07 trials/s | 5e+06 trials/s (NumPy, float32 normals) "
          "| 5x | 1.5x | yes |") in text
  assert "- Command: `python -m experiments.benchmarks.montecarlo --num_trials=1024`" in text
  assert "- Machine: cpu:cpu, 2 CPU cores (Some CPU), Linux x86_64" in text
  assert "| workload | dpaudit | peer | ratio | target | met |" in text
  # The other benchmarks have no JSON there: a line on how to make each, not a failure.
  assert ("No kept JSON yet: run `python -m experiments.benchmarks.ngram --output_dir=DIR` and "
          "copy `DIR/results.json` to `docs/benchmarks/ngram.json`.") in " ".join(text.split())
  assert text.count("No kept JSON yet") == 9


def _one_line_error(out):
  assert out.returncode == 2, out.stderr
  assert "Traceback" not in out.stderr
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
  return lines[0]


def test_bad_input_is_a_value_error_naming_the_file(tmp_path):
  path = tmp_path / "ngram.json"
  for text, message in (
      ('{"table": [', f"{path} is not valid JSON"),
      (json.dumps({"table": [{
          "workload": "w", "dpaudit": 1.0, "peer": 2.0, "peer_name": None, "unit": "s",
          "ratio_of": "peer / dpaudit", "ratio": 2.0, "target": 3.0, "met": True}]}),
       "table row 0: met=True but ratio 2.0 vs target 3.0"),
      ("[]", "not a benchmark's JSON object")):
    path.write_text(text)
    with pytest.raises(ValueError, match=re.escape(message)):
      performance_page.page(str(tmp_path))
  with pytest.raises(ValueError, match="is not a directory"):
    performance_page.page(str(tmp_path / "nope"))


def test_bad_input_is_one_line(tmp_path):
  page = tmp_path / "page.md"
  (tmp_path / "ngram.json").write_text('{"table": [')
  line = _one_line_error(_generate(f"--benchmarks_dir={tmp_path}", f"--output={page}"))
  assert f"{tmp_path / 'ngram.json'} is not valid JSON" in line
  assert not page.exists()
