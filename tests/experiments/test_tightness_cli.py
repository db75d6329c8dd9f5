"""`python -m experiments.tightness`'s error path (a whole run, its results, plot and table:
tests/launch/test_multihost.py, one process against two)."""

import pytest

from tests.conftest import run_module


def _run(*flags):
  return run_module("experiments.tightness", *flags)


@pytest.mark.parametrize("flag, message", [
    ("--families=dpsgd,gnmax", "error: families="),
    ("--dpsgd_audits=many_run", "error: --dpsgd_audits=many_run must be game:canary pairs"),
    ("--dpsgd_hidden_sizes=wide", "error: --dpsgd_hidden_sizes=wide must be"),
])
def test_bad_flag_is_one_line(tmp_path, flag, message):
  out = _run(f"--output_dir={tmp_path}", flag)
  assert out.returncode == 2
  assert out.stderr.strip().splitlines()[-1].startswith(message)
  assert "Traceback" not in out.stderr
