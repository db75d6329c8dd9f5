r"""PANORAMIA (Kazmi et al.) end to end, side by side with the O(1) audit of Steinke et al.

  python -m experiments.panoramia --modality=image --output_dir=out/panoramia_image
  python -m experiments.panoramia --modality=tabular --target=e20,e50,e100
  python -m experiments.panoramia --modality=text --target=dp1,dp4,dp20,dpinf
  python -m experiments.panoramia --modality=text --target=e5,e30 --repetitions=3

The real data are split once (``--seed``): ``--num_canaries`` candidates each join the target's
training set with probability 1/2 (the O(1) audit with real members and real non-members,
RM/RN); every other example is a member. :func:`dpaudit.audits.panoramia.prepare_audit` runs
Alg. 1 up to the MIA once (generator on D_G, helpers, the baselines of Table 3: helper trained
on generated data, on real data, none); then each target of ``--target`` is trained and
audited (:func:`~dpaudit.audits.panoramia.measure_target`): c_lb of the strongest baseline
(Bonferroni over the baselines), {c+eps}_lb, eps~ with its null reference (the eps~ of
``--null_samples`` audits of a target that leaks nothing, and the p-value of the measured one),
O(1) RM/GN and RM/RN, and for DP targets the accountant's epsilon. Targets: ``eN`` trains N
epochs without privacy (Table 4's E20/E50/E100), ``dpX`` trains ``--dp_epochs`` epochs with
DP-SGD at epsilon X (``dpinf``: the same schedule without clipping or noise; Tables 5, 7, 8).
``--repetitions=N`` repeats the whole audit at seeds ``--seed``, ``--seed + 1``, ...; the tables
show the median [min, max] over them and how many repetitions measured an eps~ beyond the null.

Writes ``results.json``, ``precision_recall.png`` (Fig. 3: precision and the per-threshold
bound against recall, MIA of each target and the baseline), the generator's samples
(``samples.png`` for images, ``samples.txt`` for text and tables) and prints Tables 3 and 4.
Every finished stage is kept under ``--output_dir``/cells (the audit setup as an ``.npz``,
each target as a cell; a target's training checkpoints in its ``.partial`` directory), so an
interrupted run resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys

from absl import flags
import numpy as np

from experiments import common

DEFAULT_MAX_EXAMPLES = {"image": 0, "tabular": 12000, "text": 6000}
FLAGS = flags.FLAGS
flags.DEFINE_string("modality", "image", "Kind of data: image, tabular or text.")
flags.DEFINE_list("target", ["e20", "e50", "e100"],
                  "Targets to audit: eN (N epochs, non-private) or dpX (DP-SGD at epsilon X, "
                  "X = inf for the same schedule without noise).")
flags.DEFINE_enum("dataset", "mnist_subset", ["mnist_subset", "mnist", "fashion_mnist", "cifar10"],
                  "Image data (mnist, fashion_mnist, cifar10 need a prepared tfds copy).")
flags.DEFINE_string("data_dir", None, "tfds data directory.")
flags.DEFINE_integer("max_examples", -1,
                     "Use at most this many real examples (0: all; -1: the modality's default, "
                     "all images, 12,000 Adult rows, 6,000 Shakespeare lines).")
flags.DEFINE_integer("num_canaries", 1000,
                     "Candidates of the O(1) RM/RN audit, each trained on w.p. 1/2.")
flags.DEFINE_integer("num_audit", 1000, "m = |D_in^te|, the audit set's size.")
flags.DEFINE_integer("num_classifier_train", 1000, "|D_in^tr| (as many generated non-members).")
flags.DEFINE_integer("num_generator_train", 0, "|D_G| (0: every remaining member).")
flags.DEFINE_integer("num_helper_train", 2000, "Generated examples the helper is trained on.")
flags.DEFINE_list("helpers", ["generated", "real", "none"],
                  "Baselines of Table 3, by helper (generated, real, none); c_lb is the "
                  "strongest's, each tested at beta / (2B) under --correction=bonferroni.")
flags.DEFINE_integer("classifier_epochs", 30, "Epochs of the baseline and the MIA.")
flags.DEFINE_integer("generator_epochs", 30, "Epochs of the VAE or of the text generator LM.")
flags.DEFINE_integer("helper_epochs", 20, "Epochs of the helper model.")
flags.DEFINE_float("mst_epsilon", 100.0, "Epsilon of the MST generator (tabular).")
flags.DEFINE_integer("mst_iters", 1000, "Mirror-descent iterations of MST.")
flags.DEFINE_float("dp_epochs", 20.0, "Epochs of the dpX targets.")
flags.DEFINE_float("dp_delta", 1e-5, "delta of the DP targets' accountant.")
flags.DEFINE_float("target_learning_rate", 1e-3, "Adam step size of targets and helpers.")
flags.DEFINE_integer("target_batch_size", 64, "Expected batch size of targets and helpers.")
flags.DEFINE_integer("text_max_length", 64, "Text: lines of at most this many characters - 1.")
flags.DEFINE_integer("text_hidden_size", 256, "Text: hidden width of the character LMs.")
flags.DEFINE_float("significance", 0.05, "beta: c_lb and {c+eps}_lb hold jointly at 1 - beta.")
flags.DEFINE_enum("correction", "bonferroni", ["bonferroni", "none"],
                  "Choice of threshold and of strongest baseline: bonferroni (valid) or none "
                  "(the paper's, optimistic).")
flags.DEFINE_integer("null_samples", 200,
                     "Null audits (a target that leaks nothing: a MIA as strong as the strongest "
                     "baseline) giving eps~'s reference distribution and p-value; 0: none.")
flags.DEFINE_float("delta", 0.0, "delta of the O(1) audits.")
flags.DEFINE_integer("seed", 0, "Seed of the split, generator, models and membership draws.")
common.define_repetitions_flag("the whole audit (split, generator, baselines, targets); "
                               "repetition i is the run at --seed=SEED+i")
flags.DEFINE_string("output_dir", "out/panoramia", "Where results and figures go.")
flags.DEFINE_bool("resume", True, "Reuse finished stages under output_dir/cells.")
flags.DEFINE_bool("plot", True, "Write the figures.")


def parse_target(name: str):
  """``eN`` or ``dpX`` as a :class:`~dpaudit.audits.panoramia_modalities.TrainSpec`."""
  from dpaudit.audits import panoramia_modalities as mod
  common_args = dict(batch_size=FLAGS.target_batch_size,
                     learning_rate=FLAGS.target_learning_rate, delta=FLAGS.dp_delta)
  try:
    if name.startswith("dp"):
      return mod.TrainSpec(epochs=FLAGS.dp_epochs, epsilon=float(name[2:]), **common_args)
    if name.startswith("e"):
      return mod.TrainSpec(epochs=float(name[1:]), **common_args)
  except ValueError as error:
    if "could not convert" not in str(error):
      raise ValueError(f"--target={name}: {error}") from None
  raise ValueError(f"--target={name!r} must be eN (N > 0 epochs) or dpX (epsilon X > 0 or inf)")


def load_examples():
  """The modality's real examples, its model spec, the audit modality and a description."""
  from dpaudit import data
  from dpaudit.audits import panoramia as pan
  from dpaudit.audits import panoramia_modalities as mod
  from dpaudit.mechanisms import mst
  from dpaudit.models import ngram, vae
  helper = mod.TrainSpec(epochs=FLAGS.helper_epochs, batch_size=FLAGS.target_batch_size,
                         learning_rate=FLAGS.target_learning_rate)
  if FLAGS.modality == "image":
    ds = data.load(FLAGS.dataset, "train", data_dir=FLAGS.data_dir)
    examples = pan.Examples(ds.features, ds.labels)
    shape = ds.features.shape[1:]
    modality = mod.image_modality(shape, ds.num_classes,
                                  vae.VaeConfig(epochs=FLAGS.generator_epochs), helper)
    return examples, mod.image_spec(shape, ds.num_classes), modality, None
  if FLAGS.modality == "tabular":
    ds = data.load("adult", "train", data_dir=FLAGS.data_dir)
    examples = pan.Examples(ds.features, ds.labels)
    modality = mod.tabular_modality(mst.MstConfig(epsilon=FLAGS.mst_epsilon,
                                                  iters=FLAGS.mst_iters), helper)
    return examples, mod.tabular_spec(mod.adult_binnings()[:-1]), modality, None
  corpus = data.load_text("shakespeare", "train", data_dir=FLAGS.data_dir)
  lines = sorted({t for t in corpus.texts if 8 <= len(t) < FLAGS.text_max_length})
  vocab = ngram.CharVocab.from_texts(lines)
  examples = mod.text_examples(vocab, lines, FLAGS.text_max_length)
  generator = dataclasses.replace(helper, epochs=FLAGS.generator_epochs)
  modality = mod.text_modality(vocab, generator, helper, hidden_size=FLAGS.text_hidden_size)
  return examples, mod.text_spec(vocab, hidden_size=FLAGS.text_hidden_size), modality, vocab


def panoramia_config():
  from dpaudit.attacks import panoramia as attacks
  from dpaudit.audits import panoramia as pan
  return pan.PanoramiaConfig(
      num_audit=FLAGS.num_audit, num_classifier_train=FLAGS.num_classifier_train,
      num_generator_train=FLAGS.num_generator_train or None,
      num_helper_train=FLAGS.num_helper_train, baseline_helpers=tuple(FLAGS.helpers),
      classifier=attacks.ClassifierConfig(epochs=FLAGS.classifier_epochs),
      significance=FLAGS.significance, correction=FLAGS.correction, delta=FLAGS.delta,
      null_samples=FLAGS.null_samples)


def check_flags() -> None:
  """Every flag that can be checked without the data, before anything is written: sizes in
  their ranges (at most MAX_COUNT), finite rates, the targets and the PANORAMIA config. The
  data-dependent checks (enough examples for the canaries and the splits) follow in
  :func:`run`, before its first write."""
  from dpaudit import _validate
  from dpaudit.audits import panoramia_modalities as mod
  _validate.check_choice("--modality", FLAGS.modality, mod.MODALITIES)
  if not FLAGS.target:
    raise ValueError("--target must name at least one target")
  for name in FLAGS.target:
    parse_target(name)
  for name, low in (("num_canaries", 0), ("num_audit", 1), ("num_classifier_train", 1),
                    ("num_generator_train", 0), ("num_helper_train", 1),
                    ("classifier_epochs", 1), ("generator_epochs", 1), ("helper_epochs", 1),
                    ("mst_iters", 1), ("target_batch_size", 1), ("text_max_length", 2),
                    ("max_examples", -1)):
    common.check_count(name, FLAGS[name].value, low)
  # A character LM of this width: its weights, gradient and Adam's moments (float32).
  common.check_memory("text_hidden_size", FLAGS.text_hidden_size, 16.0 * 4 * 100,
                      what="the text models")
  common.check_float("mst_epsilon", FLAGS.mst_epsilon, 0.0, low_open=True, allow_inf=True)
  common.check_float("dp_epochs", FLAGS.dp_epochs, 0.0, low_open=True)
  common.check_float("dp_delta", FLAGS.dp_delta, 0.0, 1.0, low_open=True, high_open=True)
  common.check_float("target_learning_rate", FLAGS.target_learning_rate, 0.0, low_open=True)
  common.check_significance(FLAGS.significance)
  common.check_delta(FLAGS.delta)
  common.check_seed(FLAGS.seed)
  common.check_count("null_samples", FLAGS.null_samples, 0, 10**6)
  common.repetition_seeds(FLAGS.seed, FLAGS.repetitions)
  panoramia_config()


def _setup_arrays(setup) -> dict[str, np.ndarray]:
  arrays = {"train_inputs": setup.train_set.inputs, "train_labels": setup.train_set.labels,
            "train_member": setup.train_member, "audit_inputs": setup.audit.inputs,
            "audit_labels": setup.audit.labels, "is_member": setup.is_member,
            "preview_inputs": setup.generated_preview.inputs,
            "preview_labels": setup.generated_preview.labels}
  arrays.update({f"baseline_{h}": s for h, s in setup.baseline_scores.items()})
  return arrays


def _setup_from(arrays, helpers, config):
  """The stored audit setup, or None when the file is not a whole setup of this configuration
  (a missing baseline, arrays of the wrong lengths: it is then prepared again)."""
  from dpaudit.audits import panoramia as pan
  try:
    num_train = 2 * config.num_classifier_train
    lengths = {"train_inputs": num_train, "train_labels": num_train, "train_member": num_train,
               "audit_inputs": config.num_audit, "audit_labels": config.num_audit,
               "is_member": config.num_audit,
               **{f"baseline_{h}": config.num_audit for h in helpers}}
    for name, length in lengths.items():
      if len(arrays[name]) != length:
        return None
    if not np.all(np.isin(arrays["is_member"], (0, 1))):
      return None
    return pan.AuditSetup(
        pan.Examples(arrays["train_inputs"], arrays["train_labels"]), arrays["train_member"],
        pan.Examples(arrays["audit_inputs"], arrays["audit_labels"]), arrays["is_member"],
        {h: arrays[f"baseline_{h}"] for h in helpers},
        pan.Examples(arrays["preview_inputs"], arrays["preview_labels"]))
  except (KeyError, TypeError):
    return None


MEASUREMENT_FIELDS = ("significance", "correction", "delta", "null_samples")
"""PanoramiaConfig settings that change the bounds, not the audit setup (generator, helpers,
baselines): they key the target cells only."""


def check_cell(cell) -> None:
  """A stored target cell is whole: :meth:`PanoramiaResult.from_dict` accepts it and the
  experiment's own entries are there and valid (ValueError, KeyError or TypeError otherwise:
  the cell store then computes it again)."""
  import math as _math
  from dpaudit.audits import panoramia as pan
  pan.PanoramiaResult.from_dict(cell)
  for name in ("noise_multiplier", "accountant_epsilon", "seconds"):
    value = cell[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or _math.isnan(value) or (
        value < 0):
      raise ValueError(f"{name}={value!r} must be a number >= 0")
  if "one_run_rm_rn" in cell:
    value = cell["one_run_rm_rn"]
    if not isinstance(value, (int, float)) or not 0 <= value < _math.inf:
      raise ValueError(f"one_run_rm_rn={value!r} must be a finite number >= 0")


def run_seed(seed: int, progress):
  """One repetition: the shared setup, then one cell per target, at ``seed``. Returns (config,
  cells, setup, vocab)."""
  import jax
  from dpaudit import results
  from dpaudit.accounting import dpsgd as accounting
  from dpaudit.audits import panoramia as pan
  from dpaudit.audits import panoramia_modalities as mod
  from dpaudit import _validate
  _validate.check_choice("modality", FLAGS.modality, mod.MODALITIES)
  if not FLAGS.target:
    raise ValueError("--target must name at least one target")
  targets = {name: parse_target(name) for name in FLAGS.target}
  config = panoramia_config()
  examples, spec, modality, vocab = load_examples()
  key = common.make_key(seed)
  key_split, key_setup, key_targets = jax.random.split(key, 3)
  limit = (FLAGS.max_examples if FLAGS.max_examples >= 0 else
           DEFAULT_MAX_EXAMPLES[FLAGS.modality])
  if limit:  # a random subset: the text lines are sorted, the tables in file order
    pick = np.asarray(jax.random.permutation(jax.random.fold_in(key, 7), len(examples)))
    examples = examples.take(np.sort(pick[:limit]))
  if not 0 <= FLAGS.num_canaries <= len(examples) - 2:
    raise ValueError(f"num_canaries={FLAGS.num_canaries} must be in [0, {len(examples) - 2}]")
  order = np.asarray(jax.random.permutation(key_split, len(examples)))
  candidates = examples.take(order[:FLAGS.num_canaries])
  included = np.asarray(jax.random.bernoulli(jax.random.fold_in(key_split, 1), 0.5,
                                             (FLAGS.num_canaries,))).astype(np.int32)
  members = examples.take(order[FLAGS.num_canaries:])
  config.split_sizes(len(members))  # a clear error before any work
  training_set = pan.concatenate(members, candidates.take(np.flatnonzero(included)))

  signature = {"modality": FLAGS.modality, "dataset": FLAGS.dataset if FLAGS.modality == "image"
               else {"tabular": "adult", "text": "shakespeare"}[FLAGS.modality],
               "num_examples": len(examples), "max_examples": limit,
               "num_canaries": FLAGS.num_canaries,
               "seed": seed, "generator_epochs": FLAGS.generator_epochs,
               "helper_epochs": FLAGS.helper_epochs, "mst_epsilon": FLAGS.mst_epsilon,
               "mst_iters": FLAGS.mst_iters, "text_max_length": FLAGS.text_max_length,
               "text_hidden_size": FLAGS.text_hidden_size,
               "target_learning_rate": FLAGS.target_learning_rate,
               "target_batch_size": FLAGS.target_batch_size,
               "panoramia": {k: v for k, v in dataclasses.asdict(config).items()
                             if k not in MEASUREMENT_FIELDS}}
  store = results.CellStore(os.path.join(FLAGS.output_dir, "cells"), FLAGS.resume)
  setup_path = store.path(signature, "setup")[:-len(".json")] + ".npz"
  fingerprint = results.config_key(signature)
  stored = results.load_arrays(setup_path, fingerprint) if FLAGS.resume else None
  if stored is not None:
    stored = _setup_from(stored, config.baseline_helpers, config)
  if stored is not None:
    setup = stored
    progress(f"seed {seed}: audit setup: reused")
  else:
    with common.Timer() as timer:
      setup = pan.prepare_audit(key_setup, modality, members, config, progress)
    results.save_arrays(setup_path, fingerprint, _setup_arrays(setup))
    progress(f"seed {seed}: audit setup: {timer.seconds:.0f} s")

  cells = {}
  for index, (name, train) in enumerate(targets.items()):
    cell_config = {**signature, "target": dataclasses.asdict(train),
                   "measurement": {k: getattr(config, k) for k in MEASUREMENT_FIELDS}}

    def compute(name=name, train=train, cell_config=cell_config, index=index):
      with common.Timer() as timer:
        progress(f"{name}: training the target on {len(training_set)} examples")
        key_target = jax.random.fold_in(key_targets, index)
        params, engine = mod.train_model(key_target, spec, training_set, train,
                                         store.scratch_dir(cell_config, name))
        loss = mod.loss_function(spec, params)
        out = pan.measure_target(jax.random.fold_in(key_target, 1), setup, modality, loss,
                                 config, progress).to_dict()
        if FLAGS.num_canaries:
          out["one_run_rm_rn"] = pan.one_run_real(loss, candidates, included, FLAGS.delta,
                                                  FLAGS.significance)
          losses = loss(candidates)
          out["loss_gap_real"] = float(losses[included == 0].mean()
                                       - losses[included == 1].mean())
        out["noise_multiplier"] = engine.noise_multiplier
        out["accountant_epsilon"] = (math.inf if not engine.is_private else float(
            accounting.dpsgd_epsilon(engine.noise_multiplier, engine.sampling_rate,
                                     engine.num_steps, FLAGS.dp_delta)))
      out["seconds"] = timer.seconds
      return out

    cell, reused = store.get_or_compute(cell_config, compute, name, validate=check_cell)
    status = "reused" if reused else f"{cell['seconds']:.0f} s"
    progress(f"seed {seed}: {name}: done [{status}]")
    cells[name] = cell
  run_config = {**signature, "targets": {n: dataclasses.asdict(t) for n, t in targets.items()},
                **{k: getattr(config, k) for k in MEASUREMENT_FIELDS}}
  return run_config, cells, setup, vocab


TARGET_SUMMARY = ("c_lb", "c_plus_eps_lb", "eps_tilde", "eps_tilde_p_value", "mia_auc",
                  "one_run_rm_rn", "one_run_rm_gn")
"""The per-target numbers summarised over repetitions (results.spread)."""


def summarize(repetitions) -> dict:
  """Per target, the spread over repetitions of each number of :data:`TARGET_SUMMARY`, of the
  null's 95th percentile, and how many repetitions measured an eps~ beyond the null; per
  helper, the spread of the baseline's c_lb and how often it was the strongest."""
  from dpaudit import results
  first = repetitions[0]["cells"]
  out = {"targets": {}, "baselines": {}}
  for name in first:
    cells = [r["cells"][name] for r in repetitions]
    summary = {k: results.spread([c[k] for c in cells]) for k in TARGET_SUMMARY
               if all(c.get(k) is not None for c in cells)}
    if all(c["null_eps_tilde"] for c in cells):
      summary["null_eps_tilde_q95"] = results.spread(
          [float(np.quantile(c["null_eps_tilde"]["values"], 0.95)) for c in cells])
      summary["beyond_null"] = int(sum(bool(c["beyond_null"]) for c in cells))
    summary["repetitions"] = len(cells)
    out["targets"][name] = summary
  baselines = [next(iter(r["cells"].values())) for r in repetitions]
  for helper in baselines[0]["baseline_c_lb"]:
    out["baselines"][helper] = {
        "c_lb": results.spread([b["baseline_c_lb"][helper] for b in baselines]),
        "auc": results.spread([b["baseline_auc"][helper] for b in baselines]),
        "strongest": int(sum(b["strongest_baseline"] == helper for b in baselines))}
  return out


def run(progress):
  """Every repetition (:func:`run_seed` at ``--seed + i``). Returns (config, repetitions: a
  list of ``{"seed", "cells"}``, the summary over them, the first repetition's setup and the
  vocabulary)."""
  seeds = common.repetition_seeds(FLAGS.seed, FLAGS.repetitions)
  repetitions, first_setup, vocab, config = [], None, None, None
  for seed in seeds:
    config, cells, setup, vocab = run_seed(seed, progress)
    repetitions.append({"seed": seed, "cells": cells})
    first_setup = first_setup or setup
  config = {**config, "seed": FLAGS.seed, "repetitions": FLAGS.repetitions,
            "seeds": list(seeds)}
  return config, repetitions, summarize(repetitions), first_setup, vocab


def _fmt(value) -> str:
  return "inf" if value == math.inf else f"{value:.3f}"


def tables(repetitions, summary) -> str:
  """Table 3 (baselines by helper) and Table 4/5/7/8 (every target, its null reference and the
  O(1) audits side by side); each number the median [min, max] over the repetitions."""
  from dpaudit import results
  show = lambda s: results.format_spread(s, 3)  # noqa: E731
  n = len(repetitions)
  over = f" over {n} repetitions, median [min, max]" if n > 1 else ""
  lines = [f"Table 3: baselines{over} (c_lb: lower bound on the generator's closeness c; "
           "each baseline at beta/(2B))",
           f"  {'helper':<10} {'c_lb':<24} {'AUC':<24} strongest"]
  for helper, b in summary["baselines"].items():
    lines.append(f"  {helper:<10} {show(b['c_lb']):<24} {show(b['auc']):<24} "
                 f"{b['strongest']}/{n}")
  lines += ["", f"Table 4: targets{over}",
            f"  {'target':<7} {'c_lb':<22} {'{c+eps}_lb':<22} {'eps~':<22} "
            f"{'null eps~ q95':<22} {'p':<22} {'beyond null':<11} {'MIA AUC':<22} "
            f"{'O(1) RM/RN':<22} {'O(1) RM/GN':<22} accountant eps"]
  first = repetitions[0]["cells"]
  for name, t in summary["targets"].items():
    get = lambda k: show(t[k]) if k in t else "-"  # noqa: E731
    beyond = f"{t['beyond_null']}/{n}" if "beyond_null" in t else "-"
    lines.append(f"  {name:<7} {get('c_lb'):<22} {get('c_plus_eps_lb'):<22} "
                 f"{get('eps_tilde'):<22} {get('null_eps_tilde_q95'):<22} "
                 f"{get('eps_tilde_p_value'):<22} {beyond:<11} {get('mia_auc'):<22} "
                 f"{get('one_run_rm_rn'):<22} {get('one_run_rm_gn'):<22} "
                 f"{_fmt(first[name]['accountant_epsilon'])}")
  optimistic = any(c["optimistic"] for r in repetitions for c in r["cells"].values())
  lines += ["",
            "c_lb, {c+eps}_lb: lower bounds holding jointly at 1 - significance"
            + (" (NOT valid: correction=none, the paper's optimistic maximum)" if optimistic
               else "") + "; c_lb is the strongest baseline's.",
            "eps~ = max(0, {c+eps}_lb - c_lb): a measurement, not a lower bound on epsilon; "
            "null eps~ q95: its 95th percentile for a target that leaks nothing (a MIA as "
            "strong as the strongest baseline); p: the share of such null audits at least as "
            "large; beyond null: eps~ > 0 with p <= significance.",
            "O(1) RM/RN: lower bound on epsilon (Steinke et al., real non-members); O(1) RM/GN "
            "uses generated non-members and is not a valid audit (they are not drawn like "
            "the members)."]
  return "\n".join(lines)


def plot_precision_recall(cells, path: str) -> None:
  """Fig. 3: precision (left) and the per-threshold lower bound (right) against recall."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, axes = plt.subplots(1, 2, figsize=(11, 4))
  first = next(iter(cells.values()))
  base = first["baseline_curve"]
  axes[0].plot(base["recall"], base["precision"], "k--", label="baseline b")
  axes[1].plot(base["recall"], base["lower_bound"], "k--", label="baseline: c_lb(t)")
  axes[1].axhline(first["c_lb"], color="k", lw=0.8, ls=":")
  for name, cell in cells.items():
    curve = cell["mia_curve"]
    line, = axes[0].plot(curve["recall"], curve["precision"], label=f"MIA, {name}")
    axes[1].plot(curve["recall"], curve["lower_bound"], color=line.get_color(),
                 label=f"{name}: {{c+eps}}_lb(t)")
    axes[1].axhline(cell["c_plus_eps_lb"], color=line.get_color(), lw=0.8, ls=":")
  axes[0].set(xlabel="recall", ylabel="precision", xscale="log")
  axes[1].set(xlabel="recall", ylabel="lower bound", xscale="log")
  for ax in axes:
    ax.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def write_samples(setup, vocab, output_dir: str) -> str:
  """The generator's samples: a PNG grid (images) or a text file (lines, table rows)."""
  preview = setup.generated_preview
  if FLAGS.modality == "image":
    from dpaudit import plots
    path = os.path.join(output_dir, "samples.png")
    plots.save_image_grid(path, np.asarray(preview.inputs), columns=10)
    return path
  path = os.path.join(output_dir, "samples.txt")
  with open(path, "w", encoding="utf-8") as f:
    for inputs, label in zip(np.asarray(preview.inputs), np.asarray(preview.labels)):
      if vocab is not None:
        f.write(vocab.decode(inputs) + "\n")
      else:
        f.write(",".join(f"{v:g}" for v in inputs) + f",label={label}\n")
  return path


@common.cli
def main(argv):
  del argv
  common.start_float64_experiment()
  check_flags()
  common.claim_output_dir(FLAGS.output_dir)
  progress = lambda line: print(line, file=sys.stderr, flush=True)
  with common.Timer() as timer, common.quiet_accountant():
    config, repetitions, summary, setup, vocab = run(progress)
  cells = repetitions[0]["cells"]
  path = common.write_results(FLAGS.output_dir, "panoramia", config,
                              {"cells": cells, "repetitions": repetitions, "summary": summary},
                              timer.seconds)
  if FLAGS.plot:
    plot_precision_recall(cells, os.path.join(FLAGS.output_dir, "precision_recall.png"))
    write_samples(setup, vocab, FLAGS.output_dir)
  print(tables(repetitions, summary))
  print(f"wrote {path} in {timer.seconds:.0f} s", file=sys.stderr)


if __name__ == "__main__":
  common.run(main)
