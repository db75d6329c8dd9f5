"""Drives experiment CLIs on many command lines in ONE process (used by
tests/experiments/test_cli_bad_inputs.py, and by :func:`tests.conftest.run_cli_cases` for the
CLI smoke tests; not a test itself).

  python -m tests.experiments.cli_driver PLAN.json RESULTS.json [CASE_TIMEOUT_S]

``PLAN.json`` holds ``[{"module": name, "cases": [argv, ...]}, ...]``, each argv without the
program name, or ``{"argv": argv, "env": {name: value}, "copy_after": [[src, dst], ...],
"remove_after": [pattern, ...]}``: environment variables set for that case alone; once it
ends, files or directories copied (what a later case overwrites, kept for the test), then the
files matching the glob patterns removed. The modules are imported one after another
(each one's flags are removed before the next is imported, so flags of the same name do not
clash). For each case the flags are reset (``FLAGS.unparse_flags()``) and the module's entry
point runs exactly as its ``if __name__ == "__main__"`` block does:
:func:`experiments.common.run` (absl's ``app.run`` with the one-line flag parser and
:func:`experiments.common.cli` around ``main``), after the module's ``define_flags()`` where it
has one, with ``sys.argv`` as ``python -m module *argv`` sets it (the module's file, then the
flags). File descriptors 2 and 1 are redirected to files
during each case, so everything written to stderr - Python's, absl's and XLA's C++ logging -
and to stdout is captured. A case that is not refused within CASE_TIMEOUT_S seconds (SIGALRM;
default 30) is stopped and reported as ``timed_out``. ``RESULTS.json`` gets, per module, one
``{"code", "stderr", "stdout", "timed_out", "seconds"}`` per case.
"""

from __future__ import annotations

import glob
import importlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time


class CaseTimeout(BaseException):
  """Raised by SIGALRM: passes through ``cli`` (which handles Exception subclasses only)."""


def _alarm(signum, frame):
  del signum, frame
  raise CaseTimeout()


def run_case(entry, argv: list[str], timeout_s: int, env: dict | None = None,
             argv0: str | None = None) -> dict:
  """Runs ``entry(argv)``; ``sys.argv`` reads ``[argv0, *argv]`` meanwhile, as in ``python -m
  module *argv`` (a CLI records its command line from it), when ``argv0`` is given."""
  from absl import flags
  flags.FLAGS.unparse_flags()
  saved_argv = sys.argv
  if argv0 is not None:
    sys.argv = [argv0, *argv]
  saved_env = {name: os.environ.get(name) for name in env or {}}
  os.environ.update(env or {})
  sys.stdout.flush()
  sys.stderr.flush()
  saved_err, saved_out = os.dup(2), os.dup(1)
  with tempfile.TemporaryFile() as captured, tempfile.TemporaryFile() as printed:
    os.dup2(captured.fileno(), 2)
    os.dup2(printed.fileno(), 1)
    code, timed_out = None, False
    start = time.perf_counter()
    signal.alarm(timeout_s)
    try:
      entry(argv)
      code = 0
    except SystemExit as stop:
      code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except CaseTimeout:
      timed_out = True
    except BaseException:  # pylint: disable=broad-except
      import traceback
      traceback.print_exc()
      code = 1
    finally:
      signal.alarm(0)
      sys.stdout.flush()
      sys.stderr.flush()
      os.dup2(saved_err, 2)
      os.dup2(saved_out, 1)
      os.close(saved_err)
      os.close(saved_out)
    captured.seek(0)
    stderr = captured.read().decode(errors="replace")
    printed.seek(0)
    stdout = printed.read().decode(errors="replace")
  sys.argv = saved_argv
  for name, value in saved_env.items():
    if value is None:
      os.environ.pop(name, None)
    else:
      os.environ[name] = value
  return {"code": code, "stderr": stderr, "stdout": stdout, "timed_out": timed_out,
          "seconds": time.perf_counter() - start}


def forget_flags(before: set[str]) -> None:
  """Removes every flag defined since the flag names ``before`` were taken (the module's own
  and those it defined through helpers such as ``common.define_num_repeats_flag``), so that the
  next CLI can define flags of the same names (--seed, --num_steps, ...) in this process."""
  from absl import flags
  flags.FLAGS.unparse_flags()
  for name in set(flags.FLAGS) - before:
    delattr(flags.FLAGS, name)


def main() -> None:
  plan_path, results_path = sys.argv[1:3]
  timeout_s = int(sys.argv[3]) if len(sys.argv) > 3 else 30
  with open(plan_path) as f:
    plan = json.load(f)  # [{"module": name, "cases": [argv, ...]}, ...]
  from experiments import common
  signal.signal(signal.SIGALRM, _alarm)
  out = []
  from absl import app, flags
  app.define_help_flags()  # absl's own flags exist before the first CLI, and are kept
  for item in plan:
    module_name = item["module"]
    before = set(flags.FLAGS)
    module = importlib.import_module(module_name)
    if hasattr(module, "define_flags"):
      module.define_flags()
    entry = lambda argv, m=module, n=module_name: common.run(m.main, [n, *argv])  # noqa: E731
    out.append([])
    for case in item["cases"]:
      case = {"argv": case} if isinstance(case, list) else case
      out[-1].append(run_case(entry, case["argv"], timeout_s, case.get("env"), module.__file__))
      for src, dst in case.get("copy_after", []):
        (shutil.copytree if os.path.isdir(src) else shutil.copy2)(src, dst)
      for path in (p for pattern in case.get("remove_after", []) for p in glob.glob(pattern)):
        os.remove(path)
    forget_flags(before)
  with open(results_path, "w") as f:
    json.dump(out, f)


if __name__ == "__main__":
  main()
