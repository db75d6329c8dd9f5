"""Writes ``docs/performance.md`` from the benchmarks' kept JSON in ``docs/benchmarks/``.

  python -m experiments.benchmarks.performance_docs
  python -m experiments.benchmarks.performance_docs --output=/tmp/performance.md

The page (:func:`experiments.benchmarks.performance_page.page`, which says what it holds) is a
function of the JSON: ``tests/experiments/test_performance_docs.py`` checks that the committed
page is what this writes. A file that is not valid JSON, or a table that is malformed, is a
one-line error naming the file.
"""

from __future__ import annotations

import os

from absl import flags

from experiments import common
from experiments.benchmarks import performance_page

FLAGS = flags.FLAGS
flags.DEFINE_string("benchmarks_dir", os.path.join(performance_page.ROOT, "docs", "benchmarks"),
                    "Where the kept JSON is: one <benchmark>.json per benchmark.")
flags.DEFINE_string("output", os.path.join(performance_page.ROOT, "docs", "performance.md"),
                    "The page to write.")


@common.cli
def main(argv):
  del argv
  text = performance_page.page(FLAGS.benchmarks_dir)
  tmp = f"{FLAGS.output}.tmp.{os.getpid()}"
  try:
    with open(tmp, "w", encoding="utf-8") as f:
      f.write(text)
    os.replace(tmp, FLAGS.output)
  finally:
    if os.path.exists(tmp):
      os.remove(tmp)
  print(FLAGS.output)


if __name__ == "__main__":
  common.run(main)
