"""The ```python blocks of README.md and docs/*.md run as written (issue 11: docs code tested).

Each block runs in a fresh namespace, after its page's setup prelude below (the imports and the
small data the prose assumes, e.g. ``true_counts`` in the README) and, where a block assumes
more, its own setup (``BLOCK_SETUP``: code, or earlier blocks of the same page to run first).
A block that raises fails its test, naming the page and the block's line; so does a block
that emits a ``DeprecationWarning`` or ``FutureWarning`` (docs examples use the current PyMC,
PyTensor and ArviZ names, issue 26). The notebooks
(notebooks/) have their own tests. The checks are exact (a block runs or raises): no
statistics, no false-alarm rate; the negative controls feed the same runner a broken block and
a page with python blocks but no prelude.

Cost (measured with ``-p no:xdist``, 15 tests): 148 s wall on the shared 2-core machine under
load (62 s CPU); the two hidden-Markov blocks (README block 3, user guide block 3) took about
60 s each there, about 16 s unloaded, nearly all of it imports and the first compilation of the
model in a fresh process (``pm.sample`` itself takes about 3 s), which smaller sizes in the
docs would not remove; the other blocks take 1-10 s.
"""

import re
import textwrap
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_BLOCK = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", flags=re.M | re.S)

_IMPORTS = "import numpy as np\nimport pymc as pm\nimport pymc_dp as pmdp\n"

# per page: the names its blocks use without defining them (small sizes: the test stays fast)
PRELUDES = {
    "README.md": _IMPORTS
    + textwrap.dedent(
        """
        rng = np.random.default_rng(1)
        true_counts = rng.poisson(4.0, size=20)
        n = 20
        x = rng.binomial(1, 0.3, size=n)
        z_released = float(x.sum()) + 0.7
        R, T = 2, 6
        region = np.repeat(np.arange(R), 3 * T)
        month = np.tile(np.repeat(np.arange(T), 3), R)
        features = rng.integers(0, 2, size=(R * T * 3, 2))
        """
    ),
    # blocks 1-4 use rng and the HMM sizes and counts the prose assumes (imports: block 0)
    "docs/user_guide.md": (
        "import numpy as np\nrng = np.random.default_rng(1)\nR, T = 2, 5\n"
        "z = rng.poisson(3.0, size=(R, T))\n"
    ),
    "docs/mechanisms.md": _IMPORTS,
}
# (page, index of the block on the page) -> setup run just before that block: code, or a tuple
# of indices of earlier blocks of the page to run first (in this block's namespace)
BLOCK_SETUP = {
    ("docs/user_guide.md", 1): (0,),
    ("docs/user_guide.md", 2): (0,),
    ("docs/user_guide.md", 3): (0, 2),  # the log-likelihood and plots of the Release of block 2
    ("docs/user_guide.md", 4): (0,),
    ("docs/user_guide.md", 5): (0, 1),  # the privacy report of the model of block 1
}


def python_blocks(text):
    """``(line, source)`` of each ```python block of a Markdown text (line of the fence)."""
    return [(text[: m.start()].count("\n") + 1, m.group(1)) for m in _BLOCK.finditer(text)]


def pages_with_python(root=ROOT):
    """README.md and the docs/*.md pages (not the notebooks) that have a ```python block."""
    pages = [root / "README.md", *sorted((root / "docs").glob("*.md"))]
    return {str(p.relative_to(root)) for p in pages if python_blocks(p.read_text())}


def _exec(source, label, namespace):
    try:
        with warnings.catch_warnings():
            # a docs example uses the current PyMC / ArviZ / PyTensor names (issue 26): a
            # deprecation warning is an error here, whatever pytest's configuration says
            warnings.simplefilter("error", DeprecationWarning)
            warnings.simplefilter("error", FutureWarning)
            # except Python's own warning that fork() in a multi-threaded process (numba and
            # PyTensor threads under pytest) may deadlock: pm.sample's cores > 1, not the docs
            warnings.filterwarnings(
                "ignore", "This process .* is multi-threaded", category=DeprecationWarning
            )
            exec(compile(source, label, "exec"), namespace)
    except Exception as err:
        raise AssertionError(f"{label} raised {err!r}") from err


def run_block(page, text, index):
    """Run block ``index`` of a page in a fresh namespace after its setup; return the namespace.

    Raises ``AssertionError`` naming the page and line of the block (or setup) that raised.
    """
    blocks = python_blocks(text)
    namespace = {"__name__": f"docs_code_{Path(page).stem}_{index}"}
    _exec(PRELUDES[page], f"<prelude of {page}>", namespace)
    setup = BLOCK_SETUP.get((page, index), "")
    if isinstance(setup, str):
        _exec(setup, f"<setup of {page} block {index}>", namespace)
    else:
        for earlier in setup:
            _exec(blocks[earlier][1], f"{page}, block at line {blocks[earlier][0]}", namespace)
    line, source = blocks[index]
    _exec(source, f"{page}, block at line {line}", namespace)
    return namespace


# blocks that fit a hidden Markov model: 16-60 s each, mostly first-time compilation; they run
# in the slow tier (the same models are tested in tests/releases/test_hmm.py and the notebooks)
_SLOW_MARKERS = ("MarkovChain", "release_hmm_counts")


def _all_blocks():
    params = []
    for page in sorted(PRELUDES):
        for index, (_, source) in enumerate(python_blocks((ROOT / page).read_text())):
            slow = any(m in source for m in _SLOW_MARKERS)
            marks = [pytest.mark.slow] if slow else []
            params.append(pytest.param(page, index, id=f"{page}-{index}", marks=marks))
    return params


def test_every_page_with_python_has_a_prelude():
    missing = pages_with_python() - set(PRELUDES)
    assert not missing, f"add a prelude to PRELUDES for: {sorted(missing)}"
    assert {page for page, _ in BLOCK_SETUP} <= set(PRELUDES)


@pytest.mark.parametrize(("page", "index"), _all_blocks())
def test_block_runs(page, index):
    with warnings.catch_warnings():
        # ArviZ's R-hat of a variable that is constant across draws divides 0 by 0 and warns;
        # a reader sees the warning, the block still runs
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="arviz_stats")
        run_block(page, (ROOT / page).read_text(), index)


def test_every_prelude_page_has_python():
    for page in PRELUDES:
        assert python_blocks((ROOT / page).read_text()), f"{page}: no ```python block"


def test_broken_block_is_reported():
    """Negative control: a block that raises fails, naming its line; fixed, it runs."""
    text = "intro\n\n```python\nx = 1\n```\n\nprose\n\n```python\ny = x + undefined_name\n```\n"
    PRELUDES["<control>"] = ""
    BLOCK_SETUP[("<control>", 1)] = (0,)
    try:
        with pytest.raises(AssertionError, match=r"<control>, block at line 9 raised NameError"):
            run_block("<control>", text, 1)
        assert run_block("<control>", text.replace("undefined_name", "1"), 1)["y"] == 2
        del BLOCK_SETUP[("<control>", 1)]
        with pytest.raises(AssertionError, match=r"line 9 raised NameError\(\"name 'x'"):
            run_block("<control>", text.replace("undefined_name", "1"), 1)
    finally:
        PRELUDES.pop("<control>")
        BLOCK_SETUP.pop(("<control>", 1), None)


@pytest.mark.parametrize(
    ("code", "category"),
    [
        ("pm.floatX(1.0)", "DeprecationWarning"),  # moved out of PyMC's root namespace
        ("from pytensor.graph import basic\nbasic.ancestors([])", "FutureWarning"),
    ],
)
def test_deprecated_name_in_a_block_is_reported(code, category):
    """Negative control: a block using a deprecated name fails; the current name runs."""
    text = f"```python\nimport pymc as pm\n{code}\n```\n"
    PRELUDES["<control>"] = ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the runner must turn them into errors itself
            with pytest.raises(
                AssertionError, match=rf"<control>, block at line 1 raised {category}"
            ):
                run_block("<control>", text, 0)
            current = text.replace("pm.floatX", "pm.pytensorf.floatX").replace(
                "from pytensor.graph import basic", "from pytensor.graph import traversal as basic"
            )
            run_block("<control>", current, 0)
    finally:
        PRELUDES.pop("<control>")


def test_page_without_prelude_is_reported(tmp_path):
    """Negative control: a new docs page with a python block is not silently skipped."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("no code\n")
    (tmp_path / "docs" / "new.md").write_text("```python\nprint(1)\n```\n")
    assert pages_with_python(tmp_path) - set(PRELUDES) == {"docs/new.md"}


def test_parser_finds_only_python_blocks():
    text = "```python\na = 1\n```\n```bash\nmake\n```\n```\nplain\n```\n```python\nb = 2\n```\n"
    assert python_blocks(text) == [(1, "a = 1\n"), (10, "b = 2\n")]
