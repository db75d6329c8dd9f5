"""One flag vocabulary across the CLIs (issue 40): ``noise_multiplier(s)``, ``epsilons``,
``num_*`` for counts; a renamed flag's old name stays for one release as a deprecated alias
(:func:`experiments.common.deprecated_alias`) that sets the new flag and prints one warning line.

(a) Each renamed flag, given by its old name with a bad value, is refused exactly as the new
name is (same error line, naming the new flag: the alias parsed the same value into it), after
``warning: --old is deprecated; use --new``; run in one process by the in-process CLI driver.
(b) No CLI defines a flag by an old name (the source is parsed, nothing is imported).
"""

from __future__ import annotations

import ast
import glob
import json
import os
import subprocess
import sys
import textwrap

from dpaudit import results
from tests.conftest import ROOT

# Old names no CLI may define (as a flag of its own; as a deprecated alias they are fine).
OLD_NAMES = frozenset({"sigma", "sigmas", "noise_levels", "target_epsilons", "dp_epsilons",
                       "repeats", "repetitions", "seeds", "teachers", "rounds",
                       "noisy_argmax_sigma", "noisy_argmax_trials", "dpsgd_runs",
                       "dpsgd_canaries", "ngram_models", "ngram_steps"})


# (module, old flag, new flag, a value the CLI refuses before doing any work).
RENAMED = [
    ("experiments.tightness", "noisy_argmax_sigma", "noisy_argmax_noise_multiplier", "-1"),
    ("experiments.tightness", "noisy_argmax_trials", "noisy_argmax_num_trials", "2"),
    ("experiments.tightness", "dpsgd_runs", "dpsgd_num_runs", "0"),
    ("experiments.tightness", "dpsgd_canaries", "dpsgd_num_canaries", "0"),
    ("experiments.tightness", "ngram_models", "ngram_num_models", "0"),
    ("experiments.tightness", "ngram_steps", "ngram_num_steps", "0"),
    ("experiments.noisy_argmax_audit", "sigma", "noise_multiplier", "-1"),
    ("experiments.gnmax_worst_case", "sigmas", "noise_multipliers", "4,-1"),
    ("experiments.reconstruction_bounds", "sigmas", "noise_multipliers", "-1"),
    ("experiments.train_dpsgd", "target_epsilons", "epsilons", "1,-2"),
    ("experiments.train_dpsgd", "repetitions", "num_repeats", "0"),
    ("experiments.dpsgd_audit", "repetitions", "num_repeats", "0"),
    ("experiments.domias", "repetitions", "num_repeats", "0"),
    ("experiments.domias", "noise_levels", "noise_scales", "-1"),
    ("experiments.domias", "dp_epsilons", "epsilons", "1,-2"),
    ("experiments.private_prediction", "sigma", "noise_multiplier", "-1"),
    ("experiments.private_prediction", "repetitions", "num_repeats", "0"),
    ("experiments.panoramia", "repetitions", "num_repeats", "0"),
    ("experiments.benchmarks.private_prediction", "sigma", "noise_multiplier", "-1"),
    ("experiments.benchmarks.private_prediction", "repeats", "num_repeats", "0"),
    ("experiments.benchmarks.private_prediction", "teachers", "num_trained_teachers", "-1"),
    ("experiments.benchmarks.domias", "seeds", "num_seeds", "0"),
    ("experiments.benchmarks.domias", "repeats", "num_repeats", "0"),
    ("experiments.benchmarks.many_run", "repeats", "num_repeats", "0"),
    ("experiments.benchmarks.estimators", "repeats", "num_repeats", "0"),
    ("experiments.benchmarks.ngram", "repeats", "num_repeats", "0"),
    ("experiments.benchmarks.montecarlo", "repeats", "num_repeats", "0"),
    ("experiments.benchmarks.first_calls", "rounds", "num_rounds", "0"),
]


def _env():
  return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}


def test_old_names_warn_and_set_the_new_flag(tmp_path):
  plan, expected = [], []
  for module in dict.fromkeys(m for m, *_ in RENAMED):
    cases = []
    for m, old, new, bad in RENAMED:
      if m == module:
        out = tmp_path / "out" / f"{module}-{old}"
        cases += [[f"--output_dir={out}", f"--{new}={bad}"],
                  [f"--output_dir={out}", f"--{old}={bad}"]]
        expected.append((module, old, new, out))
    plan.append({"module": module, "cases": cases})
  (tmp_path / "plan.json").write_text(json.dumps(plan))
  done = subprocess.run(
      [sys.executable, "-m", "tests.experiments.cli_driver", str(tmp_path / "plan.json"),
       str(tmp_path / "results.json"), "60"],
      cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  outcomes = [r for per_module in results.read_json(tmp_path / "results.json") for r in per_module]
  assert len(outcomes) == 2 * len(expected)
  for (module, old, new, out), by_new, by_old in zip(expected, outcomes[::2], outcomes[1::2]):
    what = f"{module} --{old}"
    new_lines = by_new["stderr"].strip().splitlines()
    old_lines = by_old["stderr"].strip().splitlines()
    assert by_new["code"] == by_old["code"] == 2, (what, by_new, by_old)
    assert len(new_lines) == 1 and new_lines[0].startswith("error: "), (what, new_lines)
    assert f"--{new}" in new_lines[0] or new_lines[0].startswith(f"error: {new}="), what
    assert old_lines == [f"warning: --{old} is deprecated; use --{new}", new_lines[0]], what
    assert not out.exists(), what


def test_alias_forms_booleans_help_and_one_warning(tmp_path):
  """``--old value``, ``--noold`` of a boolean, the old name given twice (one warning),
  ``FLAGS.old`` reading the new flag, and ``--help`` marking the alias as deprecated."""
  script = tmp_path / "tiny_cli.py"
  script.write_text(textwrap.dedent("""\
      from absl import flags
      from experiments import common
      flags.DEFINE_integer("num_things", 1, "Things.")
      flags.DEFINE_bool("draw", True, "Draw.")
      common.deprecated_alias("things", "num_things")
      common.deprecated_alias("paint", "draw")
      FLAGS = flags.FLAGS

      def main(argv):
        print(FLAGS.num_things, FLAGS.things, FLAGS.draw, FLAGS.paint)
        common.check_count("num_things", FLAGS.num_things)

      if __name__ == "__main__":
        common.run(main)
      """))

  def run(*args):
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                          cwd=ROOT, env=_env(), timeout=120)

  out = run("--things", "3", "--things=4", "--nopaint")
  assert out.returncode == 0, out.stderr
  assert out.stdout.split() == ["4", "4", "False", "False"]
  assert out.stderr.splitlines() == ["warning: --things is deprecated; use --num_things",
                                     "warning: --paint is deprecated; use --draw"]
  out = run("--num_things=5", "--nodraw")
  assert out.returncode == 0 and out.stderr == "" and out.stdout.split() == ["5", "5", "False",
                                                                             "False"]
  out = run("--things=0")
  assert out.returncode == 2
  lines = out.stderr.splitlines()
  assert len(lines) == 2 and lines[0] == "warning: --things is deprecated; use --num_things"
  assert lines[1].startswith("error: --num_things=0 is outside the valid range [1, ")
  out = run("--help")  # (absl's --help exits with status 1)
  assert "--num_things: Things." in out.stdout
  assert "--things: Deprecated (removed in the next release): use --num_things." in out.stdout


def _defined_flags(path: str) -> list[str]:
  """The flag names ``path`` defines by ``flags.DEFINE_*("name", ...)`` (aliases are defined by
  ``deprecated_alias``; ``common.define_num_repeats_flag`` defines ``num_repeats``)."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read())
  names = []
  for node in ast.walk(tree):
    if not isinstance(node, ast.Call):
      continue
    func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
    if (func.startswith("DEFINE_") and func not in ("DEFINE_alias", "DEFINE_flag")
        and node.args and isinstance(node.args[0], ast.Constant)):
      names.append(node.args[0].value)
  return names


def _cli_files() -> list[str]:
  files = []
  for path in sorted(glob.glob(os.path.join(ROOT, "experiments", "*.py"))
                     + glob.glob(os.path.join(ROOT, "experiments", "benchmarks", "*.py"))):
    with open(path, encoding="utf-8") as f:
      if 'if __name__ == "__main__":' in f.read():
        files.append(os.path.relpath(path, ROOT))
  return files


def test_no_cli_defines_an_old_flag_name():
  files = _cli_files()
  assert "experiments/noisy_argmax_audit.py" in files and len(files) >= 15
  bad = {path: sorted(OLD_NAMES.intersection(_defined_flags(os.path.join(ROOT, path))))
         for path in files}
  assert not {path: names for path, names in bad.items() if names}, (
      "use the shared vocabulary (noise_multiplier(s), epsilons, num_*) and keep the old name "
      "as common.deprecated_alias(old, new)")
