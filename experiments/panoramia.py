r"""PANORAMIA (Kazmi et al.) end to end, side by side with the O(1) audit of Steinke et al.

  python -m experiments.panoramia --modality=image --output_dir=out/panoramia_image
  python -m experiments.panoramia --modality=tabular --target=e20,e50,e100
  python -m experiments.panoramia --modality=text --target=dp1,dp4,dp20,dpinf
  python -m experiments.panoramia --modality=image --dataset=cifar10 --target_model=resnet18 \
      --target=dp1,dp10,dpinf    # Tables 5, 7, 8 (launch/sweeps/panoramia_tables578.py)

The real data are split once per repetition (``--seed``): ``--num_canaries`` candidates each
join the target's training set with probability 1/2 (the O(1) audit with real members and real
non-members, RM/RN, and PANORAMIA's RM;RN variant, ``--rm_rn``); every other example is a
member. :func:`dpaudit.audits.panoramia.prepare_audit` runs Alg. 1 up to the MIA once
(generator on D_G, optionally filtered by ``--filter_fraction``, helpers, the baselines of
Table 3); then each ``--target`` is trained and audited (:mod:`dpaudit.audits.panoramia_study`):
c_lb of the strongest baseline (Bonferroni over the baselines), {c+eps}_lb, eps~ with its null
reference (``--null_samples`` audits of a target that leaks nothing), PANORAMIA RM;RN (c_lb =
0), O(1) RM/GN and RM/RN, and for DP targets the accountant's epsilon. ``eN`` trains N epochs
without privacy (Table 4), ``dpX`` ``--dp_epochs`` epochs of DP-SGD at epsilon X (``dpinf``:
no clipping or noise). ``--target_model``/``--helper_model`` choose the image classifiers
(LeNet-5; ResNet-18 or WRN-16-4 as in Tables 5, 7, 8). Tables: gradient-boosted trees
(``--tabular_classifier``) and the paper's MLP. Text: ``--prompt_length``, ``--top_k``,
``--top_p``. ``--num_repeats=N`` repeats the whole audit at seeds ``--seed``, ``--seed + 1``,
...; the tables show the median [min, max].

Writes ``results.json``, ``precision_recall.png`` (Fig. 3), the generator's samples
(``samples.png`` or ``samples.txt``) and prints Tables 3 and 4. Every finished stage is kept
under ``--output_dir``/cells, so an interrupted run resumes where it stopped.
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
flags.DEFINE_integer("classifier_epochs", 30, "Epochs of the baseline and the MIA (networks).")
flags.DEFINE_integer("generator_epochs", 30, "Epochs of the VAE or of the text generator LM.")
flags.DEFINE_integer("helper_epochs", 20, "Epochs of the helper model.")
flags.DEFINE_float("image_logit_scale", 1.0, "Image samples: sigmoid(scale x the VAE decoder's "
                   "logits); 1: its blurred means, 2: sharp strokes (a weaker baseline).")
flags.DEFINE_float("mst_epsilon", 1000.0, "Epsilon of the MST generator (tabular; the paper's "
                   "1000, the authors' code 10000).")
flags.DEFINE_list("tabular_hidden_sizes", ["150", "100", "50", "10"],
                  "Hidden widths of the tabular target and helper (the paper's 150,100,50,10).")
flags.DEFINE_enum("tabular_classifier", "gbt", ["gbt", "mlp"],
                  "Tabular baseline and MIA: gbt (gradient-boosted trees, grid search on a "
                  "validation split; the paper's) or mlp (the network of the other modalities).")
flags.DEFINE_integer("mst_iters", 1000, "Mirror-descent iterations of MST.")
flags.DEFINE_float("dp_epochs", 20.0, "Epochs of the dpX targets.")
flags.DEFINE_float("dp_delta", 1e-5, "delta of the DP targets' accountant.")
flags.DEFINE_float("target_learning_rate", 1e-3, "Adam step size of targets and helpers.")
flags.DEFINE_integer("target_batch_size", 64, "Expected batch size of targets and helpers.")
flags.DEFINE_integer("text_max_length", 64, "Text: lines of at most this many characters - 1.")
flags.DEFINE_integer("text_hidden_size", 256, "Text: hidden width of the character LMs.")
flags.DEFINE_integer("prompt_length", 8, "Text: prompt characters (capped at a line's length - "
                     "1); the paper prompts GPT-2 with 64 tokens.")
flags.DEFINE_integer("top_k", 0, "Text: sample among the k likeliest characters (0: all; the "
                     "paper's top-k is 200).")
flags.DEFINE_float("top_p", 0.9, "Text: nucleus mass of the sampler (the paper's is 1).")
flags.DEFINE_bool("rm_rn", True, "Also run PANORAMIA's RM;RN variant (Table 4): the MIA on real "
                  "members vs real non-members (the O(1) candidates, half to train it), no "
                  "baseline, c_lb = 0; needs --num_canaries >= 8.")
flags.DEFINE_float("filter_fraction", 0.0, "Share of generated samples dropped by a filter "
                   "(a real-vs-generated classifier trained on D_G and fresh samples) before "
                   "the audit; 0: no filter.")
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
  from dpaudit.audits import panoramia as pan
  from dpaudit.audits import panoramia_study as study
  return study.StudyConfig(
      modality=FLAGS.modality, targets=tuple(FLAGS.target), dataset=FLAGS.dataset,
      data_dir=FLAGS.data_dir, max_examples=FLAGS.max_examples,
      num_canaries=FLAGS.num_canaries, generator_epochs=FLAGS.generator_epochs,
      helper_epochs=FLAGS.helper_epochs, mst_epsilon=FLAGS.mst_epsilon,
      image_logit_scale=FLAGS.image_logit_scale, mst_iters=FLAGS.mst_iters,
      dp_epochs=FLAGS.dp_epochs, dp_delta=FLAGS.dp_delta,
      target_learning_rate=FLAGS.target_learning_rate,
      target_batch_size=FLAGS.target_batch_size, text_max_length=FLAGS.text_max_length,
      text_hidden_size=FLAGS.text_hidden_size, target_model=FLAGS.target_model,
      tabular_hidden_sizes=common.parse_ints("tabular_hidden_sizes", FLAGS.tabular_hidden_sizes),
      prompt_length=FLAGS.prompt_length,
      top_k=FLAGS.top_k, top_p=FLAGS.top_p, rm_rn=FLAGS.rm_rn,
      helper_model=FLAGS.helper_model, seed=FLAGS.seed, repetitions=FLAGS.num_repeats,
      panoramia=pan.PanoramiaConfig(
          num_audit=FLAGS.num_audit, num_classifier_train=FLAGS.num_classifier_train,
          num_generator_train=FLAGS.num_generator_train or None,
          num_helper_train=FLAGS.num_helper_train, baseline_helpers=tuple(FLAGS.helpers),
          classifier=study.classifier_config(FLAGS.modality, FLAGS.tabular_classifier,
                                             FLAGS.classifier_epochs),
          significance=FLAGS.significance, correction=FLAGS.correction, delta=FLAGS.delta,
          null_samples=FLAGS.null_samples, filter_fraction=FLAGS.filter_fraction))


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
                    ("max_examples", -1), ("top_k", 0)):
    common.check_count(name, FLAGS[name].value, low)
  common.check_count("prompt_length", FLAGS.prompt_length, 0, FLAGS.text_max_length)
  common.check_widths("tabular_hidden_sizes", common.check_counts("tabular_hidden_sizes", (
      common.parse_ints("tabular_hidden_sizes", FLAGS.tabular_hidden_sizes))),
      FLAGS.target_batch_size, 100)
  common.check_float("top_p", FLAGS.top_p, 0.0, 1.0, low_open=True)
  common.check_float("filter_fraction", FLAGS.filter_fraction, 0.0, 0.95)
  # A character LM of this width: its weights, gradient and Adam's moments (float32).
  common.check_memory("text_hidden_size", FLAGS.text_hidden_size, 16.0 * 4 * 100,
                      what="the text models")
  common.check_float("mst_epsilon", FLAGS.mst_epsilon, 0.0, low_open=True, allow_inf=True)
  common.check_float("image_logit_scale", FLAGS.image_logit_scale, 0.0, low_open=True)
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
