"""Keeps the README and docs/ honest: short README, no run history, every module they name
exists, and the README's Python snippets run as written."""

import glob
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
DOCS = sorted([README] + glob.glob(os.path.join(ROOT, "docs", "*.md")))
MAX_README_LINES = 260

# Run-by-run history belongs in commit messages, not in the docs.
HISTORY = [
    (re.compile(r"`(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}`"),
     "commit hash in backticks"),
    (re.compile(r"\bcommits?\s+`?[0-9a-f]{7,40}\b", re.I), "commit hash"),
    (re.compile(r"\bruns?\s+[A-Z][0-9]\b"), "run label"),
    (re.compile(r"\b[A-Z][0-9]\s*(?:-|/|and)\s*[A-Z][0-9]\b"), "run labels"),
    (re.compile(r"\bthis session\b|\bsession's\b", re.I), "session reference"),
    (re.compile(r"\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b"), "dated entry"),
]
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
NAME = re.compile(r"\b(?:dpaudit|experiments)(?:\.[A-Za-z_]\w*)+")
# Short names in the docs' tables (`estimators.clopper_pearson`) are dpaudit's subpackages.
SHORT = re.compile(r"(?<![\w./-])(?:estimators|accounting|mechanisms|models|dpsgd|data|attacks|"
                   r"audits|montecarlo|results|teachers|prng|tightness)(?:\.[A-Za-z_]\w*)+")
FILE_SUFFIXES = ("png", "md", "json", "py", "csv", "txt", "npz", "gz", "log")


def _read(path):
  with open(path, encoding="utf-8") as f:
    return f.read()


def _rel(path):
  return os.path.relpath(path, ROOT)


def test_readme_is_one_screenful_per_question():
  lines = _read(README).count("\n")
  assert lines <= MAX_README_LINES, f"README.md has {lines} lines (at most {MAX_README_LINES})"


def test_docs_pages_exist():
  for page in ("noisy_argmax", "private_prediction", "dpsgd", "panoramia", "domias",
               "reconstruction", "validity", "design", "reproducing", "performance"):
    assert os.path.exists(os.path.join(ROOT, "docs", page + ".md")), page


@pytest.mark.parametrize("path", DOCS, ids=_rel)
def test_no_run_labels_or_commit_hashes(path):
  found = [f"{_rel(path)}:{text.count(chr(10), 0, m.start()) + 1}: {what}: {m.group(0)!r}"
           for text in [_read(path)] for pattern, what in HISTORY
           for m in pattern.finditer(text)]
  assert not found, "run history in the docs:\n" + "\n".join(found)


def test_history_patterns_catch_what_they_should():
  flagged = ["at `9d1432b`", "runs L1 and L2", "run J1", "J1-J2", "this session",
             "(2026-11-25)", "commit 780d303"]
  clean = ["`1000000`", "`--num_rounds=7`", "App. E.2-E.3", "Q4_1 GGUF", "[A] Eq. (1)",
           "Props. 1-2", "L2(b) in bits", "WRN-16-4", "0.0502", "run 1 / run 2"]
  hits = lambda text: [p.pattern for p, _ in HISTORY if p.search(text)]
  assert all(hits(text) for text in flagged), [t for t in flagged if not hits(t)]
  assert not any(hits(text) for text in clean), [(t, hits(t)) for t in clean if hits(t)]


def _named(text):
  """dpaudit.* and experiments.* names in inline code spans and `python -m` commands."""
  names = set()
  prose = FENCE.sub("", text)
  for span in re.findall(r"`([^`\n]+)`", prose):
    names.update(NAME.findall(span))
    if not span.startswith(("python ", "-")):
      names.update("dpaudit." + name for name in SHORT.findall(span)
                   if name.rsplit(".", 1)[-1] not in FILE_SUFFIXES)
  for module in re.findall(r"python -m ((?:experiments|launch)(?:\.\w+)+)", text):
    names.add(module)
  placeholder = lambda name: any(part.isupper() for part in name.split("."))  # NAME, SWEEP
  return {name for name in names if not placeholder(name)}


def _resolves(name):
  if name.startswith(("experiments.", "launch.")):  # CLIs define absl flags on import
    return importlib.util.find_spec(name) is not None
  parts = name.split(".")
  for i in range(len(parts), 0, -1):
    module_name = ".".join(parts[:i])
    try:
      obj = importlib.import_module(module_name)
    except ImportError:
      continue
    for attribute in parts[i:]:
      if not hasattr(obj, attribute):
        return False
      obj = getattr(obj, attribute)
    return True
  return False


def test_every_named_module_and_attribute_exists():
  named = {name for path in DOCS for name in _named(_read(path))}
  assert len(named) >= 100 and "dpaudit.audit.dpsgd" in named, sorted(named)
  missing = sorted(f"{_rel(path)}: {name}" for path in DOCS for name in _named(_read(path))
                   if not _resolves(name))
  assert not missing, "named in the docs but not in the code:\n" + "\n".join(missing)


def _snippets():
  return re.findall(r"^```python\n(.*?)^```", _read(README), re.S | re.M)


RUNNER = r"""
import sys, traceback
snippets = eval(sys.stdin.read())
failed = []
for i, code in enumerate(snippets, 1):
  try:
    exec(compile(code, f"README snippet {i}", "exec"), {"__name__": "__main__"})
  except BaseException:
    failed.append(i)
    traceback.print_exc()
sys.exit(f"README snippets that failed: {failed}" if failed else 0)
"""


def test_readme_python_snippets_run():
  snippets = _snippets()
  assert 3 <= len(snippets) <= 4, f"the quickstart has {len(snippets)} Python snippets"
  env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
  run = subprocess.run([sys.executable, "-c", RUNNER], input=repr(snippets), text=True,
                       capture_output=True, cwd=ROOT, env=env, timeout=240, check=False)
  assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
  assert run.stdout.count("lower bound") >= len(snippets), run.stdout


def test_relative_links_point_at_files_that_exist():
  broken = []
  for path in DOCS:
    for link in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", _read(path)):
      target = os.path.normpath(os.path.join(os.path.dirname(path), link))
      if "://" not in link and not os.path.exists(target):
        broken.append(f"{_rel(path)}: {link}")
  assert not broken, "broken links:\n" + "\n".join(broken)


# A command the docs show: `python -m experiments.NAME --flag=value ...` (in a fenced block or
# an inline code span), up to the end of the line or span, a `&&`, a `|` or a comment.
COMMAND = re.compile(r"python -m ((?:experiments|launch)(?:\.\w+)+)([^`\n&|#]*)")
FLAG = re.compile(r"(?<![\w-])--(\w+)")
PIP_FILE = re.compile(r"pip install [^`\n&]*?-r ([\w.-]+\.txt)")

# Imports each module in turn and prints the absl flags it accepts; the flags a module defined
# are deleted (and its modules forgotten) before the next, so each import defines its own.
FLAG_PROBE = r"""
import importlib, json, sys
from absl import flags
accepted = {}
for name in json.loads(sys.stdin.read()):
  before, modules = set(flags.FLAGS), set(sys.modules)
  try:
    importlib.import_module(name)
  except Exception as e:
    accepted[name] = f"{type(e).__name__}: {e}"
    continue
  accepted[name] = sorted(flags.FLAGS)
  for flag in set(flags.FLAGS) - before:
    delattr(flags.FLAGS, flag)
  for module in set(sys.modules) - modules:
    if module.startswith(("experiments.", "launch.")) and module != "experiments.common":
      del sys.modules[module]
print(json.dumps(accepted))
"""


def _commands():
  """(page, module, flags) for every ``python -m`` command of an experiment the docs show."""
  out = []
  for path in DOCS:
    for module, args in COMMAND.findall(_read(path)):
      if module.split(".")[-1].isupper():  # a placeholder: python -m experiments.NAME
        continue
      args, _, inner = args.partition(" -- ")  # launch.multihost -- MODULE --its_flags
      out.append((_rel(path), module.rstrip("."), FLAG.findall(args)))
      if inner.split():
        out.append((_rel(path), inner.split()[0], FLAG.findall(inner)))
  return out


def test_command_blocks_name_modules_and_flags_that_exist():
  commands = _commands()
  assert len(commands) >= 30 and any(m == "experiments.tightness" for _, m, _ in commands)
  modules = sorted({m for _, m, _ in commands})
  run = subprocess.run([sys.executable, "-c", FLAG_PROBE], input=json.dumps(modules), text=True,
                       capture_output=True, cwd=ROOT, timeout=240, check=False)
  assert run.returncode == 0, run.stderr[-4000:]
  accepted = json.loads(run.stdout.splitlines()[-1])
  bad = []
  for page, module, names in commands:
    if isinstance(accepted[module], str):
      bad.append(f"{page}: python -m {module} does not import ({accepted[module]})")
      continue
    valid = set(accepted[module])
    bad += [f"{page}: python -m {module} has no flag --{n}" for n in names
            if n not in valid and not (n.startswith("no") and n[2:] in valid)]
  assert not bad, "\n".join(bad)


def test_pip_requirement_files_exist():
  named = {f for path in DOCS for f in PIP_FILE.findall(_read(path))}
  assert "requirements-dev.txt" in named
  assert all(os.path.exists(os.path.join(ROOT, f)) for f in named), named
