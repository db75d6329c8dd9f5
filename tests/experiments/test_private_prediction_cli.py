"""Smoke test of `python -m experiments.private_prediction`: results, resume, bad flags."""

import numpy as np
import pytest

from dpaudit.results import read_json
from tests.conftest import run_cli_cases

# private_knn runs in tests/audits/test_private_prediction_audit.py (validity of its 2-cut).
TINY = ("--algorithms=pate,promptpate", "--feature_epochs=2", "--feature_model=mlp",
        "--adversaries=pois_miaq", "--num_teachers=5",
        "--num_instantiations=3", "--instantiations_per_call=3", "--num_queries=2",
        "--num_trials=2000", "--num_histograms=16", "--epochs=2", "--orders=2,8",
        "--report_orders=2,8", "--model=logistic", "--k_cut_method=goodman")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """This module's command lines in one process (tests.conftest.run_cli_cases): the refused
  ones, then a tiny run (its --output_dir copied to ``first_dir`` once it ends) and a rerun
  on the same --output_dir."""
  out_dir = tmp_path_factory.mktemp("private_prediction")
  first_dir = out_dir.parent / f"{out_dir.name}_first"
  bad = {name: tmp_path_factory.mktemp(name) for name in ("orders", "flags", "text")}
  cases = [
      (f"--output_dir={bad['orders']}", "--orders=2,8", "--report_orders=2,32"),
      (f"--output_dir={bad['flags']}", "--adversaries=nat_miaq,spy"),
      {"argv": [f"--output_dir={bad['text']}", "--algorithms=promptpate",
                "--text_dataset=sst2"],
       "env": {"DPAUDIT_DATA_DIR": str(bad["text"] / "tfds")}},
      {"argv": [f"--output_dir={out_dir}", *TINY, "--poison_label=runner_up"],
       "copy_after": [[str(out_dir), str(first_dir)]]},
      (f"--output_dir={out_dir}", *TINY, "--poison_label=runner_up", "--algorithms=pate",
       "--num_repeats=2"),
  ]
  orders, flags, text, first, again = run_cli_cases("experiments.private_prediction", *cases)
  return {"out_dir": out_dir, "first_dir": first_dir, "first": first, "again": again,
          "orders": orders, "flags": flags, "text": text, "bad_dirs": bad}


def test_tiny_run_writes_results_and_resumes(runs):
  """A tiny run: RDP first and labelled, the composed numbers apart with their caveat, the
  model divergence with its spread; a rerun reuses the cells, and --num_repeats=2 reuses the
  first seed's cell, adds the second's and reports their spread."""
  from dpaudit.audits import private_prediction as pp
  tmp_path = runs["first_dir"]  # as the first run left it
  out = runs["first"]
  assert out.returncode == 0, out.stderr
  written = read_json(tmp_path / "results.json")
  cells = written["cells"]
  assert sorted(cells) == ["pate/pois_miaq", "promptpate/pois_miaq"]
  for cell in cells.values():
    pp.check_cell(cell)
    assert cell["num_queries"] == 2 and 0 <= cell["teacher_accuracy"] <= 1
    worst = cell["worst_query"]
    assert all(a <= b + 1e-12 for a, b in zip(worst["model_divergence"],
                                              worst["data_independent"]))
    composed = cell["composed"]
    assert composed["kind"] == "repeated" and composed["num_queries"] == 1000  # MIAQ repeats
    assert composed["caveat"] == pp.COMPOSITION_CAVEAT and cell["caveats"] == [composed["caveat"]]
  assert cells["pate/pois_miaq"]["model_divergence_method"] == "monte_carlo"
  assert cells["promptpate/pois_miaq"]["model_divergence_method"] == "exact"
  # --poison_label=runner_up: PATE's labels come from the probe's clean votes (the true label
  # is never chosen, so the label is the probe's plurality or runner-up)
  pate = cells["pate/pois_miaq"]
  assert pate["poison"]["poison_label"] == "runner_up"
  for label, votes in zip(pate["crafted_labels"], pate["poison"]["probe_vote_histograms"]):
    assert label in np.argsort(-np.asarray(votes), kind="stable")[:2] or max(votes) == sum(votes)
  prompt = cells["promptpate/pois_miaq"]  # fixed histograms of 5 LLM teachers' votes
  assert all(sum(h) == 5 for h in prompt["histograms"] + prompt["neighbor_histograms"])
  assert prompt["poison_label"] == "runner_up"
  # the run's own labels: meaning, caveats, declared choices, the orders shown, the spread
  assert written["caveats"] == [pp.COMPOSITION_CAVEAT]
  assert "no composition assumption" in written["meaning"]["worst_query"]
  assert "spread" in written["meaning"] and written["report_orders"] == [2.0, 8.0]
  assert written["declared"]["paper_learning_rate"] == 0.03
  assert "0.03" in written["declared"]["teacher_learning_rate"]
  spread = written["spread"]["pate/pois_miaq"]
  assert spread["worst_query.two_cut@8"]["n"] == 1
  assert spread["worst_query.two_cut@8"]["median"] == pate["worst_query"]["two_cut"][1]
  assert spread["epsilon.k_cut"]["median"] == pate["composed"]["epsilon"]["k_cut"]
  assert "repetitions" not in written  # one repetition: the cells are the run
  assert (tmp_path / "audit.png").stat().st_size > 0
  assert (tmp_path / "leakage.png").stat().st_size > 10_000
  table = out.stdout
  assert "RDP of one query, the worst of the audited queries (no composition assumption)" in table
  assert f"caveat: {pp.COMPOSITION_CAVEAT}" in table
  assert "not (eps, delta) lower bounds" in table and "(exact)" in table and " ± " in table
  headers = [line for line in table.splitlines() if line.startswith("cell")]
  assert len(headers) == 3 and all("model div." in line for line in headers)
  again = runs["again"]  # --algorithms=pate --num_repeats=2
  assert again.returncode == 0, again.stderr
  assert again.stderr.count("(reused)") == 1  # seed 0's cell; seed 1's is new
  rerun = read_json(runs["out_dir"] / "results.json")
  assert rerun["cells"] == {"pate/pois_miaq": pate}
  assert [r["seed"] for r in rerun["repetitions"]] == [0, 1]
  first, second = (r["cells"]["pate/pois_miaq"] for r in rerun["repetitions"])
  assert first == pate and second != pate
  for name, get in (("worst_query.model_divergence@2", lambda c: c["worst_query"]
                     ["model_divergence"][0]),
                    ("epsilon.data_independent",
                     lambda c: c["composed"]["epsilon"]["data_independent"])):
    s = rerun["spread"]["pate/pois_miaq"][name]
    lo, hi = sorted([get(first), get(second)])
    assert s["n"] == 2 and s["values"] == [get(first), get(second)]
    assert lo <= s["median"] <= hi and s["min"] == lo and s["max"] == hi
  assert "median [min, max] over 2 repetitions (seeds 0..1)" in again.stdout


def test_report_orders_not_audited_is_one_line(runs):
  out = runs["orders"]  # --orders=2,8 --report_orders=2,32
  assert out.returncode == 2
  assert out.stderr.strip().splitlines() == [
      "error: --report_orders=2,32 names orders [32.0] that are not among --orders=2,8"]
  assert not (runs["bad_dirs"]["orders"] / "results.json").exists()


def test_bad_flags_give_one_line_errors(runs):
  out = runs["flags"]  # --adversaries=nat_miaq,spy
  assert out.returncode == 2
  assert out.stderr.strip().splitlines() == [
      "error: --adversaries=nat_miaq,spy names ['spy']; valid: nat_miaq, pois_miaq, pois_minq"]
  assert not (runs["bad_dirs"]["flags"] / "results.json").exists()


def test_a_text_set_not_prepared_is_one_line(runs):
  out = runs["text"]  # --algorithms=promptpate --text_dataset=sst2, an empty data directory
  assert out.returncode == 2
  [line] = out.stderr.strip().splitlines()
  assert line.startswith("error: dataset 'glue/sst2' is not prepared") and "tfds build" in line
