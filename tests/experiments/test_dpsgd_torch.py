"""Tests of the optional PyTorch / Opacus DP-SGD baseline (skipped without torch and opacus).

Checks that the timed Opacus steps do what DP-SGD should (without noise and clipping they equal
the plain step; with clipping, hooks and ghost clipping agree and bound the update), and that
`python -m experiments.benchmarks.dpsgd_torch` prints one JSON object with the expected keys.
"""

import pytest

pytest.importorskip("torch")
pytest.importorskip("opacus")

import json  # pylint: disable=g-import-not-at-top,wrong-import-position
import subprocess  # pylint: disable=g-import-not-at-top,wrong-import-position
import sys  # pylint: disable=g-import-not-at-top,wrong-import-position
import warnings  # pylint: disable=g-import-not-at-top,wrong-import-position

import torch  # pylint: disable=g-import-not-at-top,wrong-import-position

from experiments.benchmarks import dpsgd_torch  # pylint: disable=g-import-not-at-top
from tests.conftest import ROOT, run_module

LR = 0.1


def _params_after_one_step(method, model, noise_multiplier, max_grad_norm, batch_size=16):
  x, y = dpsgd_torch.make_batch(batch_size, seed=3)
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # Opacus's secure-RNG and full-backward-hook warnings.
    step, module = dpsgd_torch.make_step(method, model, x, y, seed=7, learning_rate=LR,
                                         noise_multiplier=noise_multiplier,
                                         max_grad_norm=max_grad_norm)
    before = [p.detach().clone() for p in module.parameters()]
    step()
  after = [p.detach().clone() for p in module.parameters()]
  return before, after


@pytest.mark.parametrize("model,expected", [("mlp", 535_818), ("cnn", 61_706),
                                            ("wrn16_4", 2_748_890)])
def test_architectures_and_parameter_counts(model, expected):
  """The twins have the flax models' parameter counts (WRN-16-4: dpaudit.models' 2,748,890)."""
  module = dpsgd_torch.build_model(model)
  assert dpsgd_torch.parameter_count(module) == expected
  x, _ = dpsgd_torch.make_batch(2, seed=0, model=model)
  assert module(x).shape == (2, 10)


@pytest.mark.parametrize("model", ["mlp", "cnn"])
@pytest.mark.parametrize("method", ["opacus", "opacus_ghost"])
def test_opacus_without_noise_or_clipping_matches_the_plain_step(model, method):
  before, plain = _params_after_one_step("torch_nonprivate", model, 0.0, 1e6)
  before_private, private = _params_after_one_step(method, model, 0.0, 1e6)
  for b, bp, p, q in zip(before, before_private, plain, private):
    torch.testing.assert_close(bp, b, rtol=0, atol=0)  # Same initial weights.
    assert not torch.equal(p, b)
    torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_clipping_bounds_the_update_and_ghost_agrees_with_hooks(model):
  clip = 1e-3
  before, hooks = _params_after_one_step("opacus", model, 0.0, clip)
  _, ghost = _params_after_one_step("opacus_ghost", model, 0.0, clip)
  _, plain = _params_after_one_step("torch_nonprivate", model, 0.0, clip)
  update = torch.cat([(a - b).flatten() for a, b in zip(hooks, before)])
  plain_update = torch.cat([(a - b).flatten() for a, b in zip(plain, before)])
  # The mean of per-example gradients clipped to norm C has norm at most C.
  assert update.norm() <= LR * clip * (1 + 1e-4)
  assert plain_update.norm() > 10 * LR * clip
  for h, g in zip(hooks, ghost):
    torch.testing.assert_close(g, h, rtol=1e-4, atol=1e-7)


def test_noise_changes_the_update():
  _, quiet = _params_after_one_step("opacus", "mlp", 0.0, 1.0)
  _, noisy = _params_after_one_step("opacus", "mlp", 1.0, 1.0)
  assert not all(torch.equal(a, b) for a, b in zip(quiet, noisy))


def _run(*flags):
  return run_module("experiments.benchmarks.dpsgd_torch", *flags)


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_tiny_run_prints_one_json_object(model):
  out = _run(f"--model={model}", "--batch_size=8", "--num_steps=2", "--num_warmup=1",
             "--threads=1")
  assert out.returncode == 0, out.stderr
  lines = out.stdout.strip().splitlines()
  assert len(lines) == 1, out.stdout
  report = json.loads(lines[0])
  for key in ("available", "model", "num_parameters", "batch_size", "threads", "versions",
              *dpsgd_torch.METHODS):
    assert key in report, key
  assert report["available"] is True
  assert report["model"] == model and report["batch_size"] == 8 and report["threads"] == 1
  assert set(report["versions"]) >= {"torch", "opacus"}
  for method in dpsgd_torch.METHODS:
    timing = report[method]
    assert "error" not in timing, timing
    assert timing["num_steps"] == 2 and len(timing["step_times_s"]) == 2
    assert 0 < timing["min_s"] <= timing["median_s"] <= timing["max_s"]
    assert timing["min_s"] <= timing["mean_s"] <= timing["max_s"]


def test_serve_answers_step_requests():
  """--serve: the header line (every requested method built), then N step times per request."""
  out = subprocess.run(
      [sys.executable, "-m", "experiments.benchmarks.dpsgd_torch", "--serve", "--model=mlp",
       "--batch_size=4", "--num_warmup=1", "--threads=1",
       "--methods=torch_nonprivate,opacus_ghost"],
      input="opacus_ghost 2\ntorch_nonprivate 1\n", capture_output=True, text=True, cwd=ROOT)
  assert out.returncode == 0, out.stderr
  header, ghost, plain = (json.loads(line) for line in out.stdout.strip().splitlines())
  assert header["available"] is True and header["batch_size"] == 4
  assert "opacus_ghost" not in header and "torch_nonprivate" not in header  # no errors
  assert len(ghost) == 2 and len(plain) == 1 and min(ghost + plain) > 0


@pytest.mark.parametrize("flag,message", [
    ("--batch_size=0", "error: --batch_size=0 is outside the valid range [1, "),
    ("--num_steps=0", "error: --num_steps=0 is outside the valid range [1, "),
    ("--methods=opacus,jax", "error: --methods=opacus,jax"),
    ("--model=resnet", "error: flag --model=resnet"),
    ("--threads=two", "error: flag --threads=two"),
])
def test_bad_flag_prints_one_line_and_exits_2(flag, message):
  out = _run(flag)
  assert out.returncode == 2, out.stderr
  assert out.stdout == ""
  assert out.stderr.strip().count("\n") == 0 and out.stderr.startswith(message), out.stderr
