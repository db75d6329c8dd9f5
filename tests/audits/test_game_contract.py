"""One contract for every game under dpaudit/audits/ (issue 40): a frozen, validated ``Config``,
a frozen ``Result`` with ``to_dict()`` and ``from_dict()``, and ``run(key, config, *,
progress=None, store=None)`` (further inputs keyword-only or with defaults). The modules that
are parts of games rather than games are listed with the game they serve."""

import dataclasses
import importlib
import inspect
import pkgutil

import pytest

from dpaudit import audits

# Modules of dpaudit/audits that are parts of a game, not games: what each serves.
GAME_PARTS = {
    "language_model": "lm_reconstruction (training and scoring of the character LM)",
    "panoramia_modalities": "panoramia and panoramia_study (models and generators per modality)",
}
GAMES = sorted(info.name for info in pkgutil.iter_modules(audits.__path__)
               if not info.name.startswith("_") and info.name not in GAME_PARTS)


def _module(name):
  return importlib.import_module(f"dpaudit.audits.{name}")


def test_every_module_is_a_game_or_a_listed_part():
  assert GAMES, "no games found"
  for name in GAME_PARTS:
    _module(name)  # the listed parts exist


@pytest.mark.parametrize("name", GAMES)
def test_config_and_result_are_frozen_dataclasses(name):
  module = _module(name)
  for attribute in ("Config", "Result"):
    kind = getattr(module, attribute, None)
    assert kind is not None, f"dpaudit.audits.{name} has no {attribute}"
    assert dataclasses.is_dataclass(kind), f"{name}.{attribute} is not a dataclass"
    assert kind.__dataclass_params__.frozen, f"{name}.{attribute} is not frozen"
  assert callable(getattr(module.Result, "to_dict", None)), f"{name}.Result has no to_dict"
  from_dict = inspect.getattr_static(module.Result, "from_dict", None)
  assert isinstance(from_dict, (classmethod, staticmethod)), (
      f"{name}.Result.from_dict is not a classmethod")


@pytest.mark.parametrize("name", GAMES)
def test_run_takes_key_config_progress_and_store(name):
  run = getattr(_module(name), "run", None)
  assert callable(run), f"dpaudit.audits.{name} has no run"
  params = list(inspect.signature(run).parameters.values())
  assert [p.name for p in params[:2]] == ["key", "config"], (name, params[:2])
  by_name = {p.name: p for p in params}
  for option in ("progress", "store"):
    assert option in by_name, f"{name}.run has no {option}="
    assert by_name[option].kind is inspect.Parameter.KEYWORD_ONLY, (name, option)
    assert by_name[option].default is None, (name, option)
  for p in params[2:]:
    assert p.kind is inspect.Parameter.KEYWORD_ONLY or p.default is not inspect.Parameter.empty, (
        f"{name}.run's {p.name} must be keyword-only or have a default")
