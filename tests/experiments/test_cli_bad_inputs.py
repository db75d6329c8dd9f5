"""Every experiment and benchmark CLI refuses bad input cleanly: a non-zero exit status (2), exactly
one non-empty line on stderr, no traceback, and nothing written (the ``--output_dir`` does not
exist afterwards, a file given as ``--output_dir`` is unchanged, the working directory stays
empty).

The CLIs are found by scanning ``experiments`` and ``experiments.benchmarks`` for modules with an
``if __name__ == "__main__"`` block, so a new one without a row in :data:`CASES` fails
:func:`test_every_cli_has_cases`. Every row of :data:`CASES` also gets the cases of
:data:`GENERIC` (when the CLI has ``--output_dir``). Placeholders: ``{out}`` is a fresh path
that does not exist, ``{file}`` an existing regular file; every case gets
``--output_dir={out}`` first unless it names its own.

Cost: one subprocess per group of CLIs (:data:`GROUPS`) runs all their cases in-process through
the same entry point as the command line (:mod:`tests.experiments.cli_driver`:
``common.run(main)``); :func:`test_real_command_lines` adds a few true ``python -m`` runs.

  case                    what it gives
  ----------------------  -----------------------------------------------------------------
  output_dir_is_file      --output_dir=<an existing file>
  output_dir_under_file   --output_dir=<file>/sub (cannot be created; root ignores chmod)
  unknown_flag            --no_such_flag=1 (absl parse error: one line, not absl's two)
  positional              a stray positional argument
  not_a_number            a word for an integer flag (absl parse error)
  inf / nan               a float flag where infinity / NaN is meaningless
  zero / negative         a count of 0 / a negative size
  empty_list              an empty list flag where a list is required
  absurd_size(_2, _3)     10^15 (or 10^30) trials / examples / canaries / resamples / classes
  absurd_width            an MLP hidden width whose per-example gradients cannot fit
  significance            --significance=1.5 (also quantile / fraction 1.5 where those exist)
  unknown_choice          a value outside a flag's choices
  others                  a fractional count, a negative seed, an empty grid of one study

Besides: ``--num_canaries=0`` of experiments.panoramia (valid, but it crashed in the zero-size
membership draw) gets past the draw to the next check; two runs on one ``--output_dir``.
"""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import subprocess
import sys

import pytest

import experiments
import experiments.benchmarks
from dpaudit import results
from tests.conftest import ROOT

BIG = str(10**15)

GENERIC = {
    "output_dir_is_file": ["--output_dir={file}"],
    "output_dir_under_file": ["--output_dir={file}/sub"],
    "unknown_flag": ["--no_such_flag=1"],
    "positional": ["stray"],
}

CASES: dict[str, dict[str, list[str]]] = {
    "experiments.bootstrap_coverage": {
        "not_a_number": ["--num_audits=abc"],
        "inf": ["--orders=2,inf"],
        "nan": ["--orders=nan"],
        "zero": ["--num_audits=0"],
        "negative": ["--num_trials=1000,-5"],
        "empty_list": ["--num_trials="],
        "empty_orders": ["--orders="],
        "absurd_size": [f"--num_audits={BIG}"],
        "absurd_size_2": [f"--num_bootstrap={BIG}"],
        "fractional_trials": ["--num_trials=1000.5"],
        "significance": ["--significance=1.5"],
    },
    "experiments.domias": {
        "not_a_number": ["--num_repeats=abc"],
        "inf": ["--study=epsilon", "--dp_epochs=inf"],
        "nan": ["--dp_delta=nan"],
        "zero": ["--num_repeats=0"],
        "negative_noise_scale": ["--noise_scales=0.7,-1"],
        "zero_epsilon": ["--epsilons=0"],
        "negative": ["--num_members=-1"],
        "empty_list": ["--study="],
        "empty_grid": ["--members="],
        "absurd_size": [f"--num_members={BIG}"],
        "absurd_size_2": [f"--num_reference={BIG}"],
        "significance": ["--significance=1.5"],
        "unknown_choice": ["--study=nope"],
        "unknown_baselines": ["--baselines=code"],
        "unknown_knowledge": ["--study=prior", "--knowledge=oracle"],
        "shift_share_above_one": ["--study=shift", "--shift_shares=1.5"],
        "unknown_shift_column": ["--shift_column=age_group"],
        "unknown_shift_non_members": ["--shift_non_members=all"],
        "negative_generator_epochs": ["--generator_epochs=-1"],
        "zero_mst_bins": ["--mst_bins=0"],
        "absurd_mst_bins": ["--mst_bins=5000"],
    },
    "experiments.dpsgd_audit": {
        "not_a_number": ["--num_runs=abc"],
        "inf": ["--epochs=inf"],
        "nan": ["--epsilons=nan"],
        "zero": ["--game=many_run", "--num_runs=0"],
        "negative": ["--batch_size=-1"],
        "empty_list": ["--epsilons="],
        "absurd_size": [f"--num_canaries={BIG}"],
        "absurd_size_2": ["--game=many_run", f"--num_runs={BIG}"],
        "absurd_width": [f"--hidden_sizes={10**9}"],
        "significance": ["--significance=1.5"],
        "unknown_choice": ["--game=nope"],
        "unknown_model": ["--model=vgg"],
        "num_warmup_examples_negative": ["--canary=poisoned", "--num_warmup_examples=-1"],
        "warmup_epochs_zero": ["--canary=poisoned", "--warmup_epochs=0"],
        "model_of_uniaud_plus": ["--game=uniaud_plus", "--canary=trigger", "--model=lenet5"],
        "canary_dim_negative": ["--canary=gaussian", "--canary_dim=-1"],
        "canary_classes_1": ["--canary=gaussian", "--num_canary_classes=1",
                             "--canaries_only"],
        "canary_dim_with_data": ["--canary=gaussian", "--canary_dim=10"],
        "canaries_only_many_run": ["--game=many_run", "--canary=gaussian", "--canaries_only"],
    },
    "experiments.gnmax_worst_case": {
        "not_a_number": ["--num_classes=abc"],
        "inf": ["--noise_multipliers=inf"],
        "nan": ["--orders=nan"],
        "zero": ["--num_teachers=0"],
        "negative": ["--max_steps=-1"],
        "empty_list": ["--noise_multipliers="],
        "absurd_size": [f"--num_classes={BIG}"],
        "absurd_size_2": [f"--num_teachers={BIG}"],
        "absurd_size_3": [f"--num_random_starts={BIG}"],
    },
    "experiments.lm_reconstruction": {
        "not_a_number": ["--num_train=abc"],
        "inf": ["--temperature=inf"],
        "nan": ["--delta=nan"],
        "zero": ["--epochs=0"],
        "negative": ["--num_exposure_samples=-1"],
        "empty_list": ["--noise_multipliers="],
        "absurd_size": [f"--num_train={BIG}"],
        "absurd_size_2": [f"--hidden_size={BIG}"],
        "quantile": ["--memorised_quantile=1.5"],
    },
    "experiments.ngram_reconstruction": {
        "not_a_number": ["--num_models=abc"],
        "inf": ["--noise_multipliers=inf"],
        "nan": ["--l2_clip_norm=nan"],
        "zero": ["--num_steps=0"],
        "negative": ["--vocab_size=-1"],
        "empty_list": ["--noise_multipliers="],
        "absurd_size": [f"--num_models={BIG}"],
        "absurd_size_2": [f"--chunk_size={BIG}"],
        "unknown_choice": ["--prng_impl=nope"],
    },
    "experiments.noisy_argmax_audit": {
        "not_a_number": ["--num_trials=abc"],
        "inf": ["--noise_multiplier=inf"],
        "nan": ["--delta=nan"],
        "zero": ["--num_trials=0"],
        "negative": ["--chunk_size=-1"],
        "empty_list": ["--orders="],
        "absurd_size": [f"--num_bootstrap={BIG}"],
        "absurd_size_2": [f"--chunk_size={BIG}"],
        "absurd_size_3": [f"--num_trials={10**30}"],
        "significance": ["--significance=1.5"],
        "unknown_choice": ["--k_cut_method=nope"],
        "seed": ["--seed=-1"],
    },
    "experiments.panoramia": {
        "not_a_number": ["--num_canaries=abc"],
        "inf": ["--target=e20,dp1", "--dp_epochs=inf"],
        "nan": ["--dp_delta=nan"],
        "zero": ["--num_audit=0"],
        "negative": ["--num_canaries=-1"],
        "empty_list": ["--target="],
        "absurd_size": [f"--num_canaries={BIG}"],
        "absurd_size_2": [f"--num_audit={BIG}"],
        "significance": ["--significance=1.5"],
        "unknown_choice": ["--modality=audio"],
        "filter_fraction": ["--filter_fraction=0.99"],
        "top_p": ["--top_p=0"],
        "top_k": ["--top_k=-1"],
        "prompt_length": ["--prompt_length=65"],
        "tabular_classifier": ["--tabular_classifier=xgb"],
        "tabular_hidden_sizes": ["--tabular_hidden_sizes=150,0"],
        "tabular_hidden_sizes_empty": ["--tabular_hidden_sizes="],
        "image_logit_scale": ["--image_logit_scale=inf"],
        "rm_rn_canaries": ["--modality=text", "--max_examples=500", "--num_audit=100",
                           "--num_classifier_train=100", "--num_canaries=4"],
    },
    "experiments.panoramia_null_calibration": {
        "not_a_number": ["--num_audits=abc"],
        "inf": ["--settings=300:inf:1"],
        "nan": ["--level=nan"],
        "zero": ["--num_audits=0"],
        "negative": ["--settings=300:1.5:-1"],
        "empty_list": ["--settings="],
        "absurd_size": [f"--null_samples={BIG}"],
        "absurd_size_2": [f"--settings={BIG}:1:3", f"--null_samples={10**6}"],
        "significance": ["--significance=1.5"],
        "level": ["--level=0.5"],
        "malformed_setting": ["--settings=300:1.5"],
    },
    "experiments.private_prediction": {
        "not_a_number": ["--num_trials=abc"],
        "inf": ["--noise_multiplier=inf"],
        "nan": ["--delta=nan"],
        "zero": ["--num_teachers=0"],
        "negative": ["--num_queries=-1"],
        "empty_list": ["--algorithms="],
        "absurd_size": [f"--num_histograms={BIG}"],
        "absurd_size_2": [f"--num_trials={BIG}"],
        "significance": ["--significance=1.5"],
        "unknown_choice": ["--algorithms=nope"],
    },
    "experiments.reconstruction_bounds": {
        "not_a_number": ["--num_bits=abc"],
        "inf": ["--max_bits=inf"],
        "nan": ["--delta=nan"],
        "zero": ["--num_steps=0"],
        "negative": ["--sampling_rate=-1"],
        "empty_list": ["--noise_multipliers="],
        "absurd_size": [f"--num_bits={BIG}"],
        "absurd_size_2": [f"--num_step_points={BIG}"],
        "absurd_size_3": [f"--max_steps={10**30}"],
    },
    "experiments.tightness": {
        "not_a_number": ["--noisy_argmax_num_trials=abc"],
        "inf": ["--noisy_argmax_noise_multiplier=inf"],
        "nan": ["--dpsgd_delta=nan"],
        "zero": ["--ngram_num_models=0"],
        "negative": ["--dpsgd_num_runs=-1"],
        "empty_list": ["--families="],
        "absurd_size": [f"--ngram_num_models={BIG}"],
        "absurd_size_2": [f"--noisy_argmax_chunk_size={BIG}"],
        "significance": ["--significance=1.5"],
        "unknown_choice": ["--families=nope"],
    },
    "experiments.train_dpsgd": {
        "not_a_number": ["--num_repeats=abc"],
        "inf": ["--epochs=inf"],
        "nan": ["--delta=nan"],
        "zero": ["--num_repeats=0"],
        "negative": ["--batch_size=-1"],
        "empty_list": ["--epsilons="],
        "absurd_size": [f"--num_repeats={BIG}"],
        "absurd_size_2": [f"--physical_batch_size={BIG}"],
        "fraction": ["--test_fraction=1.5"],
        "unknown_choice": ["--dataset=nope"],
    },
    "experiments.benchmarks.accelerator": {
        "not_a_number": ["--scale=abc"],
        "inf": ["--measure_s=inf"],
        "nan": ["--scale=nan"],
        "zero": ["--scale=0"],
        "negative": ["--budget_s=-1"],
        "absurd_size": ["--scale=1e15"],
        "absurd_size_2": [f"--processes={BIG}"],
        "unknown_choice": ["--only=nope"],
    },
    "experiments.benchmarks.domias": {
        "not_a_number": ["--num_seeds=abc"],
        "zero": ["--num_seeds=0"],
        "negative": ["--num_rows=-1"],
        "absurd_size": [f"--num_rows={BIG}"],
        "absurd_size_2": [f"--num_queries={BIG}"],
    },
    "experiments.benchmarks.dpsgd": {
        "not_a_number": ["--batch_size=abc"],
        "inf": ["--noise_multiplier=inf"],
        "nan": ["--l2_clip_norm=nan"],
        "zero": ["--num_rounds=0"],
        "negative": ["--batch_size=-1"],
        "empty_list": ["--models="],
        "absurd_size": [f"--batch_size={BIG}"],
        "unknown_choice": ["--models=nope"],
    },
    "experiments.benchmarks.dpsgd_torch": {
        "not_a_number": ["--batch_size=abc"],
        "inf": ["--noise_multiplier=inf"],
        "nan": ["--max_grad_norm=nan"],
        "zero": ["--num_steps=0"],
        "negative": ["--batch_size=-1"],
        "empty_list": ["--methods="],
        "absurd_size": [f"--batch_size={BIG}"],
        "unknown_choice": ["--model=nope"],
    },
    "experiments.benchmarks.estimators": {
        "not_a_number": ["--num_repeats=abc"],
        "inf": ["--scale=inf"],
        "nan": ["--min_timed_s=nan"],
        "zero": ["--num_repeats=0"],
        "negative": ["--scale=-1"],
        "absurd_size": ["--throughput_sizes=1e15"],
        "absurd_size_2": [f"--throughput_reference={BIG}"],
        "empty_list": ["--only=throughput", "--throughput_precisions="],
        "unknown_choice": ["--only=nope"],
    },
    "experiments.benchmarks.first_calls": {
        "not_a_number": ["--num_rounds=abc"],
        "inf": ["--scale=inf"],
        "nan": ["--scale=nan"],
        "zero": ["--num_rounds=0"],
        "negative": ["--num_rounds=-1"],
        "absurd_size": ["--scale=1e15"],
        "absurd_size_2": [f"--num_rounds={BIG}"],
        "unknown_choice": ["--only=nope"],
    },
    "experiments.benchmarks.many_run": {
        "not_a_number": ["--num_runs=abc"],
        "inf": ["--noise_multiplier=inf"],
        "nan": ["--learning_rate=nan"],
        "zero": ["--num_runs=0"],
        "negative": ["--batch_size=-1"],
        "absurd_size": [f"--num_runs={BIG}"],
        "absurd_size_2": [f"--num_steps={BIG}"],
        "unknown_choice": ["--model=nope"],
    },
    "experiments.benchmarks.montecarlo": {
        "not_a_number": ["--num_trials=abc"],
        "zero": ["--num_trials=0"],
        "negative": ["--num_repeats=-1"],
        "empty_list": ["--prng_impls="],
        "absurd_size": [f"--num_trials={BIG}"],
        "absurd_size_2": [f"--chunk_size={BIG}"],
        "unknown_choice": ["--prng_impls=nope"],
    },
    "experiments.benchmarks.ngram": {
        "not_a_number": ["--num_models=abc"],
        "inf": ["--noise_multiplier=inf"],
        "nan": ["--noise_multiplier=nan"],
        "zero": ["--num_models=0"],
        "negative": ["--num_steps=-1"],
        "absurd_size": [f"--num_models={BIG}"],
        "absurd_size_2": [f"--chunk_size={BIG}"],
        "unknown_choice": ["--prng_impl=nope"],
    },
    "experiments.benchmarks.performance_docs": {
        "output_under_file": ["--output={file}/sub/performance.md"],
        "benchmarks_dir_is_file": ["--benchmarks_dir={file}"],
        "unknown_flag": ["--no_such_flag=1"],
        "positional": ["stray"],
    },
    "experiments.benchmarks.private_prediction": {
        "not_a_number": ["--num_trials=abc"],
        "inf": ["--noise_multiplier=inf"],
        "nan": ["--noise_multiplier=nan"],
        "zero": ["--num_trials=0"],
        "negative": ["--num_repeats=-1"],
        "empty_list": ["--teacher_models="],
        "absurd_size": [f"--num_trials={BIG}"],
        "absurd_size_2": [f"--host_devices={BIG}"],
        "unknown_choice": ["--teacher_models=nope"],
    },
    "experiments.uniaud_paper_docs": {
        "results_missing": ["--results={out}/results.json"],
        "unknown_flag": ["--no_such_flag=1"],
        "positional": ["stray"],
    },
}

NO_OUTPUT_DIR = {"experiments.benchmarks.dpsgd_torch",  # prints its JSON line, writes nothing
                 "experiments.benchmarks.performance_docs",  # writes the one page --output names
                 "experiments.uniaud_paper_docs"}  # writes the kept JSON and two pages' blocks

# Split so that the two xdist workers each drive about half of the CLIs.
GROUPS = {
    "experiments": sorted(m for m in CASES if not m.startswith("experiments.benchmarks.")),
    "benchmarks": sorted(m for m in CASES if m.startswith("experiments.benchmarks.")),
}

CASE_TIMEOUT_S = 60  # a case still running then was accepted (SIGALRM stops it in Python code)
DRIVER_TIMEOUT_S = 600  # a case stuck in native code (XLA) stops the whole driver


def cli_modules() -> list[str]:
  """Every module of experiments and experiments.benchmarks with a __main__ block."""
  found = []
  for package in (experiments, experiments.benchmarks):
    for info in pkgutil.iter_modules(package.__path__):
      path = os.path.join(package.__path__[0], info.name + ".py")
      if not info.ispkg and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
          if 'if __name__ == "__main__":' in f.read():
            found.append(f"{package.__name__}.{info.name}")
  return sorted(found)


def _main_block(module: str) -> list[str]:
  """The statements of ``module``'s ``if __name__ == "__main__":`` block, as source."""
  path = os.path.join(ROOT, *module.split(".")) + ".py"
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read())
  for node in tree.body:
    if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
      return [ast.unparse(statement) for statement in node.body]
  return []


def test_every_cli_has_cases():
  assert cli_modules() == sorted(CASES), "add the new CLI's bad inputs to CASES"
  assert sorted(m for group in GROUPS.values() for m in group) == sorted(CASES)


@pytest.mark.parametrize("module", cli_modules())
def test_every_cli_enters_through_common_run(module):
  """What the driver runs is what the command line runs: ``common.run(main)`` (after
  ``define_flags()`` where flags are defined only for the program)."""
  assert _main_block(module) in (["common.run(main)"], ["define_flags()", "common.run(main)"])


def _cases(module: str) -> dict[str, list[str]]:
  cases = dict(CASES[module])
  if module not in NO_OUTPUT_DIR:
    cases.update(GENERIC)
  return cases


def _plan(tmp_path, cases_by_module):
  """The driver's plan, and per case: (module, case, its {out} path, its {file} path)."""
  plan, where = [], []
  for module, cases in cases_by_module.items():
    argvs = []
    for case, args in cases.items():
      out = tmp_path / "outs" / module / case / "out"
      file = tmp_path / "files" / f"{module}-{case}"
      file.parent.mkdir(parents=True, exist_ok=True)
      file.write_text("keep me\n")
      args = [a.format(out=out, file=file) for a in args]
      if module not in NO_OUTPUT_DIR and not any(a.startswith("--output_dir=") for a in args):
        args = [f"--output_dir={out}", *args]
      argvs.append(args)
      where.append((module, case, out, file))
    plan.append({"module": module, "cases": argvs})
  return plan, where


def _env():
  return {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _drive(tmp_path, cases_by_module):
  """Runs the cases in one driver process; [((module, case, out, file), outcome)], its cwd."""
  plan, where = _plan(tmp_path, cases_by_module)
  (tmp_path / "plan.json").write_text(json.dumps(plan))
  cwd = tmp_path / "cwd"
  cwd.mkdir()
  done = subprocess.run(
      [sys.executable, "-m", "tests.experiments.cli_driver", str(tmp_path / "plan.json"),
       str(tmp_path / "results.json"), str(CASE_TIMEOUT_S)],
      cwd=cwd, env=_env(), capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S)
  assert done.returncode == 0, done.stderr[-3000:]
  outcomes = [r for per_module in results.read_json(tmp_path / "results.json")
              for r in per_module]
  assert len(outcomes) == len(where)
  return list(zip(where, outcomes)), cwd


def _problems(out, file, outcome) -> list[str]:
  """What is wrong with one case's outcome (empty: it failed cleanly)."""
  problems = []
  lines = [line for line in outcome["stderr"].splitlines() if line.strip()]
  if outcome["timed_out"]:
    problems.append(f"still running after {CASE_TIMEOUT_S} s (accepted?)")
  elif outcome["code"] in (0, None):
    problems.append("exit status 0")
  elif outcome["code"] != 2:
    problems.append(f"exit status {outcome['code']}")
  if "Traceback" in outcome["stderr"]:
    problems.append("traceback")
  if len(lines) != 1:
    problems.append(f"{len(lines)} lines on stderr")
  elif not lines[0].startswith("error: "):
    problems.append("the line does not start with 'error: '")
  if os.path.lexists(out):
    problems.append(f"{out} was written")
  if file.read_text() != "keep me\n":
    problems.append(f"{file} was changed")
  return problems


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_bad_inputs_fail_cleanly(tmp_path, group):
  outcomes, cwd = _drive(tmp_path, {m: _cases(m) for m in GROUPS[group]})
  report = []
  for (module, case, out, file), outcome in outcomes:
    problems = _problems(out, file, outcome)
    if problems:
      tail = outcome["stderr"].strip().splitlines()[-3:]
      report.append(f"{module} {case}: {'; '.join(problems)} | {' / '.join(tail)[:300]}")
  assert not report, "\n".join(report)
  assert os.listdir(cwd) == [], "something was written to the working directory"


def test_panoramia_zero_canaries_reaches_the_later_checks(tmp_path):
  """``--num_canaries=0`` (a valid setting without the RM;RN variant: no O(1) RM/RN audit) used
  to crash in the zero-size membership draw (dpaudit.prng); with --num_audit larger than the
  data it must get past the draw to the split check and fail there, cleanly."""
  outcomes, _ = _drive(tmp_path, {"experiments.panoramia": {"zero_canaries": [
      "--modality=text", "--max_examples=500", "--num_canaries=0", "--norm_rn",
      "--num_audit=100000"]}})
  (_, _, out, file), outcome = outcomes[0]
  assert _problems(out, file, outcome) == [], outcome["stderr"]
  assert "num_audit" in outcome["stderr"] or "split" in outcome["stderr"], outcome["stderr"]


REAL = [
    ("experiments.noisy_argmax_audit", ["--output_dir={file}"], "is a file"),
    ("experiments.benchmarks.montecarlo", ["--output_dir={file}/sub"], "lies under"),
    ("experiments.tightness", ["--output_dir={out}", "--noisy_argmax_num_trials=abc"],
     "--noisy_argmax_num_trials=abc"),
]


@pytest.mark.parametrize("module,args,match", REAL, ids=[m for m, _, _ in REAL])
def test_real_command_lines(tmp_path, module, args, match):
  """The true entry point (``python -m``) behaves as the driver's."""
  out, file = tmp_path / "out", tmp_path / "file"
  file.write_text("keep me\n")
  cwd = tmp_path / "cwd"
  cwd.mkdir()
  done = subprocess.run([sys.executable, "-m", module,
                         *[a.format(out=out, file=file) for a in args]],
                        cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120)
  outcome = {"code": done.returncode, "stderr": done.stderr, "timed_out": False}
  assert _problems(out, file, outcome) == [], done.stderr
  assert match in done.stderr
  assert os.listdir(cwd) == []


def test_a_second_run_on_one_output_dir_is_refused_and_the_first_finishes(tmp_path):
  """Two processes on one --output_dir: the second exits 2 with one line naming the first's
  process id, and the first finishes as if alone. The first is stopped (SIGSTOP) while it holds
  the directory, so the second always meets it alive, however fast or loaded the machine."""
  import signal
  import time
  out = tmp_path / "out"
  flags = [f"--output_dir={out}", "--num_trials=20000", "--orders=2,4", "--num_bootstrap=20",
           "--noplot"]
  command = [sys.executable, "-m", "experiments.noisy_argmax_audit", *flags]
  with open(tmp_path / "first.err", "w") as err:
    first = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err)
  try:
    deadline = time.monotonic() + 120
    while results.directory_holder(out) != first.pid:
      assert first.poll() is None, (tmp_path / "first.err").read_text()
      assert time.monotonic() < deadline, "the first run never claimed its output directory"
      time.sleep(0.05)
    first.send_signal(signal.SIGSTOP)
    try:
      second = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    finally:
      first.send_signal(signal.SIGCONT)
    lines = second.stderr.strip().splitlines()
    assert second.returncode == 2 and len(lines) == 1, second.stderr
    assert f"pid {first.pid}" in lines[0] and "in use" in lines[0], lines
    assert first.wait(timeout=300) == 0, (tmp_path / "first.err").read_text()
  finally:
    if first.poll() is None:
      first.kill()
      first.wait()
  assert results.read_json(out / "results.json")["num_trials"] == 20000
  assert results.directory_holder(out) is None
