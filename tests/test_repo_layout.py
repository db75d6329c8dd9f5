"""Keeps the project's promises to a fresh machine: README command == CI, BUILD covers all."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _read(path):
  with open(os.path.join(ROOT, path)) as f:
    return f.read()


def _python_files(top):
  for base, _, files in os.walk(os.path.join(ROOT, top)):
    for name in files:
      if name.endswith(".py"):
        yield os.path.relpath(os.path.join(base, name), ROOT)


def test_ci_runs_the_readme_test_command():
  readme_commands = re.findall(r"```bash\n(.*?)\n```", _read("README.md"), re.S)
  ci_lines = [line for line in _read(".ci/run").splitlines()
              if line.strip() and not line.startswith(("#", "set ", "cd "))]
  assert len(ci_lines) == 1
  assert ci_lines[0] in readme_commands[:2], "the README's test command and .ci/run differ"


def test_readme_first_screen_has_exactly_two_setup_commands():
  readme = _read("README.md")
  first_screen = readme[:readme.index("\n## ", readme.index("\n## ") + 1)]
  assert len(re.findall(r"```bash\n", first_screen)) == 2


def test_build_lists_every_module_test_and_experiment():
  build = _read("BUILD")
  sources = set(re.findall(r'"((?:dpaudit|experiments|launch|tests)/[\w/]+\.py)"', build))
  wanted = {f for top in ("dpaudit", "experiments") for f in _python_files(top)}
  wanted |= {f for f in _python_files("launch") if "/sweeps/" not in f}
  wanted |= {f for f in _python_files("tests") if os.path.basename(f).startswith("test_")}
  missing = sorted(wanted - sources - {"tests/conftest.py"})
  assert not missing, f"BUILD lacks targets for {missing}"
  stale = sorted(f for f in sources if not os.path.exists(os.path.join(ROOT, f)))
  assert not stale, f"BUILD names files that do not exist: {stale}"
