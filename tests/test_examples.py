"""The scripts under examples/ run end to end at a tiny size and fail cleanly on bad input."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "examples", "audit_my_dpsgd_model.py")


def _run(*args: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                        cwd=ROOT, timeout=600, check=False)


def test_every_example_is_listed_and_tested():
  scripts = sorted(f for f in os.listdir(os.path.join(ROOT, "examples")) if f.endswith(".py"))
  listing = open(os.path.join(ROOT, "examples", "README.md"), encoding="utf-8").read()
  tests = open(__file__, encoding="utf-8").read()
  assert scripts == ["audit_my_dpsgd_model.py"]
  assert all(f"({s})" in listing and s in tests for s in scripts)


def test_audit_my_dpsgd_model(tmp_path):
  output = tmp_path / "audit.json"
  out = _run("--num_canaries=16", "--epochs=1", "--games=one_run", f"--output={output}")
  assert out.returncode == 0, out.stderr
  assert out.stdout.startswith("one_run: epsilon >= ")
  written = json.loads(output.read_text())
  result = written["one_run"]
  assert result["quantity"] == "epsilon" and result["kind"] == "finite-sample"
  assert 0.0 <= result["lower_bound"] <= result["ceiling"] and result["reference"] > 0
  assert result["observations"] == 16 and result["details"]["model"] == "SmallCNN"


def test_audit_my_dpsgd_model_bad_input():
  out = _run("--epsilon=-1", "--num_canaries=16", "--epochs=1", "--games=one_run")
  assert out.returncode != 0
  assert out.stderr.strip().startswith("error: ") and "Traceback" not in out.stderr
  assert len(out.stderr.strip().splitlines()) == 1
