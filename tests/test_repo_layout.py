"""Keeps the project's promises to a fresh machine: README command == CI, BUILD covers all;
and its layers: no circle of imports between dpaudit's subpackages, only dpaudit/plots.py draws,
experiments stay thin."""

import ast
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
  sources = set(re.findall(r'"((?:dpaudit|examples|experiments|launch|tests)/[\w/]+\.py)"',
                          build))
  wanted = {f for top in ("dpaudit", "examples", "experiments") for f in _python_files(top)}
  wanted |= {f for f in _python_files("launch") if "/sweeps/" not in f}
  wanted |= {f for f in _python_files("tests") if os.path.basename(f).startswith("test_")}
  missing = sorted(wanted - sources - {"tests/conftest.py"})
  assert not missing, f"BUILD lacks targets for {missing}"
  stale = sorted(f for f in sources if not os.path.exists(os.path.join(ROOT, f)))
  assert not stale, f"BUILD names files that do not exist: {stale}"


def _unit(module):
  """``dpaudit.X`` for a module of dpaudit (X a subpackage or a top-level module), else None."""
  parts = module.split(".")
  return ".".join(parts[:2]) if parts[0] == "dpaudit" and len(parts) > 1 else None


def _imported_modules(tree):
  """Every absolute module name an ``import`` (at any depth, lazy ones too) of ``tree`` names;
  ``from dpaudit import X`` names ``dpaudit.X``."""
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      yield node.module
      if node.module == "dpaudit":
        yield from (f"dpaudit.{alias.name}" for alias in node.names)


def dpaudit_import_graph():
  """``{dpaudit.X: {dpaudit.Y: [files of X importing Y]}}`` between dpaudit's subpackages and
  top-level modules, from the source with :mod:`ast` (nothing is imported)."""
  graph = {}
  for path in _python_files("dpaudit"):
    module = path[:-len(".py")].replace(os.sep, ".").removesuffix(".__init__")
    source = _unit(module)
    if source is None:  # dpaudit/__init__.py
      continue
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
      tree = ast.parse(f.read(), path)
    for target in map(_unit, _imported_modules(tree)):
      if target and target != source:
        graph.setdefault(source, {}).setdefault(target, set()).add(path)
  return graph


def import_cycles(graph):
  """The strongly connected components of more than one node (Tarjan), each sorted."""
  index, low, stack, on_stack, cycles = {}, {}, [], set(), []

  def visit(node):
    index[node] = low[node] = len(index)
    stack.append(node)
    on_stack.add(node)
    for nxt in graph.get(node, ()):
      if nxt not in index:
        visit(nxt)
        low[node] = min(low[node], low[nxt])
      elif nxt in on_stack:
        low[node] = min(low[node], index[nxt])
    if low[node] == index[node]:
      component = []
      while not component or component[-1] != node:
        component.append(stack.pop())
        on_stack.discard(component[-1])
      if len(component) > 1:
        cycles.append(sorted(component))

  for node in sorted(graph):
    if node not in index:
      visit(node)
  return cycles


def test_import_cycle_finder_finds_a_circle():
  graph = {"a": {"b": {"a.py"}}, "b": {"c": {"b.py"}}, "c": {"a": {"c.py"}, "d": {"c.py"}}}
  assert import_cycles(graph) == [["a", "b", "c"]]
  assert import_cycles({"a": {"b": {"a.py"}}}) == []


def test_dpaudit_subpackages_import_each_other_in_no_circle():
  graph = dpaudit_import_graph()
  assert {"dpaudit.dpsgd", "dpaudit.models", "dpaudit.audits"} <= set(graph)
  cycles = import_cycles(graph)
  arrows = [f"{a} -> {b} ({', '.join(sorted(graph[a][b]))})"
            for cycle in cycles for a in cycle for b in sorted(graph.get(a, {})) if b in cycle]
  assert not cycles, "dpaudit's layers import each other in a circle:\n" + "\n".join(arrows)


def test_only_dpaudit_plots_draws():
  drawing = sorted(path for path in _python_files("dpaudit")
                   if any(name.split(".")[0] == "matplotlib" for name in _imported_modules(
                       ast.parse(_read(path), path))))
  assert drawing == [os.path.join("dpaudit", "plots.py")], drawing


def test_experiments_are_thin():
  """Experiments are flags -> config -> one call -> write and print: at most 200 lines each
  (benchmarks, which time several implementations side by side, at most 400)."""
  long = {}
  for path in _python_files("experiments"):
    limit = 400 if os.path.dirname(path).endswith("benchmarks") else 200
    lines = _read(path).count("\n")
    if lines > limit:
      long[path] = f"{lines} lines > {limit}"
  assert not long, long
