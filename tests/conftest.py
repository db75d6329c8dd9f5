"""Test configuration: estimators are checked in float64 against float64 references.

Tests that exercise float32 behaviour wrap themselves in ``jax.enable_x64(False)``.

The suite's time goes mostly to compiling small programs, so three settings make it cheaper
(the first two through ``XLA_FLAGS``, which the CLI tests' subprocesses inherit):

* XLA's CPU backend optimises at level 0 (``--xla_backend_optimization_level=0``): LLVM
  compiles about twice as fast, and the tests' tiny configurations run no slower (measured on
  tests/audits/test_dpsgd_audit.py + test_private_prediction_audit.py: 95 s against 115 s).
  Floating-point semantics are the same at every level (XLA uses no fast-math on CPU unless
  asked).
* XLA:CPU emits its kernels with the older loop emitters
  (``--xla_cpu_use_fusion_emitters=false``), which compile about a third faster and run the
  large elementwise programs up to 2.5x slower, which the tests' small inputs do not notice
  (measured with a fresh compilation cache, 2 cores: tests/estimators 190 s -> 125 s; the two
  audit files above 76 s -> 55 s). The program is the same; only the machine code of
  transcendental functions may differ, in the last bits. What users get (the fusion emitters,
  level 3 and the estimators' own options) is checked against scipy in a subprocess without
  these flags: ``tests/estimators/test_production_compile.py``.
* In-process tests share a persistent compilation cache (``$DPAUDIT_COMPILATION_CACHE_DIR`` or
  ``~/.cache/dpaudit/test_compilation_cache``, unbounded, apart from the library's default
  directory): a program that both xdist workers, or a
  library test and a CLI subprocess, compile is compiled once. The tests keep every program
  there, however quick its compile (``DPAUDIT_COMPILATION_CACHE_MIN_SECS=0``, inherited by the
  CLI subprocesses, unless set): the tiny configurations compile many sub-second programs, which
  each resumed CLI run and the other worker would otherwise compile again (measured with an empty
  cache on three CLI and audit test files, 2 cores: 214 s -> 191 s of CPU time).
"""

import gc
import importlib.metadata
import json
import os
import socket
import subprocess
import sys
import tempfile

# jaxlib 0.11 has no loop emitters and aborts on their flag (dpaudit.estimators._compile).
_JAXLIB = tuple(int(p) for p in importlib.metadata.version("jaxlib").split(".")[:2])
TEST_XLA_FLAGS = ("--xla_backend_optimization_level=0",) + (
    ("--xla_cpu_use_fusion_emitters=false",) if _JAXLIB < (0, 11) else ())
for _flag in TEST_XLA_FLAGS:
  if _flag.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()

import jax  # noqa: E402  # after XLA_FLAGS
import pytest  # noqa: E402  # after XLA_FLAGS

from experiments import common  # noqa: E402  # after XLA_FLAGS

jax.config.update("jax_enable_x64", True)
# Every estimator program takes the loop emitters, as the XLA flag above gives the others (the
# programs that choose the fusion emitters for small batches would override it); the choices
# themselves are tested in tests/estimators/test_compile.py, the values in
# test_production_compile.py. CLI subprocesses inherit this.
os.environ.setdefault("DPAUDIT_CPU_EMITTERS", "loop" if _JAXLIB < (0, 11) else "auto")
# Accuracy tests test the compiled programs; the host paths of first calls have tests of their
# own (dpaudit.estimators._compile.first_call). CLI subprocesses inherit this.
os.environ.setdefault("DPAUDIT_FIRST_CALLS", "compiled")
os.environ.setdefault("DPAUDIT_COMPILATION_CACHE_MIN_SECS", "0")
# Unbounded, without the bounded cache's directory scan at every write (thousands of the tests'
# programs), in a directory of its own (a bounded cache cannot write next to an unbounded one's
# entries); the CLI subprocesses inherit both, so every process writes the directory alike.
os.environ.setdefault("DPAUDIT_COMPILATION_CACHE_MAX_BYTES", "-1")
os.environ.setdefault("DPAUDIT_COMPILATION_CACHE_DIR", os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser(os.path.join("~", ".cache")),
    "dpaudit", "test_compilation_cache"))
common.enable_compilation_cache()

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_module(module: str, *flags: str) -> subprocess.CompletedProcess:
  """``python -m module *flags`` from the repository root, as a user runs an experiment's CLI;
  output captured as text."""
  return subprocess.run([sys.executable, "-m", module, *flags], capture_output=True, text=True,
                        cwd=ROOT)


def run_cli_plan(plan, timeout_s: int = 600) -> list[list[subprocess.CompletedProcess]]:
  """Runs the command lines of ``plan`` (``[(module, [case, ...]), ...]``; a case is a list of
  flags, or a dict with them as ``argv`` and, optionally, ``env`` (variables set for that case),
  ``copy_after`` (``[[src, dst], ...]``: copied once it ends, for what a later case overwrites)
  and ``remove_after`` (glob patterns of files removed then)) one after another in ONE Python
  process
  (:mod:`tests.experiments.cli_driver`), each through its CLI's entry point as ``python -m
  module *flags`` runs it: the flags parsed afresh, the one-line error and exit status of
  :func:`experiments.common.run`, its stdout and stderr captured. Per module, one
  ``CompletedProcess`` per case.

  A CLI test with several command lines (a run, its rerun or resume, the refused flags) pays
  the interpreter's start and the imports (about 3 s of CPU each) once, and a rerun finds the
  programs it traces already compiled; what a rerun reuses (cells, models, checkpoints) it still
  reads from ``--output_dir``, as a new process would. ``timeout_s`` bounds each case."""
  with tempfile.TemporaryDirectory(prefix="dpaudit-cli-plan-") as scratch:
    plan_path, results_path = (os.path.join(scratch, n) for n in ("plan.json", "results.json"))
    with open(plan_path, "w") as f:
      json.dump([{"module": module, "cases": [c if isinstance(c, dict) else list(c)
                                              for c in cases]} for module, cases in plan], f)
    done = subprocess.run([sys.executable, "-m", "tests.experiments.cli_driver", plan_path,
                           results_path, str(timeout_s)], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    with open(results_path) as f:
      outcomes = json.load(f)
  out = []
  for (module, cases), results in zip(plan, outcomes):
    out.append([])
    for case, r in zip(cases, results):
      argv = case["argv"] if isinstance(case, dict) else list(case)
      assert not r["timed_out"], f"{module} {argv} ran past {timeout_s} s"
      out[-1].append(subprocess.CompletedProcess([sys.executable, "-m", module, *argv],
                                                 r["code"], r["stdout"], r["stderr"]))
  return out


def run_cli_cases(module: str, *cases) -> list[subprocess.CompletedProcess]:
  """:func:`run_cli_plan` of one module's cases."""
  return run_cli_plan([(module, cases)])[0]

# Test files that take 20 s or more (measured with --durations), run first: pytest-xdist hands
# out tests in collection order, so a long test collected last would keep one worker busy while
# the other sits idle at the end of the run.
SLOW_FIRST = (
    "tests/experiments/test_accelerator_benchmark.py",
    "tests/launch/test_multihost.py",
    "tests/experiments/test_domias_cli.py",
    "tests/experiments/test_panoramia_cli.py",
    "tests/experiments/test_lm_reconstruction_cli.py",
    "tests/experiments/test_dpsgd_audit_cli.py",
    "tests/experiments/test_private_prediction_cli.py",
    "tests/audits/test_panoramia_modalities.py",
    "tests/launch/test_xm.py",
    "tests/launch/test_local.py",
    "tests/test_tightness.py",
    "tests/test_doctests.py",
    "tests/estimators/test_production_compile.py",
    "tests/test_docs.py",
)


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects on the markers
def pytest_collection_modifyitems(config, items):
  """Marks the tests of :data:`SLOW_FIRST` ``slow`` (``pytest -m "not slow"`` leaves them out:
  the quick local loop; CI runs everything) and moves them to the front, keeping every other
  order."""
  del config
  rank = {path: i for i, path in enumerate(SLOW_FIRST)}
  for item in items:
    if item.nodeid.split("::")[0] in rank:
      item.add_marker(pytest.mark.slow)
  key = lambda item: rank.get(item.nodeid.split("::")[0], len(rank))  # noqa: E731
  items.sort(key=key)  # stable: the rest keep their collection order


@pytest.hookimpl(trylast=True)  # after pytest-rerunfailures has connected its status database
def pytest_configure(config):
  """Sends pytest-rerunfailures' messages from an xdist worker at once. Each test writes to
  and then reads from its socket; with Nagle's algorithm on, the read waited for the
  controller's delayed ACK of the write: 40 ms per test, about 150 s of the suite's CPU time
  (measured: tests/test_bad_inputs.py with -n 2, 1,833 tests, 49 s against 11 s)."""
  connection = getattr(getattr(config, "failures_db", None), "sock", None)
  if isinstance(connection, socket.socket) and hasattr(config, "workerinput"):
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


RELEASE_ABOVE_BYTES = 3 << 30
"""A worker's resident memory above which :func:`_release_compiled_programs` lets go."""


def _resident_bytes() -> int:
  """This process's resident memory (Linux; elsewhere reported as over the limit)."""
  try:
    with open("/proc/self/statm") as f:
      return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
  except (OSError, ValueError, IndexError):
    return RELEASE_ABOVE_BYTES + 1


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
  """After a test file, drops JAX's in-memory compiled programs and tracing caches once the
  worker holds more than :data:`RELEASE_ABOVE_BYTES`. Without this an xdist worker grew to about
  7 GB by the end of the suite; dropping them after every file instead made later files trace
  again and compile again the programs JAX never keeps on disk (those with host callbacks).
  A program another file needs again comes back from the persistent cache or is recompiled."""
  yield
  if _resident_bytes() > RELEASE_ABOVE_BYTES:
    jax.clear_caches()
    gc.collect()


class Lowerings:
  """Counts the programs JAX lowers (one per compile, from the persistent cache or not) while
  the block runs: the count of a test that new sizes within a bucket compile nothing."""

  def __init__(self):
    self.count = 0

  def __enter__(self):
    def listen(event, duration, **kwargs):
      del duration, kwargs
      self.count += event == "/jax/core/compile/jaxpr_to_mlir_module_duration"
    self._listen = listen
    jax.monitoring.register_event_duration_secs_listener(listen)
    return self

  def __exit__(self, *exc):
    jax.monitoring.unregister_event_duration_listener(self._listen)
