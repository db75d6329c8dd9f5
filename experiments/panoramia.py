r"""PANORAMIA (Kazmi et al.) end to end, side by side with the O(1) audit of Steinke et al.

  python -m experiments.panoramia --modality=image --output_dir=out/panoramia_image
  python -m experiments.panoramia --modality=tabular --target=e20,e50,e100
  python -m experiments.panoramia --modality=text --target=dp1,dp4,dp20,dpinf
  python -m experiments.panoramia --modality=text --target=e5,e30 --num_repeats=3

The real data are split once (``--seed``): ``--num_canaries`` candidates each join the target's
training set with probability 1/2 (the O(1) audit with real members and real non-members,
RM/RN); every other example is a member. :func:`dpaudit.audits.panoramia.prepare_audit` runs
Alg. 1 up to the MIA once (generator on D_G, helpers, the baselines of Table 3: helper trained
on generated data, on real data, none); then each target of ``--target`` is trained and
audited (:mod:`dpaudit.audits.panoramia_study`, which runs the study): c_lb of the strongest
baseline (Bonferroni over the baselines), {c+eps}_lb, eps~ with its null reference (the eps~ of
``--null_samples`` audits of a target that leaks nothing, and the p-value of the measured one), O(1)
RM/GN and RM/RN, and for DP targets the accountant's epsilon. Targets: ``eN`` trains N epochs
without privacy (Table 4's E20/E50/E100), ``dpX`` trains ``--dp_epochs`` epochs with DP-SGD at
epsilon X (``dpinf``: the same schedule without clipping or noise; Tables 5, 7, 8).
``--target_model`` and ``--helper_model`` choose the image classifiers (LeNet-5 by default;
ResNet-18 or WRN-16-4 for Tables 5, 7 and 8). ``--num_repeats=N`` repeats the whole audit at seeds
``--seed``, ``--seed + 1``, ...; the tables show the median [min, max] over them and how many
repetitions measured an eps~ beyond the null.

Writes ``results.json``, ``precision_recall.png`` (Fig. 3: precision and the per-threshold
bound against recall, MIA of each target and the baseline), the generator's samples
(``samples.png`` for images, ``samples.txt`` for text and tables) and prints Tables 3 and 4.
Every finished stage is kept under ``--output_dir``/cells (the audit setup as an ``.npz``,
each target as a cell; a target's training checkpoints in its ``.partial`` directory), so an
interrupted run resumes where it stopped.
"""

from __future__ import annotations

import os
import sys

from absl import flags

from experiments import common

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
common.define_num_repeats_flag("the whole audit (split, generator, baselines, targets); "
                               "repetition i is the run at --seed=SEED+i")
flags.DEFINE_string("output_dir", "out/panoramia", "Where results and figures go.")
flags.DEFINE_bool("resume", True, "Reuse finished stages under output_dir/cells.")
flags.DEFINE_bool("plot", True, "Write the figures.")
flags.DEFINE_string("target_model", "lenet5",
                    "Image targets' classifier: lenet5, resnet18, wrn16_4, mlp or logistic "
                    "(dpaudit.models.make_model; Tables 5, 7, 8 use resnet18 and wrn16_4).")
flags.DEFINE_string("helper_model", "lenet5", "Image helpers' classifier (as --target_model).")


def study_config():
  """The :class:`~dpaudit.audits.panoramia_study.StudyConfig` of the flags."""
  from dpaudit.attacks import panoramia as attacks
  from dpaudit.audits import panoramia as pan
  from dpaudit.audits import panoramia_study as study
  return study.StudyConfig(
      modality=FLAGS.modality, targets=tuple(FLAGS.target), dataset=FLAGS.dataset,
      data_dir=FLAGS.data_dir, max_examples=FLAGS.max_examples,
      num_canaries=FLAGS.num_canaries, generator_epochs=FLAGS.generator_epochs,
      helper_epochs=FLAGS.helper_epochs, mst_epsilon=FLAGS.mst_epsilon,
      mst_iters=FLAGS.mst_iters, dp_epochs=FLAGS.dp_epochs, dp_delta=FLAGS.dp_delta,
      target_learning_rate=FLAGS.target_learning_rate,
      target_batch_size=FLAGS.target_batch_size, text_max_length=FLAGS.text_max_length,
      text_hidden_size=FLAGS.text_hidden_size, target_model=FLAGS.target_model,
      helper_model=FLAGS.helper_model, seed=FLAGS.seed, repetitions=FLAGS.num_repeats,
      panoramia=pan.PanoramiaConfig(
          num_audit=FLAGS.num_audit, num_classifier_train=FLAGS.num_classifier_train,
          num_generator_train=FLAGS.num_generator_train or None,
          num_helper_train=FLAGS.num_helper_train, baseline_helpers=tuple(FLAGS.helpers),
          classifier=attacks.ClassifierConfig(epochs=FLAGS.classifier_epochs),
          significance=FLAGS.significance, correction=FLAGS.correction, delta=FLAGS.delta,
          null_samples=FLAGS.null_samples))


def check_flags():
  """Every flag that can be checked without the data, before anything is written; returns
  the study's config. The data-dependent checks (enough examples for the canaries and the
  splits) follow in :func:`dpaudit.audits.panoramia_study.load`, also before any write."""
  from dpaudit import _validate
  from dpaudit.audits import panoramia_modalities as mod
  _validate.check_choice("--modality", FLAGS.modality, mod.MODALITIES)
  if not FLAGS.target:
    raise ValueError("--target must name at least one target")
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
  common.repetition_seeds(FLAGS.seed, FLAGS.num_repeats, flag="num_repeats")
  return study_config()


@common.cli
def main(argv):
  del argv
  from dpaudit import plots, results
  from dpaudit.audits import panoramia_study as study
  common.start_float64_experiment()
  config = check_flags()
  common.claim_output_dir(FLAGS.output_dir)
  with common.Timer() as timer, common.quiet_accountant():
    data = study.load(config)  # the data-dependent checks, before the first write
    store = results.CellStore(os.path.join(FLAGS.output_dir, "cells"), FLAGS.resume)
    # The key of --seed: the stored setups and cells are named by the seed (resume).
    result = study.run(common.make_key(FLAGS.seed), config, progress=results.print_progress,
                       store=store, data=data)
  path = common.write_results(FLAGS.output_dir, "panoramia", result.config, result.to_dict(),
                              timer.seconds)
  if FLAGS.plot:
    plots.panoramia_precision_recall(result.cells,
                                     os.path.join(FLAGS.output_dir, "precision_recall.png"))
    plots.panoramia_samples(result.preview, result.vocab, FLAGS.output_dir,
                            images=FLAGS.modality == "image")
  print(result.tables())
  print(f"wrote {path} in {timer.seconds:.0f} s", file=sys.stderr)


if __name__ == "__main__":
  common.run(main)
