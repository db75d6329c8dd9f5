"""The ``>>>`` examples in dpaudit's docstrings run as written (every module that has one)."""

import doctest
import importlib
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def modules_with_examples() -> list[str]:
  """Dotted names of the modules under dpaudit/ whose source contains a ``>>>`` example."""
  out = []
  for directory, _, files in os.walk(os.path.join(ROOT, "dpaudit")):
    for name in sorted(files):
      path = os.path.join(directory, name)
      if name.endswith(".py") and ">>>" in open(path, encoding="utf-8").read():
        relative = os.path.relpath(path, ROOT)[:-len(".py")]
        out.append(relative.replace(os.sep, ".").removesuffix(".__init__"))
  return sorted(out)


def test_some_modules_have_examples():
  assert {"dpaudit.results", "dpaudit.estimators.panoramia"} <= set(modules_with_examples())


@pytest.mark.parametrize("name", modules_with_examples())
def test_examples_run(name):
  module = importlib.import_module(name)
  failed, attempted = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
  assert attempted > 0 and failed == 0
