"""Audit DP-SGD training of your own flax model, end to end.

Trains a small convolutional network with DP-SGD on scikit-learn's handwritten digits (8x8
images, 10 classes; a stand-in for your data: any arrays of examples and integer labels) at a
target epsilon, and audits the training run with two one-run games:

* ``one_run`` (Steinke, Nasr & Jagielski 2023): m canaries, each inserted with probability 1/2;
  the auditor guesses which were in from the trained model's losses. The bound holds for any
  (epsilon, delta)-DP training algorithm.
* ``uniaud`` (UniAud, Alg. 2): data-independent Gaussian canaries, trained on alone.

Each audit prints one line (the lower bound at 95% confidence, the ceiling its m canaries allow
and the accountant's epsilon it is held against) and the results go to ``--output`` as JSON.
Real audits use thousands of canaries (``--num_canaries=1000``, the default, takes several
minutes on a laptop CPU); the tests run it with ``--num_canaries=16 --epochs=1``.

  python examples/audit_my_dpsgd_model.py --epsilon=8 --output=audit.json
"""

import argparse
import json
import sys

import flax.linen as nn
import jax
import numpy as np
from sklearn.datasets import load_digits

from dpaudit import audit
from dpaudit.audits.dpsgd import AuditData, DPSGDAuditConfig


class SmallCNN(nn.Module):
  """Your model: any flax module mapping a batch of examples to logits."""

  num_classes: int = 10

  @nn.compact
  def __call__(self, x):
    x = nn.relu(nn.Conv(8, (3, 3))(x))
    x = nn.avg_pool(x, (2, 2), strides=(2, 2))
    return nn.Dense(self.num_classes)(x.reshape((x.shape[0], -1)))


def load_data(seed: int) -> AuditData:
  """Training, test and canary-pool examples: images in [0, 1], shape (8, 8, 1)."""
  digits = load_digits()
  x = (digits.images / 16.0).astype(np.float32)[..., None]
  y = digits.target.astype(np.int32)
  order = np.random.default_rng(seed).permutation(len(y))
  train, test, pool = np.split(order, [1000, 1300])  # 1000 / 300 / 497 examples
  return AuditData(x[train], y[train], x[test], y[test], x[pool], y[pool], num_classes=10)


def main(argv=None) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--epsilon", type=float, default=8.0, help="target epsilon of DP-SGD")
  parser.add_argument("--num_canaries", type=int, default=1000, help="m canaries per audit")
  parser.add_argument("--epochs", type=float, default=10.0, help="passes over the data")
  parser.add_argument("--games", default="one_run,uniaud", help="comma-separated games")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--output", default="", help="write the results here as JSON")
  args = parser.parse_args(argv)
  try:
    data = load_data(args.seed)
    results = {}
    for game in args.games.split(","):
      # UniAud trains on its m canaries alone: the expected batch is at most a quarter of them.
      batch_size = 64 if game == "one_run" else max(1, min(64, args.num_canaries // 4))
      config = DPSGDAuditConfig(game=game, canary="gaussian", num_canaries=args.num_canaries,
                                epochs=args.epochs, batch_size=batch_size, learning_rate=0.5,
                                epsilon=args.epsilon)
      key = jax.random.fold_in(jax.random.key(args.seed), len(results))
      result = audit.dpsgd(key, data, config, model=SmallCNN())
      print(f"{game}: {result.summary()}")
      results[game] = result.to_dict()
    if args.output:
      with open(args.output, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
  except (ValueError, OSError) as e:
    sys.exit(f"error: {e}")


if __name__ == "__main__":
  main()
