"""xmanager jobs of a sweep (no flags: importable anywhere); the CLI is :mod:`launch.xm`."""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

from launch import sweep as sweep_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXECUTORS = ("local", "vertex", "kubernetes")


@dataclasses.dataclass(frozen=True)
class Plan:
  """What would be submitted: one packageable and, per job, its executor and arguments."""
  packageable: Any
  jobs: tuple[tuple[sweep_lib.Job, Any, dict[str, str]], ...]
  skipped: tuple[sweep_lib.Job, ...]


def job_args(job: sweep_lib.Job) -> dict[str, str]:
  return {"launch_module": job.module, **job.flags, "output_dir": job.output_dir}


def make_executor(name: str, accelerator: str = "none", count: int = 1):
  from xmanager import xm, xm_local
  if name not in EXECUTORS:
    raise ValueError(f"executor={name!r} is not one of {', '.join(EXECUTORS)}")
  if name == "local":
    return xm_local.Local(experimental_stream_output=False)
  requirements = xm.JobRequirements()
  if accelerator != "none":
    if count < 1:
      raise ValueError(f"accelerator_count={count} must be at least 1")
    try:
      xm.ResourceType[accelerator]
    except KeyError:
      raise ValueError(f"accelerator={accelerator!r} is not an xmanager resource type "
                       "(e.g. T4, V100, A100, H100, TPU_V4) or none") from None
    requirements = xm.JobRequirements(**{accelerator: count})
  executor_class = xm_local.Vertex if name == "vertex" else xm_local.Kubernetes
  return executor_class(requirements=requirements)


def make_packageable(name: str, base_image: str = "python:3.11"):
  """The program every job runs: ``python -m launch.job`` here, or in a container."""
  from xmanager import xm, xm_local
  if name == "local":
    return xm.binary(executor_spec=xm_local.Local.Spec(), path=sys.executable,
                     args=["-m", "launch.job"])
  spec = (xm_local.Vertex if name == "vertex" else xm_local.Kubernetes).Spec()
  return xm.python_container(executor_spec=spec, path=ROOT, base_image=base_image,
                             entrypoint=xm.ModuleName("launch.job"), use_deep_module=True)


def plan(sweep: sweep_lib.Sweep, executor: str, root: str, resume: bool = True,
         accelerator: str = "none", accelerator_count: int = 1,
         base_image: str = "python:3.11") -> Plan:
  jobs, skipped = [], []
  for job in sweep.jobs(root):
    if resume and executor == "local" and sweep_lib.is_finished(job):
      skipped.append(job)
      continue
    jobs.append((job, make_executor(executor, accelerator, accelerator_count), job_args(job)))
  return Plan(make_packageable(executor, base_image), tuple(jobs), tuple(skipped))


def submit(p: Plan, title: str) -> int:
  """Packages the program and adds every job to one xmanager experiment; with the local
  executor, returns when the jobs have ended. Returns the experiment id."""
  from xmanager import xm, xm_local
  with xm_local.create_experiment(experiment_title=title) as experiment:
    if p.jobs:
      [executable] = experiment.package([p.packageable])
      for _, executor, args in p.jobs:
        # Locally, a failed job must not make xmanager stop the others: launch.job exits 0
        # and the missing finished-marker reports the failure.
        # Its guard stops the experiment when this launcher ends (xmanager starts jobs
        # through a shell, so a parent-death signal would watch the shell).
        env = ({"DPAUDIT_JOB_EXIT_ZERO": "1", "DPAUDIT_JOB_LAUNCHER_PID": str(os.getpid())}
               if isinstance(executor, xm_local.Local) else {})
        experiment.add(xm.Job(executable, executor=executor, args=args, env_vars=env))
  return experiment.experiment_id


def cluster_request(executor) -> dict[str, Any]:
  """What the cluster is asked for, as xmanager will submit it: the Vertex AI machine spec
  (machine type, accelerator type and count) or the Kubernetes resource limits and node
  selector. Empty for the local executor."""
  import types

  from xmanager import xm_local
  if isinstance(executor, xm_local.Vertex):
    from xmanager.cloud import vertex
    spec = vertex.get_machine_spec(types.SimpleNamespace(executor=executor))
    return {k: getattr(v, "name", v) for k, v in spec.items()}
  if isinstance(executor, xm_local.Kubernetes):
    from xmanager.cloud import kubernetes
    return {"limits": kubernetes.requirements_from_executor(executor).limits or {},
            "node_selector": kubernetes.node_selector_from_executor(executor)}
  return {}


def describe(p: Plan) -> str:
  lines = []
  for _, executor, args in p.jobs:
    lines.append(f"{type(executor).__name__} {cluster_request(executor)} launch.job "
                 + " ".join(f"--{k}={v}" for k, v in args.items()))
  return "\n".join(lines)
