"""The kit that runs the accelerator suite on a GPU machine without network (tools/): the
scripts parse, the wheels carried are the versions the project pins, and none replaces the
device's own JAX, CUDA or compiled numerics."""

import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEVICE_OWN = {"jax", "jaxlib", "numpy", "scipy", "matplotlib", "absl-py", "scikit-learn"}


def _name(requirement: str) -> str:
  return re.sub(r"[-_.]+", "-", requirement.lower())


def _pins(text: str) -> dict[str, str]:
  pins = {}
  for line in text.splitlines():
    match = re.match(r"^\s*([A-Za-z0-9_.\-]+)==([^\s#]+)", line)
    if match:
      pins[_name(match.group(1))] = match.group(2)
  return pins


def test_scripts_parse():
  for script in ("tools/device_wheels.sh", "tools/device_install.sh", "tools/device_run.sh",
                 "tools/device_uniaud_paper.sh"):
    out = subprocess.run(["bash", "-n", str(ROOT / script)], capture_output=True, text=True)
    assert out.returncode == 0, (script, out.stderr)


def test_carried_wheels_are_the_pinned_versions_and_leave_the_devices_own_alone():
  carried = _pins((ROOT / "tools/device_wheels.sh").read_text())
  pinned = {}
  for path in ROOT.glob("requirements*.txt"):
    pinned.update(_pins(path.read_text()))
  assert {"dp-accounting", "flowjax", "tensorflow-datasets", "flax", "optax"} <= set(carried)
  assert not DEVICE_OWN & set(carried)
  assert not any(name.startswith(("jax-cuda", "nvidia-")) for name in carried)
  for name, version in carried.items():
    if name in pinned:
      assert version == pinned[name], (name, version, pinned[name])


def test_run_scripts_install_offline_and_run_the_suite():
  install = (ROOT / "tools/device_install.sh").read_text()
  assert "--no-index --no-deps" in install and ".whl/*.whl" in install
  for script in ("tools/device_run.sh", "tools/device_uniaud_paper.sh"):
    text = (ROOT / script).read_text()
    assert "source tools/device_install.sh" in text
    assert "python3 -m experiments.benchmarks.accelerator" in text
    assert '"${OUT:-' in text  # the results go to the device call's $OUT
