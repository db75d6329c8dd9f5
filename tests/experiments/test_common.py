"""The shared experiment plumbing: the persistent compilation cache every experiment turns on."""

import os
import subprocess
import sys

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
         "--families=ngram", "--ngram_models=32", "--ngram_steps=3", "--noplot",
         f"--compilation_cache_dir={cache}"]
  env = {**os.environ, "DPAUDIT_COMPILATION_CACHE_MIN_SECS": "0"}
  assert subprocess.run(run, capture_output=True, cwd=ROOT, env=env).returncode == 0
  first = sorted(os.listdir(cache))
  assert first, "nothing was cached"
  assert subprocess.run(run, capture_output=True, cwd=ROOT, env=env).returncode == 0
  assert sorted(os.listdir(cache)) == first
