"""Buckets, first calls on the host and the persistent compilation cache
(dpaudit.estimators._compile, dpaudit.compilation_cache)."""

import os
import subprocess
import sys
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpaudit import compilation_cache
from dpaudit.estimators import _compile
from tests.conftest import Lowerings


@pytest.mark.parametrize("n, bucket", [(0, 128), (1, 128), (128, 128), (129, 256), (1000, 1024),
                                       (1024, 1024), (1025, 2048), (10**6, 2**20)])
def test_bucket_size_is_the_least_power_of_two_at_or_above(n, bucket):
  assert _compile.bucket_size(n) == bucket


def test_pad_edge_repeats_the_last_element():
  x = np.arange(6.0).reshape(2, 3)
  np.testing.assert_array_equal(_compile.pad_edge(x, 5), [[0, 1, 2, 2, 2], [3, 4, 5, 5, 5]])
  np.testing.assert_array_equal(_compile.pad_edge(x, 4, axis=0)[2:], [[3, 4, 5], [3, 4, 5]])
  assert _compile.pad_edge(x, 3) is not None
  with pytest.raises(ValueError, match="size=2"):
    _compile.pad_edge(x, 2)


def test_elementwise_gives_the_direct_values_and_compiles_once_per_bucket():
  program = jax.jit(lambda a, b: (a * b + jnp.sin(a), jnp.stack([a, b], axis=-1)))
  rng = np.random.default_rng(0)
  with Lowerings() as counter:
    for shape in [(1000,), (1001,), (7, 143), (1002,)]:  # all in the bucket of 1024
      a = rng.normal(size=shape)
      out, stacked = _compile.elementwise(program, a, 2.0)
      assert isinstance(out, jax.Array) and out.shape == shape
      assert stacked.shape == shape + (2,)
      np.testing.assert_array_equal(out, a * 2.0 + np.sin(a))
  assert counter.count == 1
  traced = jax.jit(lambda a: _compile.elementwise(lambda x: x + 1.0, a))(jnp.ones(3))
  np.testing.assert_array_equal(traced, 2.0)


def _host_and_program():
  calls = {"host": 0}

  def host(x):
    calls["host"] += 1
    return np.cumsum(x)
  return jax.jit(jnp.cumsum), host, calls


def test_first_call_answers_on_the_host_then_takes_the_compiled_program(monkeypatch):
  monkeypatch.setenv(_compile.FIRST_CALLS_VARIABLE, "auto")
  program, host, calls = _host_and_program()
  x = np.arange(5.0)
  first = _compile.first_call(program, host, (x,), x.size)
  assert calls["host"] == 1 and isinstance(first, jax.Array)
  np.testing.assert_array_equal(first, [0, 1, 3, 6, 10])
  _compile._compiles[_compile.program_key(program, (x,))].result(timeout=60)
  again = _compile.first_call(program, host, (x + 1.0,), x.size)  # same bucket: compiled
  assert calls["host"] == 1
  np.testing.assert_array_equal(again, np.cumsum(x + 1.0))


@pytest.mark.parametrize("mode, size, host_calls", [("compiled", 5, 0), ("host", 5, 2),
                                                    ("auto", _compile.SMALL_ELEMENTS + 1, 0)])
def test_first_call_modes_and_large_inputs(monkeypatch, mode, size, host_calls):
  monkeypatch.setenv(_compile.FIRST_CALLS_VARIABLE, mode)
  program, host, calls = _host_and_program()
  for _ in range(2):
    _compile.first_call(program, host, (np.ones(3),), size)
  assert calls["host"] == host_calls


def test_first_call_inside_a_trace_takes_the_program(monkeypatch):
  monkeypatch.setenv(_compile.FIRST_CALLS_VARIABLE, "host")
  program, host, calls = _host_and_program()
  out = jax.jit(lambda x: _compile.first_call(program, host, (x,), 3))(jnp.ones(3))
  np.testing.assert_array_equal(out, [1, 2, 3])
  assert calls["host"] == 0


def test_first_calls_mode_names_the_variable(monkeypatch):
  monkeypatch.setenv(_compile.FIRST_CALLS_VARIABLE, "sometimes")
  with pytest.raises(ValueError, match="DPAUDIT_FIRST_CALLS='sometimes'.*auto, compiled, host"):
    _compile.first_calls_mode()


def test_program_keys_follow_buckets_dtypes_and_static_values():
  key = _compile.program_key
  f = jax.jit(jnp.sum)
  assert key(f, (np.ones(1000), 0.05)) == key(f, (np.ones(1001), 0.01))
  assert key(f, (np.ones(1000),)) != key(f, (np.ones(1025),))
  assert key(f, (np.ones(10),)) != key(f, (np.ones(10, np.float32),))
  assert key(f, (np.ones(10), "two-sided")) != key(f, (np.ones(10), "less"))


def test_importing_dpaudit_turns_the_cache_on(tmp_path):
  """In either order of imports; ``import dpaudit`` (and its NumPy-only modules) imports no JAX:
  the cache is turned on when JAX's own import finishes, and JAX keeps its own loader."""
  env = {**{k: v for k, v in os.environ.items() if not k.startswith("DPAUDIT_COMPILATION_CACHE")},
         "XDG_CACHE_HOME": str(tmp_path / "xdg")}
  show = ("print(jax.config.jax_compilation_cache_dir, jax.config.jax_compilation_cache_max_size,"
          " type(jax.__spec__.loader).__name__)")
  jax_first = "import jax, dpaudit; " + show
  dpaudit_first = ("import sys, dpaudit, dpaudit.results; assert 'jax' not in sys.modules; "
                   "import jax; " + show)
  expected = str(tmp_path / "xdg" / "dpaudit" / "compilation_cache")
  for code in (jax_first, dpaudit_first):
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [expected, str(compilation_cache.DEFAULT_MAX_BYTES),
                                  "SourceFileLoader"]
  assert os.path.isdir(expected)


@pytest.mark.parametrize("variables, expected", [
    ({compilation_cache.SWITCH_VARIABLE: "off"}, None),
    ({compilation_cache.DIR_VARIABLE: "/proc/no/such/dir"}, None),  # cannot be created
    ({}, "own"),  # a directory the caller chose in JAX first is kept
])
def test_the_default_cache_has_an_opt_out_and_keeps_a_callers_directory(
    monkeypatch, tmp_path, variables, expected):
  for name in (compilation_cache.SWITCH_VARIABLE, compilation_cache.DIR_VARIABLE):
    monkeypatch.delenv(name, raising=False)
  for name, value in variables.items():
    monkeypatch.setenv(name, value)
  before = compilation_cache.directory()
  try:
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "own") if expected else None)
    assert compilation_cache.enable_by_default() == (expected and str(tmp_path / "own"))
  finally:
    jax.config.update("jax_compilation_cache_dir", before)


def test_bad_cache_settings_name_the_variable(monkeypatch, tmp_path):
  monkeypatch.setenv(compilation_cache.MIN_SECONDS_VARIABLE, "soon")
  before = compilation_cache.directory()
  try:
    with pytest.raises(ValueError, match="DPAUDIT_COMPILATION_CACHE_MIN_SECS='soon'"):
      compilation_cache.enable(str(tmp_path))
  finally:
    jax.config.update("jax_compilation_cache_dir", before)


_WRITER = """
import sys, jax, jax.numpy as jnp
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
import dpaudit
f = jax.jit(lambda x: jnp.cumsum(jnp.sin(x) * jnp.arange(x.size)))
print(float(f(jnp.ones(int(sys.argv[1])))[-1]))
"""


def test_processes_share_the_cache_and_a_broken_entry_is_compiled_again(tmp_path):
  env = {**{k: v for k, v in os.environ.items() if not k.startswith("DPAUDIT_COMPILATION")},
         compilation_cache.DIR_VARIABLE: str(tmp_path), compilation_cache.MIN_SECONDS_VARIABLE: "0"}

  def start():
    return subprocess.Popen([sys.executable, "-c", _WRITER, "300"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
  writers = [start(), start()]  # at once, on one directory
  outputs = {w.communicate(timeout=120)[0].strip() for w in writers}
  assert all(w.returncode == 0 for w in writers) and len(outputs) == 1
  entries = [p for p in tmp_path.iterdir() if p.name.endswith("-cache")]
  assert entries
  for entry in entries:  # as a process killed while writing would leave them
    entry.write_bytes(entry.read_bytes()[:20])
  again = start()
  out, err = again.communicate(timeout=120)
  assert again.returncode == 0 and {out.strip()} == outputs
  assert "Error reading persistent compilation cache entry" in err


def test_background_compiles_are_bounded(monkeypatch):
  monkeypatch.setenv(_compile.FIRST_CALLS_VARIABLE, "auto")
  started = time.perf_counter()
  programs = [jax.jit(lambda x, i=i: x + i) for i in range(_compile.MAX_PENDING_COMPILES + 3)]
  for program in programs:
    _compile.first_call(program, lambda x: x, (np.ones(2),), 2)
  for future in list(_compile._compiles.values()):
    future.result(timeout=60)
  assert time.perf_counter() - started < 60


def test_compiles_asked_for_inside_a_block_start_when_it_ends(monkeypatch):
  monkeypatch.setenv(_compile.FIRST_CALLS_VARIABLE, "auto")
  program, host, calls = _host_and_program()
  x = np.arange(4.0)
  key = _compile.program_key(program, (x,))
  with _compile.compiles_after():
    _compile.first_call(program, host, (x,), x.size)
    with _compile.compiles_after():  # nested: defers to the outer block
      _compile.first_call(program, host, (x,), x.size)
    assert key not in _compile._compiles and calls["host"] == 2
  _compile._compiles[key].result(timeout=60)


def test_enabling_after_a_compile_takes_effect(tmp_path, monkeypatch):
  monkeypatch.setenv(compilation_cache.MIN_SECONDS_VARIABLE, "0")
  before = compilation_cache.directory()
  try:
    compilation_cache.disable()
    jax.jit(lambda x: x * 3.0)(1.0)  # JAX opens (here: no) cache at the first compile
    compilation_cache.enable(str(tmp_path))
    jax.jit(lambda x: jnp.cos(x) * 7.0)(jnp.ones(5))
    assert any(p.name.endswith("-cache") for p in tmp_path.iterdir())
  finally:
    if before:
      compilation_cache.enable(before)
    else:
      compilation_cache.disable()


def test_an_entry_without_its_access_time_does_not_block_the_bounded_cache(tmp_path,
                                                                          monkeypatch):
  orphan = tmp_path / "jit_f-0123-cache"  # as an unbounded cache, or a killed writer, leaves it
  orphan.write_bytes(b"entry")
  monkeypatch.setenv(compilation_cache.MIN_SECONDS_VARIABLE, "0")
  monkeypatch.setenv(compilation_cache.MAX_BYTES_VARIABLE, str(1 << 30))
  before = compilation_cache.directory()
  try:
    compilation_cache.enable(str(tmp_path))
    assert (tmp_path / "jit_f-0123-atime").read_bytes() == bytes(8)  # evicted first
    with warnings.catch_warnings():
      warnings.simplefilter("error")  # JAX warns when a write fails
      jax.jit(lambda x: jnp.tan(x) * 5.0)(jnp.ones(3))
    names = {p.name for p in tmp_path.iterdir()}
    entries = {n[:-len("-cache")] for n in names if n.endswith("-cache")}
    assert len(entries) >= 2 and {n + "-atime" for n in entries} <= names
  finally:
    monkeypatch.undo()
    if before:
      compilation_cache.enable(before)
    else:
      compilation_cache.disable()


def test_elementwise_with_constant_inputs_inside_a_callers_trace():
  a = np.arange(5.0)
  out = jax.jit(lambda: _compile.elementwise(jax.jit(lambda x: x * 2.0), a))()
  np.testing.assert_array_equal(out, a * 2.0)
