r"""Starts one experiment as N cooperating processes on this machine (jax.distributed):

    python -m launch.multihost --num_processes=2 -- experiments.noisy_argmax_audit --flags

Each process gets ``DPAUDIT_COORDINATOR_ADDRESS`` (a free loopback port), ``DPAUDIT_NUM_PROCESSES``
and ``DPAUDIT_PROCESS_ID``; the experiment's ``initialize_distributed`` joins them (CPU
collectives through Gloo), so its devices span all processes. With ``--devices_per_process``
each process gets that many CPU devices (``--xla_force_host_platform_device_count``). For testing
multi-host code on one machine; on a real cluster start the same command once per host with
the standard variables (``JAX_COORDINATOR_ADDRESS``, Slurm's) instead. Process 0's output is
shown; the others' goes to ``--process_log_dir``. Exits non-zero if any process failed.

Every process runs in a session of its own and receives SIGTERM if the launcher dies (``kill
-9`` included; ``PR_SET_PDEATHSIG``, Linux). SIGTERM, SIGINT or SIGHUP to the launcher stops
them all (SIGTERM, then SIGKILL after a grace period; exit 130), and so does any process
failing: the others would wait for it forever at their next collective. Bad arguments (counts
out of range, a module that does not exist, a ``--process_log_dir`` that is a file or cannot be
written) are one line on stderr and exit 2, before anything starts.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence

from absl import app, flags

from launch import processes

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_processes", 2, "Processes to start.")
flags.DEFINE_integer("devices_per_process", 1, "CPU devices per process.")
flags.DEFINE_string("process_log_dir", None, "Where processes 1.. write their output (default: "
                    "discarded unless they fail, then shown).")


MAX_PROCESSES = 256
MAX_DEVICES_PER_PROCESS = 1024
GRACE_S = 10.0


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def check_command(module: str, num_processes: int, devices_per_process: int,
                  log_dir: str | None = None) -> None:
  """ValueError (one line) unless the counts are in range, ``module`` can be found, and
  ``log_dir`` (when given) can become a writable directory. Starts and writes nothing."""
  if not 1 <= num_processes <= MAX_PROCESSES:
    raise ValueError(f"num_processes={num_processes} is outside the valid range "
                     f"[1, {MAX_PROCESSES}]")
  if not 1 <= devices_per_process <= MAX_DEVICES_PER_PROCESS:
    raise ValueError(f"devices_per_process={devices_per_process} is outside the valid range "
                     f"[1, {MAX_DEVICES_PER_PROCESS}]")
  if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", module):
    raise ValueError(f"{module!r} is not a Python module path (e.g. experiments.tightness)")
  try:
    found = importlib.util.find_spec(module) is not None
  except (ImportError, ValueError):
    found = False
  if not found:
    raise ValueError(f"module {module} not found (run from the repository root)")
  if log_dir is not None:
    processes.check_directory(log_dir, "process_log_dir")


def launch(module: str, args: Sequence[str], num_processes: int, devices_per_process: int = 1,
           log_dir: str | None = None, stop: processes.StopRequest | None = None
           ) -> list[subprocess.CompletedProcess]:
  """Runs ``python -m module args`` as ``num_processes`` cooperating processes until all have
  ended, one has failed (the others are then stopped) or ``stop`` is requested (all are
  stopped). Process 0's output is shown; the others' is kept for the result (and written to
  ``log_dir/process_I.log`` when given)."""
  check_command(module, num_processes, devices_per_process, log_dir)
  own_stop = stop is None
  stop = stop if stop is not None else processes.StopRequest()
  address = f"127.0.0.1:{free_port()}"
  procs, outputs = [], []
  try:
    for i in range(num_processes):
      env = dict(os.environ, DPAUDIT_COORDINATOR_ADDRESS=address,
                 DPAUDIT_NUM_PROCESSES=str(num_processes), DPAUDIT_PROCESS_ID=str(i),
                 JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
      env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count="
                          f"{devices_per_process}").strip()
      out = None if i == 0 else tempfile.TemporaryFile("w+")  # a file never blocks a writer
      outputs.append(out)
      procs.append(subprocess.Popen(
          [sys.executable, "-m", module, *args], env=env, stdout=out, stderr=out, text=True,
          preexec_fn=processes.die_with_parent(signal.SIGTERM), start_new_session=True))
    while not stop and not all(processes.exited(p) for p in procs):
      if any(processes.exited(p) and processes.reap(p) != 0 for p in procs):
        break  # one failed: the others would wait for it at their next collective
      stop.sleep(0.2)
  finally:
    processes.stop(procs, GRACE_S)  # those still running (after a failure or a stop)
    if own_stop:
      stop.restore()
  results = []
  for i, (p, out) in enumerate(zip(procs, outputs)):
    text = ""
    if out is not None:
      out.seek(0)
      text = out.read()
      out.close()
    if i and log_dir:
      os.makedirs(log_dir, exist_ok=True)
      with open(os.path.join(log_dir, f"process_{i}.log"), "w") as f:
        f.write(text)
    if i and p.returncode != 0 and not log_dir:
      sys.stderr.write(f"--- process {i} (exit {p.returncode}) ---\n{text}")
    results.append(subprocess.CompletedProcess(p.args, p.returncode, text or None, None))
  return results


def main(argv: Sequence[str]) -> None:
  stop = processes.StopRequest()
  command = list(argv[1:])
  if not command:
    print("error: give the experiment after --, e.g. -- experiments.noisy_argmax_audit",
          file=sys.stderr)
    sys.exit(2)
  try:
    check_command(command[0], FLAGS.num_processes, FLAGS.devices_per_process,
                  FLAGS.process_log_dir)
    results = launch(command[0], command[1:], FLAGS.num_processes, FLAGS.devices_per_process,
                     FLAGS.process_log_dir, stop)
  except ValueError as e:
    print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
    sys.exit(2)
  except OSError as e:
    print(f"error: {processes.describe_os_error(e)}", file=sys.stderr)
    sys.exit(2)
  codes = [r.returncode for r in results]
  if stop:
    print(f"interrupted (signal {stop.signum}): every process was stopped", file=sys.stderr)
    sys.exit(130)
  if any(codes):
    print(f"exit codes by process: {codes}", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  app.run(main, flags_parser=processes.parse_flags)
