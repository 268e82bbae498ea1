"""The package's layering, as ``docs/architecture.md`` describes it, checked from the source.

Layers, bottom to top (a module may import its own layer and the layers below, never above;
imports inside functions count):

0. ``pymc_dp._cache``, ``pymc_dp._pymc_hooks``, ``pymc_dp._validation``, ``pymc_dp.testing``:
   helpers;
1. ``pymc_dp.math``, ``pymc_dp.kernels``: pure math (numpy, numba, PyTensor scalar ops);
2. ``pymc_dp.accounting``, ``pymc_dp.mechanisms``: what a release is and what it costs;
3. ``pymc_dp.distributions``: PyMC distributions and graph nodes;
4. ``pymc_dp.step_methods``: PyMC step methods;
5. ``pymc_dp.privacy``, ``pymc_dp.demo``, ``pymc_dp.releases`` (the release side),
   ``pymc_dp.examples``, ``pymc_dp.jax`` (JAX implementations of the Ops),
   ``pymc_dp.log_likelihood`` (pointwise log-likelihood for model comparison),
   ``pymc_dp.interop`` (adapters to other DP libraries), ``pymc_dp`` itself: reports and entry
   points.

Step-method adapters (the PyMC classes) stay thin: no function over 60 lines there (the
def line and the body, docstrings not counted).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "pymc_dp"

LAYERS = {
    "pymc_dp._cache": 0,
    "pymc_dp._pymc_hooks": 0,
    "pymc_dp._validation": 0,
    "pymc_dp.testing": 0,
    "pymc_dp.math": 1,
    "pymc_dp.kernels": 1,
    "pymc_dp.accounting": 2,
    "pymc_dp.mechanisms": 2,
    "pymc_dp.distributions": 3,
    "pymc_dp.step_methods": 4,
    "pymc_dp.privacy": 5,
    "pymc_dp.demo": 5,
    "pymc_dp.releases": 5,
    "pymc_dp.examples": 5,
    "pymc_dp.jax": 5,
    "pymc_dp.log_likelihood": 5,
    "pymc_dp.interop": 5,
    "pymc_dp": 5,
}

ADAPTERS = (
    "data_augmentation.py",
    "conjugate.py",
    "soma.py",
    "count_augmentation.py",
    "poisson_factor.py",
)
MAX_ADAPTER_LINES = 60


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _layer(module: str) -> int:
    best = None
    for prefix, rank in LAYERS.items():
        if (module == prefix or module.startswith(prefix + ".")) and (
            best is None or len(prefix) > len(best[0])
        ):
            best = (prefix, rank)
    if best is None:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS and the docs")
    return best[1]


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    package = _module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else None
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                base = (package or _module_name(path)).split(".")
                mod = ".".join(base[: len(base) - node.level + 1] + ([mod] if mod else []))
            yield node.lineno, mod


SOURCES = sorted(ROOT.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_upward_import(path):
    own = _layer(_module_name(path))
    for line, mod in _imports(path):
        if not mod.startswith("pymc_dp"):
            continue
        if mod == "pymc_dp" and path.name == "__init__.py" and path.parent == ROOT:
            continue
        assert _layer(mod) <= own, (
            f"{path.relative_to(ROOT.parent)}:{line} imports {mod} (layer {_layer(mod)}) "
            f"from layer {own}"
        )


def test_layer_check_sees_an_upward_import(tmp_path):
    """Control: a mechanism importing a distribution is caught (even inside a function)."""
    fake = ROOT / "mechanisms" / "_fake_for_test.py"
    src = "def f():\n    from pymc_dp.distributions.skellam import Skellam\n"
    imports = list(_imports_from_source(src, fake))
    assert any(_layer(m) > _layer(_module_name(fake)) for _, m in imports)


def _imports_from_source(src: str, path: Path):
    tmp = ast.parse(src)
    for node in ast.walk(tmp):
        if isinstance(node, ast.ImportFrom):
            yield node.lineno, node.module


def _long_functions(path: Path, limit: int):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                len(body) > 1
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                body = body[1:]  # the docstring does not count
            length = node.end_lineno - body[0].lineno + 1 + 1  # with the def line
            if length > limit:
                yield node.name, length


@pytest.mark.parametrize("name", ADAPTERS)
def test_step_method_adapters_are_thin(name):
    path = ROOT / "step_methods" / name
    if not path.exists():
        pytest.skip(f"{name} does not exist")
    long = list(_long_functions(path, MAX_ADAPTER_LINES))
    assert not long, f"functions over {MAX_ADAPTER_LINES} lines in {name}: {long}"


def test_length_check_sees_a_long_function(tmp_path):
    """Control: a 70-line function is reported."""
    src = tmp_path / "long.py"
    src.write_text("def f():\n" + "    x = 1\n" * 69)
    assert list(_long_functions(src, MAX_ADAPTER_LINES)) == [("f", 70)]
