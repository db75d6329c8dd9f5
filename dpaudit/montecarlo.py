"""Outcome counts of a randomized mechanism over very many trials, in bounded memory.

Every audit in dpaudit reduces a mechanism to the counts of its discrete outcomes over N
independent runs (which class noisy argmax returned, whether a guess was right, ...). This
module computes those counts without ever holding the N samples:

* trials are grouped in chunks of ``chunk_size``; a chunk is one ``vmap`` of ``sample_fn``
  over ``chunk_size`` keys, reduced at once to per-outcome counts;
* a compiled ``fori_loop`` runs ``chunks_per_call`` chunks per device per call, so memory is set
  by the chunk and does not grow with N;
* with several local devices the chunks of a call are sharded across them (``shard_map``);
* chunk ``g`` draws its keys from ``fold_in(key, g)``, so the counts for a seed do not depend on
  the chunking across devices or calls, nor on being interrupted and resumed;
* between calls the host accumulates int64 counts, reports progress and, if asked, writes a
  checkpoint from which an interrupted run resumes without losing finished chunks.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from dpaudit import _validate, results

SampleFn = Callable[..., jax.Array]
ProgressFn = Callable[[int, int], None]

_ONE_HOT_MAX_OUTCOMES = 64
_MAX_TRIALS_PER_CALL = 2**30  # per-device int32 counts stay far from overflow
_MIN_BYTES_PER_TRIAL = 16  # a trial's key and outcome, the least a chunk holds per trial


@dataclasses.dataclass(frozen=True)
class Plan:
  """How N trials are cut into chunks, calls and devices (derived, never user state)."""
  num_trials: int
  chunk_size: int
  chunks_per_call: int
  num_devices: int

  @property
  def num_chunks(self) -> int:
    return math.ceil(self.num_trials / self.chunk_size)

  @property
  def chunks_per_round(self) -> int:
    return self.chunks_per_call * self.num_devices


def make_plan(num_trials: int, chunk_size: int, num_devices: int,
              chunks_per_call: int | None = None, target_trials_per_call: int = 2**24) -> Plan:
  """Chooses a chunking for ``num_trials``; small runs get a chunk no larger than needed.

  ``num_trials`` may be as large as one likes (the trials stream through the chunks); the chunk
  that is actually used must fit in memory, at :data:`_MIN_BYTES_PER_TRIAL` bytes per trial at
  least (its key and outcome; a trial's own working set comes on top)."""
  _validate.check_integer("num_trials", num_trials, 1)
  _validate.check_integer("chunk_size", chunk_size, 1)
  _validate.check_integer("num_devices", num_devices, 1)
  per_device = math.ceil(num_trials / num_devices)
  chunk_size = int(min(chunk_size, 1 << max(0, (per_device - 1).bit_length())))
  _validate.check_allocation("chunk_size", chunk_size, _MIN_BYTES_PER_TRIAL, what="trial")
  if chunks_per_call is None:
    chunks_needed = math.ceil(per_device / chunk_size)
    chunks_per_call = max(1, min(chunks_needed, target_trials_per_call // chunk_size))
  _validate.check_integer("chunks_per_call", chunks_per_call, 1)
  if chunks_per_call * chunk_size > _MAX_TRIALS_PER_CALL:
    raise ValueError(f"chunks_per_call * chunk_size = {chunks_per_call * chunk_size} exceeds "
                     f"{_MAX_TRIALS_PER_CALL} trials per device call; lower chunks_per_call")
  return Plan(int(num_trials), chunk_size, int(chunks_per_call), int(num_devices))


def _count(outcomes: jax.Array, valid: jax.Array, num_outcomes: int) -> jax.Array:
  """Counts of outcomes in [0, num_outcomes) plus one overflow bin for anything else."""
  outcomes = outcomes.astype(jnp.int32)
  out_of_range = jnp.logical_or(outcomes < 0, outcomes >= num_outcomes)
  bins = jnp.where(out_of_range, num_outcomes, outcomes)
  if num_outcomes + 1 <= _ONE_HOT_MAX_OUTCOMES:
    hits = jnp.logical_and(bins[:, None] == jnp.arange(num_outcomes + 1), valid[:, None])
    return jnp.sum(hits, axis=0, dtype=jnp.int32)
  return jnp.bincount(bins, weights=valid.astype(jnp.int32), length=num_outcomes + 1
                      ).astype(jnp.int32)


def _device_call(sample_fn: SampleFn, plan: Plan, num_outcomes: int) -> Callable:
  """Counts of the chunks [first, first + chunks_per_call) on one device."""
  last_chunk = plan.num_chunks - 1
  last_chunk_size = plan.num_trials - last_chunk * plan.chunk_size

  def run(key, first_chunk, args):
    def body(j, counts):
      chunk = first_chunk + j
      keys = jax.random.split(jax.random.fold_in(key, chunk), plan.chunk_size)
      outcomes = jax.vmap(lambda k: sample_fn(k, *args))(keys)
      if outcomes.ndim != 1:
        raise ValueError(f"sample_fn must return one integer outcome per trial (a scalar); got "
                         f"shape {outcomes.shape[1:]} per trial")
      # Only the last chunk is partial; chunks past the end (last round) count nothing.
      size = jnp.where(chunk < last_chunk, plan.chunk_size,
                       jnp.where(chunk == last_chunk, last_chunk_size, 0))
      valid = jnp.arange(plan.chunk_size) < size
      return counts + _count(outcomes, valid, num_outcomes)

    init = jnp.zeros((num_outcomes + 1,), jnp.int32)
    return jax.lax.fori_loop(0, plan.chunks_per_call, body, init)

  return run


@functools.lru_cache(maxsize=32)
def _compile_round(sample_fn: SampleFn, plan: Plan, num_outcomes: int,
                   devices: tuple[jax.Device, ...]) -> Callable:
  """One round: every device runs one call on its own block of chunks; returns each device's
  counts, ``(num_devices, K + 1)`` int32, as a NumPy array.

  With devices of several processes (``jax.distributed``), every process runs this with the
  same arguments; each feeds the chunk offsets of its own devices, and the per-device counts
  are gathered to every process (summed there in int64, so no int32 overflow)."""
  run = _device_call(sample_fn, plan, num_outcomes)
  if len(devices) == 1:
    return jax.jit(lambda key, firsts, args: run(key, firsts[0], args)[None])
  mesh = Mesh(np.asarray(devices), ("devices",))

  def sharded(key, firsts, args):
    return run(key, firsts[0], args)[None]

  mapped = jax.shard_map(sharded, mesh=mesh,
                         in_specs=(PartitionSpec(), PartitionSpec("devices"), PartitionSpec()),
                         out_specs=PartitionSpec("devices"), check_vma=False)
  firsts_sharding = NamedSharding(mesh, PartitionSpec("devices"))
  compiled = jax.jit(mapped)

  def call(key, firsts, args):
    firsts = np.asarray(firsts)
    global_firsts = jax.make_array_from_callback(firsts.shape, firsts_sharding,
                                                 lambda index: firsts[index])
    out = compiled(key, global_firsts, args)
    if out.is_fully_addressable:
      return np.asarray(out)
    from jax.experimental import multihost_utils
    return np.asarray(multihost_utils.process_allgather(out, tiled=True))

  return call


@dataclasses.dataclass(frozen=True)
class Checkpoint:
  """Counts of the first ``chunks_done`` chunks of a run identified by ``fingerprint``."""
  fingerprint: str
  chunks_done: int
  counts: np.ndarray


def _fingerprint(key: jax.Array, plan: Plan, num_outcomes: int, tag: str) -> str:
  if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
    key_bytes = np.asarray(jax.random.key_data(key)).tobytes()
    impl = str(jax.random.key_impl(key))
  else:  # a raw uint32 key array of the default implementation
    key_bytes = np.asarray(key).tobytes()
    impl = "raw"
  payload = json.dumps({"trials": plan.num_trials, "chunk": plan.chunk_size,
                        "outcomes": num_outcomes, "impl": impl, "tag": tag})
  return hashlib.sha256(key_bytes + payload.encode()).hexdigest()


def load_checkpoint(path: str, fingerprint: str, plan: Plan | None = None,
                    num_outcomes: int | None = None) -> Checkpoint | None:
  """The checkpoint at ``path`` if it belongs to this run and is whole, else None (recompute).

  Whole: readable (:func:`dpaudit.results.load_arrays`), with an integer ``chunks_done`` and
  a 1-D integer ``counts``; given the run's ``plan`` and ``num_outcomes``, also ``chunks_done``
  in ``[0, num_chunks]``, ``num_outcomes + 1`` non-negative counts and as many trials counted
  as the finished chunks hold."""
  stored = results.load_arrays(path, fingerprint)
  if stored is None:
    return None
  try:
    done, counts = stored["chunks_done"], stored["counts"]
  except KeyError:
    return None
  if (done.shape != () or done.dtype.kind not in "iu" or counts.ndim != 1
      or counts.dtype.kind not in "iu" or np.any(counts < 0) or int(done) < 0):
    return None
  checkpoint = Checkpoint(fingerprint, int(done), counts.astype(np.int64))
  if plan is not None and num_outcomes is not None:
    trials = min(plan.num_trials, checkpoint.chunks_done * plan.chunk_size)
    if (checkpoint.chunks_done > plan.num_chunks or counts.shape != (num_outcomes + 1,)
        or int(checkpoint.counts.sum()) != trials):
      return None
  return checkpoint


def save_checkpoint(path: str, checkpoint: Checkpoint) -> None:
  """Atomically replaces ``path`` (write to a temporary file, then rename)."""
  results.save_arrays(path, checkpoint.fingerprint, {"chunks_done": checkpoint.chunks_done,
                                                     "counts": checkpoint.counts})


def count_outcomes(sample_fn: SampleFn, key: jax.Array, num_trials: int, num_outcomes: int, *,
                   args: Sequence[Any] = (), chunk_size: int = 2**16,
                   chunks_per_call: int | None = None,
                   devices: Sequence[jax.Device] | None = None,
                   progress: ProgressFn | None = None,
                   checkpoint_path: str | None = None,
                   checkpoint_tag: str = "") -> np.ndarray:
  """Counts of the outcomes of ``sample_fn(key, *args)`` over ``num_trials`` independent trials.

  Args:
    sample_fn: pure function ``(key, *args) -> int`` returning one outcome in
      ``[0, num_outcomes)`` per call; it is vmapped over keys and compiled once.
    key: a JAX PRNG key (typed or raw; any implementation, e.g. ``threefry2x32`` or ``rbg``).
    num_trials: N >= 1. Any size: memory does not depend on it.
    num_outcomes: number of distinct outcomes K >= 1.
    args: extra arguments passed unchanged to every call (arrays are fine: they are traced
      once, so changing their values does not recompile).
    chunk_size: trials per vmapped chunk (sets the memory: about chunk_size times one trial's
      working set). Shrunk automatically for small N.
    chunks_per_call: chunks per device per compiled call; default targets about 2^24 trials
      per call, which sets how often progress is reported and checkpoints are written.
    devices: devices to shard over (default: every device of every process, which is the
      local devices unless ``jax.distributed`` was initialised; then every process must make
      the same call, and all get the same counts, identical to a one-process run).
    progress: optional ``progress(trials_done, num_trials)`` called after every call.
    checkpoint_path: optional ``.npz`` path; finished chunks are saved after every call and a
      matching checkpoint is resumed from (the fingerprint covers the key, N, chunk size,
      K and ``checkpoint_tag``; a stale file for a different run is ignored and replaced).
    checkpoint_tag: distinguishes runs that share key and sizes but differ in ``args``.

  Returns:
    int64 NumPy array of shape ``(num_outcomes,)`` summing to ``num_trials``.

  Raises:
    ValueError: on bad arguments, or if ``sample_fn`` returned outcomes outside
      ``[0, num_outcomes)``.
  """
  _validate.check_integer("num_outcomes", num_outcomes, 1)
  _validate.check_key(key)
  devices = list(devices) if devices is not None else jax.devices()
  if not devices:
    raise ValueError("devices is empty; need at least one device")
  plan = make_plan(num_trials, chunk_size, len(devices), chunks_per_call)
  fingerprint = _fingerprint(key, plan, num_outcomes, checkpoint_tag)
  counts = np.zeros(num_outcomes + 1, np.int64)
  chunks_done = 0
  if checkpoint_path:
    saved = load_checkpoint(checkpoint_path, fingerprint, plan, num_outcomes)
    if saved is not None:
      counts, chunks_done = saved.counts, saved.chunks_done
  round_fn = _compile_round(sample_fn, plan, num_outcomes, tuple(devices))
  args = tuple(args)
  while chunks_done < plan.num_chunks:
    firsts = chunks_done + plan.chunks_per_call * np.arange(len(devices), dtype=np.int32)
    per_device = np.asarray(round_fn(key, jnp.asarray(firsts), args))
    counts = counts + per_device.sum(axis=0, dtype=np.int64)
    chunks_done = min(plan.num_chunks, chunks_done + plan.chunks_per_round)
    if checkpoint_path and jax.process_index() == 0:  # one writer when multi-process
      save_checkpoint(checkpoint_path, Checkpoint(fingerprint, chunks_done, counts))
    if progress is not None:
      progress(min(plan.num_trials, chunks_done * plan.chunk_size), plan.num_trials)
  if counts[-1]:
    raise ValueError(f"sample_fn returned {counts[-1]} outcomes outside [0, {num_outcomes}); "
                     "check num_outcomes")
  return counts[:-1]


class ProgressPrinter:
  """A ``progress`` callback printing trials done, rate and ETA at most every ``every_s``."""

  def __init__(self, label: str, every_s: float = 5.0, stream=None):
    self.label = label
    self.every_s = every_s
    self.stream = stream
    self._start = time.perf_counter()
    self._last = -math.inf

  def __call__(self, done: int, total: int) -> None:
    now = time.perf_counter()
    if done < total and now - self._last < self.every_s:
      return
    self._last = now
    elapsed = now - self._start
    rate = done / elapsed if elapsed > 0 else float("nan")
    eta = (total - done) / rate if rate > 0 else float("nan")
    print(f"[{self.label}] {done:,}/{total:,} trials ({100 * done / total:5.1f}%), "
          f"{rate / 1e6:.1f} M trials/s, ETA {eta:.0f} s", file=self.stream or sys.stderr,
          flush=True)
