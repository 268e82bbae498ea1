"""The API reference pages (docs/api/*.md) list every public name; no Sphinx build here.

A name added to one of the ``__all__`` lists below without an autosummary entry in docs/api
fails :func:`test_every_public_name_has_an_api_entry`, so it cannot be forgotten. The checks are
exact set comparisons (no statistics, no false-alarm rate); each has a negative control that feeds
the same check a page with one entry removed.
"""

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
API_DIR = ROOT / "docs" / "api"
RESULTS_PAGE = ROOT / "docs" / "results.md"

# modules whose ``__all__`` is documented as it stands
ALL_MODULES = (
    "pymc_dp",
    "pymc_dp.releases",
    "pymc_dp.interop",
    "pymc_dp.step_methods",
    "pymc_dp.distributions",
    "pymc_dp.testing",
    "pymc_dp.examples.poisson_factorization",
    "pymc_dp.examples.mmsb",
    "pymc_dp.examples.log_linear",
)
# packages whose public (non-underscore) submodules are documented by their ``__all__``
SUBMODULE_PACKAGES = ("pymc_dp.mechanisms", "pymc_dp.distributions")
# exported but not an API page: the version string
NOT_PAGES = frozenset({"pymc_dp.__version__"})

_CURRENTMODULE = re.compile(r"^\s*\.\. currentmodule:: (\S+)\s*$")
_AUTOSUMMARY = re.compile(r"^\s*\.\. autosummary::\s*$")
_ENTRY = re.compile(r"^\s+(~?[A-Za-z_][\w.]*)\s*$")


def documented_names(text):
    """Full dotted names of the autosummary entries of one page's text.

    Entries are resolved against the latest ``.. currentmodule::``; option lines (``:toctree:``)
    and blank lines inside an autosummary block are skipped, and the block ends at the first line
    that is neither indented nor blank.
    """
    names, module, in_block = set(), "", False
    for line in text.splitlines():
        if match := _CURRENTMODULE.match(line):
            module, in_block = match.group(1), False
        elif _AUTOSUMMARY.match(line):
            in_block = True
        elif in_block and line.strip() and not line[0].isspace():
            in_block = False
        elif in_block and (match := _ENTRY.match(line)):
            name = match.group(1).lstrip("~")
            names.add(f"{module}.{name}" if module else name)
    return names


def required_names():
    """Full dotted names that must have an API entry: every listed ``__all__``."""
    names = set()
    for modname in ALL_MODULES:
        module = importlib.import_module(modname)
        names.update(f"{modname}.{name}" for name in module.__all__)
    for pkgname in SUBMODULE_PACKAGES:
        package = importlib.import_module(pkgname)
        for info in pkgutil.iter_modules(package.__path__):
            if info.name.startswith("_"):
                continue
            modname = f"{pkgname}.{info.name}"
            module = importlib.import_module(modname)
            names.update(f"{modname}.{name}" for name in getattr(module, "__all__", ()))
    return names - NOT_PAGES


def api_text():
    """All API pages' text, concatenated."""
    return "\n".join(path.read_text() for path in sorted(API_DIR.glob("*.md")))


def resolve(fullname):
    """The object a dotted name points to (module prefix imported, attributes walked)."""
    parts = fullname.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(fullname)


def test_every_public_name_has_an_api_entry():
    missing = required_names() - documented_names(api_text())
    assert not missing, f"add to docs/api/*.md: {sorted(missing)}"


def test_missing_entry_is_reported():
    """Negative control: the same check on the pages with one entry removed names that entry."""
    top = (API_DIR / "pymc_dp.md").read_text()
    assert re.search(r"^   Privatized$", top, flags=re.M)
    others = [path.read_text() for path in API_DIR.glob("*.md") if path.name != "pymc_dp.md"]
    removed = re.sub(r"^   Privatized$", "", top, flags=re.M)
    missing = required_names() - documented_names("\n".join([removed, *others]))
    assert missing == {"pymc_dp.Privatized"}


def test_parser_on_a_hand_page():
    text = (
        "```{eval-rst}\n.. currentmodule:: pkg.mod\n\n.. autosummary::\n   :toctree: generated\n"
        "   :nosignatures:\n\n   Alpha\n   ~sub.beta\n```\nprose naming   Gamma\n"
        "```{eval-rst}\n.. currentmodule:: other\n\n.. autosummary::\n\n   Delta\n```\n"
    )
    assert documented_names(text) == {"pkg.mod.Alpha", "pkg.mod.sub.beta", "other.Delta"}


@pytest.mark.parametrize("fullname", sorted(documented_names(api_text())))
def test_every_api_entry_resolves(fullname):
    """No stale entry: each listed name is importable (autosummary would warn otherwise)."""
    resolve(fullname)


def test_resolve_rejects_a_stale_name():
    """Negative control for the check above."""
    with pytest.raises(AttributeError):
        resolve("pymc_dp.NoSuchName")


# the user-facing modules, whose classes and functions need a runnable example (issue 11)
EXAMPLE_MODULES = (
    "pymc_dp",
    "pymc_dp.releases",
    "pymc_dp.step_methods",
    "pymc_dp.testing",
    "pymc_dp.examples.poisson_factorization",
    "pymc_dp.examples.log_linear",
)


def names_without_examples(fullnames):
    """Defined names of the classes and functions among ``fullnames`` with no ``>>>`` example."""
    found = set()
    for fullname in fullnames:
        if fullname.rsplit(".", 1)[0] not in EXAMPLE_MODULES:
            continue
        obj = resolve(fullname)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and ">>>" not in (obj.__doc__ or ""):
            found.add(f"{obj.__module__}.{obj.__qualname__}")
    return found


def test_every_public_name_has_an_example():
    missing = names_without_examples(documented_names(api_text()))
    assert not missing, f"add an Examples section to: {sorted(missing)}"


def test_name_without_example_is_reported(monkeypatch):
    """Negative control: a function whose docstring loses its example is found, the others not."""
    assert not names_without_examples({"pymc_dp.attach_privacy", "pymc_dp.Laplace"})
    monkeypatch.setattr(resolve("pymc_dp.attach_privacy"), "__doc__", "Record the report.")
    found = names_without_examples({"pymc_dp.attach_privacy", "pymc_dp.Laplace"})
    assert found == {"pymc_dp.privacy.attach_privacy"}


def included_results(text):
    """Paths named by ``{include}`` directives of a MyST page."""
    return set(re.findall(r"^```\{include\} (\S+)\s*$", text, flags=re.M))


def test_every_result_file_is_on_the_results_page():
    wanted = {"../benchmarks/RESULTS.md"} | {
        f"../benchmarks/results/{path.name}"
        for path in sorted((ROOT / "benchmarks" / "results").glob("*.md"))
    }
    missing = wanted - included_results(RESULTS_PAGE.read_text())
    assert not missing, f"include in docs/results.md: {sorted(missing)}"
    for include in included_results(RESULTS_PAGE.read_text()):
        assert (RESULTS_PAGE.parent / include).is_file(), include


def test_missing_result_file_is_reported():
    """Negative control: a page without one include misses exactly that file."""
    text = RESULTS_PAGE.read_text().replace("```{include} ../benchmarks/results/zhang_fig1.md", "")
    assert "../benchmarks/results/zhang_fig1.md" not in included_results(text)
    assert "../benchmarks/RESULTS.md" in included_results(text)
