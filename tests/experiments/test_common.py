"""The shared experiment plumbing: the persistent compilation cache every experiment turns on,
and the clean failures of every CLI (one line on stderr, exit 2; the output directory claim)."""

import math
import os
import subprocess
import sys

import jax
import pytest

from dpaudit import results
from experiments import common

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_PROBE = """
import sys
from absl import flags
from experiments import common
flags.FLAGS(sys.argv)
print(common.enable_compilation_cache())
import jax
print(jax.config.jax_compilation_cache_dir)
"""


def _probe(*argv, env=None):
  out = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True,
                       cwd=ROOT, env={**os.environ, **(env or {})})
  assert out.returncode == 0, out.stderr
  return out.stdout.split()


def test_cache_follows_the_flag_then_the_environment(tmp_path):
  flag_dir = tmp_path / "from_flag"
  assert _probe("probe", f"--compilation_cache_dir={flag_dir}") == [str(flag_dir)] * 2
  assert flag_dir.is_dir()
  env_dir = tmp_path / "from_env"
  assert _probe("probe", env={"DPAUDIT_COMPILATION_CACHE_DIR": str(env_dir)}) == [
      str(env_dir)] * 2


def test_empty_flag_turns_the_cache_off(tmp_path):
  assert _probe("probe", "--compilation_cache_dir=")[0] == "None"


def test_a_rerun_loads_compiled_programs_from_the_cache(tmp_path):
  """The second process finds the first one's programs (entries appear on the first run and the
  rerun adds none). Every program is kept here: at XLA's optimisation level 0 the largest one
  compiles in about 0.4 s, under the default 0.5 s threshold, on an idle machine."""
  cache = tmp_path / "cache"
  run = [sys.executable, "-m", "experiments.tightness", f"--output_dir={tmp_path}",
         "--families=ngram", "--ngram_num_models=32", "--ngram_num_steps=3", "--noplot",
         f"--compilation_cache_dir={cache}"]
  env = {**os.environ, "DPAUDIT_COMPILATION_CACHE_MIN_SECS": "0"}
  assert subprocess.run(run, capture_output=True, cwd=ROOT, env=env).returncode == 0
  first = sorted(os.listdir(cache))
  assert first, "nothing was cached"
  assert subprocess.run(run, capture_output=True, cwd=ROOT, env=env).returncode == 0
  assert sorted(os.listdir(cache)) == first


# ------------------------------------------------------------------ clean failures (in-process)


def _exit(main, capsys):
  """Runs ``common.cli(main)``; returns (exit status, the stderr lines)."""
  with pytest.raises(SystemExit) as stop:
    common.cli(main)(["prog"])
  return stop.value.code, capsys.readouterr().err.strip().splitlines()


def test_a_claim_that_fails_before_writing_leaves_nothing(tmp_path, capsys):
  out = tmp_path / "a" / "b"

  def main(argv):
    del argv
    assert common.claim_output_dir(str(out)) == str(out)
    assert results.directory_holder(out) == os.getpid()
    raise ValueError("--sigma=-1 is outside the valid range (0, inf)")

  code, lines = _exit(main, capsys)
  assert code == 2 and lines == ["error: --sigma=-1 is outside the valid range (0, inf)"]
  assert not (tmp_path / "a").exists()  # the claim created a and a/b; both are gone


def test_a_claim_keeps_what_was_written_and_directories_it_did_not_create(tmp_path, capsys):
  out = tmp_path / "out"

  def main(argv):
    del argv
    common.claim_output_dir(str(out))
    (out / "cells").mkdir()
    (out / "cells" / "cell.json").write_text("{}")
    raise OSError(28, "No space left on device", str(out / "results.json"))

  code, lines = _exit(main, capsys)
  assert code == 2 and lines == [f"error: No space left on device: {out / 'results.json'}"]
  assert (out / "cells" / "cell.json").exists()
  assert results.directory_holder(out) is None  # released

  existing = tmp_path / "existing"
  existing.mkdir()

  def fails_in_existing(argv):
    del argv
    common.claim_output_dir(str(existing))
    raise ValueError("bad")

  code, _ = _exit(fails_in_existing, capsys)
  assert code == 2 and existing.is_dir()  # it was there before the claim


@pytest.mark.parametrize("path,match", [("", "--output_dir is empty"),
                                         ("{file}", "is a file, not a directory"),
                                         ("{file}/sub", "which is a file, not a directory")])
def test_claim_refuses_paths_that_cannot_be_directories(tmp_path, path, match):
  file = tmp_path / "file"
  file.write_text("keep")
  with pytest.raises(ValueError, match=match):
    common.claim_output_dir(path.format(file=file))
  assert file.read_text() == "keep"


@pytest.mark.parametrize("error,code,match", [
    (MemoryError("Unable to allocate 71.0 PiB"), 2, "error: out of memory: lower "),
    (jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 1e18 bytes"), 2,
     "error: out of memory: lower "),
    (KeyboardInterrupt(), 130, "error: interrupted"),
    (OSError(2, "No such file or directory", "data.csv"),
     2, "error: No such file or directory: data.csv"),
    (ValueError("line one\nline two"), 2, "error: line one line two"),
])
def test_user_caused_failures_are_one_line(capsys, error, code, match):
  def main(argv):
    raise error

  got, lines = _exit(main, capsys)
  assert got == code and len(lines) == 1 and lines[0].startswith(match), lines


def test_bugs_keep_their_traceback():
  def main(argv):
    raise ZeroDivisionError("a bug")

  with pytest.raises(ZeroDivisionError):
    common.cli(main)(["prog"])

  def xla_bug(argv):
    raise jax.errors.JaxRuntimeError("INTERNAL: something else")

  with pytest.raises(jax.errors.JaxRuntimeError):  # an XLA error that is not about memory
    common.cli(xla_bug)(["prog"])


def test_size_checks_name_the_flag_and_the_range():
  with pytest.raises(ValueError, match=r"--num_trials=0 is outside the valid range \[1, "):
    common.check_count("num_trials", 0)
  with pytest.raises(ValueError, match=r"--num_trials=.* \[1, 1099511627776\]"):
    common.check_count("num_trials", 2**40 + 1)
  high = common.physical_memory_bytes() // 8
  assert common.check_memory("chunk_size", high, 8.0) == high
  with pytest.raises(ValueError, match=r"--chunk_size=\d+ is outside the valid range \[1, \d+\]:"
                                       r" it would need at least .* more than this machine's"):
    common.check_memory("chunk_size", high + 1, 8.0)
  for value in (math.inf, math.nan):
    with pytest.raises(ValueError, match=r"--sigma=.* is outside the valid range \(0, inf\)"):
      common.check_float("sigma", value, 0.0, low_open=True)
  assert common.check_float("epsilon", math.inf, 0.0, low_open=True, allow_inf=True) == math.inf
  with pytest.raises(ValueError, match="--orders is empty"):
    common.check_floats("orders", (), 1.0, low_open=True)
  with pytest.raises(ValueError, match=r"--significance=1.5 is outside the valid range \(0, 1\)"):
    common.check_significance(1.5)


# ------------------------------------------------------------------ the shared flags in --help

_HELP = """
import contextlib, importlib, io, json, sys
from absl import app, flags
from experiments import common
from tests.experiments.cli_driver import forget_flags
app.define_help_flags()
out = {}
for name in json.loads(sys.argv[1]):
  before = set(flags.FLAGS)
  module = importlib.import_module(name)
  if hasattr(module, "define_flags"):
    module.define_flags()
  sys.argv[0] = name  # absl's --help lists the key flags of sys.argv[0]'s module
  text = io.StringIO()
  with contextlib.redirect_stdout(text), contextlib.suppress(SystemExit):
    common.run(module.main, [name, "--help"])
  out[name] = text.getvalue()
  forget_flags(before)
print(json.dumps(out))
"""


def test_every_cli_help_lists_the_shared_flags():
  """``--help`` of every CLI (the key flags of its module) lists --compilation_cache_dir and
  --distributed beside its own flags: all CLIs in one subprocess, as tests/experiments/
  cli_driver.py runs them."""
  import json

  from tests.experiments.test_cli_bad_inputs import cli_modules
  modules = cli_modules()
  out = subprocess.run([sys.executable, "-c", _HELP, json.dumps(modules)], capture_output=True,
                       text=True, cwd=ROOT, timeout=600)
  assert out.returncode == 0, out.stderr
  helps = json.loads(out.stdout.strip().splitlines()[-1])
  assert sorted(helps) == modules
  for name, text in helps.items():
    assert f"{name}:" in text, (name, text[:300])  # the CLI's own flags
    for flag in common.SHARED_FLAGS:
      assert f"--{flag}:" in text, (name, flag)
