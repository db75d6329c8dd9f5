"""The ``>>>`` examples in dpaudit's docstrings run as written (every module that has one),
and every public estimator and front-door function has one."""

import doctest
import importlib
import inspect
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


def public_api() -> dict[str, object]:
  """The callables a user is pointed to: everything ``dpaudit.estimators`` exports (its
  ``__all__``) and the public functions defined in ``dpaudit.audit``, by dotted name."""
  from dpaudit import audit, estimators
  api = {f"dpaudit.estimators.{name}": getattr(estimators, name) for name in estimators.__all__
         if callable(getattr(estimators, name))}
  api.update({f"dpaudit.audit.{name}": obj for name, obj in vars(audit).items()
              if inspect.isfunction(obj) and obj.__module__ == audit.__name__
              and not name.startswith("_")})
  return api


def test_public_api_has_examples():
  """Every estimator and front-door function shows its typical call as a ``>>>`` example (run
  by :func:`test_examples_run`)."""
  api = public_api()
  assert len(api) >= 40  # the lists were found
  missing = sorted(name for name, obj in api.items() if ">>>" not in (inspect.getdoc(obj) or ""))
  assert not missing, f"docstrings without a >>> example: {', '.join(missing)}"


@pytest.mark.parametrize("name", modules_with_examples())
def test_examples_run(name):
  module = importlib.import_module(name)
  failed, attempted = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
  assert attempted > 0 and failed == 0
