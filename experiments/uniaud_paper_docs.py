"""Keeps UniAud's Table IV at the paper's canary shape: docs/results/uniaud_paper.json and its
tables in README.md and docs/dpsgd.md.

  python -m experiments.uniaud_paper_docs --results=out/a/results.json,out/b/results.json
  python -m experiments.uniaud_paper_docs

With ``--results`` (the ``results.json`` of ``python -m experiments.dpsgd_audit`` runs of the
sweep ``launch/sweeps/uniaud_paper.py`` or a part of it) the kept JSON is rewritten from them
(:func:`experiments.uniaud_paper_page.collect`); then both tables are rendered from the kept
JSON into their marked blocks (:mod:`experiments.uniaud_paper_page`).
"""

from __future__ import annotations

import os

from absl import flags

from dpaudit import results
from experiments import common
from experiments import uniaud_paper_page as page

FLAGS = flags.FLAGS
flags.DEFINE_list("results", [], "results.json files of dpsgd_audit runs to keep (empty: "
                  "render the kept JSON only).")
flags.DEFINE_string("json", page.JSON_PATH, "The kept JSON.")
flags.DEFINE_string("readme", os.path.join(page.ROOT, "README.md"), "The README to update.")
flags.DEFINE_string("docs", os.path.join(page.ROOT, "docs", "dpsgd.md"), "The docs page to "
                    "update.")


def _write(path: str, text: str) -> None:
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)


@common.cli
def main(argv):
  del argv
  for path in FLAGS.results:
    if not os.path.isfile(path):
      raise ValueError(f"--results names {path!r}, which is not a file")
  if FLAGS.results:
    results.write_json(FLAGS.json, page.collect([results.read_json(p) for p in FLAGS.results]))
  record = results.read_json(FLAGS.json)
  for path, name, render in ((FLAGS.readme, "uniaud_paper_readme", page.readme_table),
                             (FLAGS.docs, "uniaud_paper_docs", page.docs_table)):
    with open(path, encoding="utf-8") as f:
      text = f.read()
    _write(path, page.replace_block(text, name, render(record)))
    print(path)


if __name__ == "__main__":
  common.run(main)
