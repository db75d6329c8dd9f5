"""A stand-in experiment for the launcher tests (tests/launch): writes its process id to
``DIR/pid_<DPAUDIT_PROCESS_ID or 0>`` and sleeps. DIR is ``--output_dir=DIR`` or the first
argument. ``--fail=I`` makes process I exit 3 at once instead; ``--child`` also starts a child
process (same process group) that writes ``DIR/pid_child`` and sleeps."""

import os
import subprocess
import sys
import time


def write_pid(directory, name):
  with open(os.path.join(directory, f"{name}.tmp"), "w") as f:
    f.write(str(os.getpid()))
  os.replace(os.path.join(directory, f"{name}.tmp"), os.path.join(directory, name))


if __name__ == "__main__":
  args = sys.argv[1:]
  directory = next((a.split("=", 1)[1] for a in args if a.startswith("--output_dir=")),
                   args[0] if args else ".")
  rank = os.environ.get("DPAUDIT_PROCESS_ID", "0")
  if "--be_child" in args:
    write_pid(directory, "pid_child")
    time.sleep(300)
    sys.exit(0)
  if any(a.startswith("--child") for a in args):
    subprocess.Popen([sys.executable, __file__, directory, "--be_child"])
  write_pid(directory, f"pid_{rank}")
  if f"--fail={rank}" in args:
    sys.exit(3)
  time.sleep(300)
