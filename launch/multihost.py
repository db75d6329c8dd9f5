r"""Starts one experiment as N cooperating processes on this machine (jax.distributed):

    python -m launch.multihost --num_processes=2 -- experiments.noisy_argmax_audit --flags

Each process gets ``DPAUDIT_COORDINATOR_ADDRESS`` (a free loopback port), ``DPAUDIT_NUM_PROCESSES``
and ``DPAUDIT_PROCESS_ID``; the experiment's ``initialize_distributed`` joins them (CPU
collectives through Gloo), so its devices span all processes. With ``--devices_per_process``
each process gets that many CPU devices (``--xla_force_host_platform_device_count``). For testing
multi-host code on one machine; on a real cluster start the same command once per host with
the standard variables (``JAX_COORDINATOR_ADDRESS``, Slurm's) instead. Process 0's output is
shown; the others' goes to ``--process_log_dir``. Exits non-zero if any process failed.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from typing import Sequence

from absl import app
from absl import flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("num_processes", 2, "Processes to start.")
flags.DEFINE_integer("devices_per_process", 1, "CPU devices per process.")
flags.DEFINE_string("process_log_dir", None, "Where processes 1.. write their output (default: "
                    "discarded unless they fail, then shown).")


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def launch(module: str, args: Sequence[str], num_processes: int, devices_per_process: int = 1,
           log_dir: str | None = None) -> list[subprocess.CompletedProcess]:
  """Runs ``python -m module args`` as ``num_processes`` cooperating processes."""
  if num_processes < 1:
    raise ValueError(f"num_processes={num_processes} must be at least 1")
  if devices_per_process < 1:
    raise ValueError(f"devices_per_process={devices_per_process} must be at least 1")
  address = f"127.0.0.1:{free_port()}"
  procs = []
  for i in range(num_processes):
    env = dict(os.environ, DPAUDIT_COORDINATOR_ADDRESS=address,
               DPAUDIT_NUM_PROCESSES=str(num_processes), DPAUDIT_PROCESS_ID=str(i),
               JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count="
                        f"{devices_per_process}").strip()
    out = None if i == 0 else subprocess.PIPE
    procs.append(subprocess.Popen([sys.executable, "-m", module, *args], env=env, stdout=out,
                                  stderr=out, text=True))
  results = []
  for i, p in enumerate(procs):
    stdout, stderr = p.communicate()
    if i and log_dir:
      os.makedirs(log_dir, exist_ok=True)
      with open(os.path.join(log_dir, f"process_{i}.log"), "w") as f:
        f.write((stdout or "") + (stderr or ""))
    if i and p.returncode != 0 and not log_dir:
      sys.stderr.write(f"--- process {i} (exit {p.returncode}) ---\n{stdout}{stderr}")
    results.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
  return results


def main(argv: Sequence[str]) -> None:
  command = list(argv[1:])
  if not command:
    print("error: give the experiment after --, e.g. -- experiments.noisy_argmax_audit",
          file=sys.stderr)
    sys.exit(2)
  try:
    results = launch(command[0], command[1:], FLAGS.num_processes, FLAGS.devices_per_process,
                     FLAGS.process_log_dir)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
  codes = [r.returncode for r in results]
  if any(codes):
    print(f"exit codes by process: {codes}", file=sys.stderr)
    sys.exit(1)


if __name__ == "__main__":
  app.run(main)
