"""The test suite's shared settings; how the suite is organized is in tests/README.md.

In CI (the environment variable CI is set, as `.ci/run` does) a skipped test is a failure, unless its reason says it
needs a GPU (names 'GPU' or 'CUDA'): CI installs everything the suite uses, so any other skip hides a test that did
not run. That includes a parametrized test whose list of cases came out empty, which pytest would otherwise skip.
"""
import os
import pytest
import torch

# Without a GPU, Triton's kernels (chapter 19a) run in its interpreter. Triton reads TRITON_INTERPRET when it defines a
# kernel, its own library functions included, which it defines when it is first imported: so set it before any test does.
if not torch.cuda.is_available(): os.environ.setdefault('TRITON_INTERPRET', '1')

GPU_ONLY = ('GPU', 'CUDA')  # words a skip reason holds when the test needs a GPU, the one skip CI allows


def pytest_configure(config):
    config.addinivalue_line("markers", "notebooks: runs every notebook under nbdev_test (slow; deselect with -m 'not notebooks')")
    if os.environ.get('CI') and not config.option.durations: config.option.durations = 30   # CI's log shows where its time goes


def _reason(report):
    return report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    "In CI, turn a skip that is not for want of a GPU into a failure that gives the reason."
    outcome = yield
    report = outcome.get_result()
    if os.environ.get('CI') and report.skipped and not hasattr(report, 'wasxfail'):
        reason = _reason(report)
        if not any(word in reason for word in GPU_ONLY):
            report.outcome = 'failed'
            report.longrepr = f"skipped in CI, where only tests that need a GPU may skip: {reason}"


@pytest.fixture(autouse=True)
def _check_inputs_seed():
    """With TT_CHECK_SEED set, every test runs the checks on the inputs of that run seed, as the batch grader draws one per
    run (`checks.core._INPUTS`): the banks of mistakes and honest solutions can be measured under other runs' inputs."""
    seed = os.environ.get('TT_CHECK_SEED')
    if seed is None:
        yield
        return
    from transformer_tutorial.checks.core import _INPUTS
    _INPUTS['seed'] = int(seed)
    try: yield
    finally: _INPUTS['seed'] = 0


# Last, in this order: the tests that install the wheel into the environments the notebooks ran in, or that need the
# cores to themselves; then the site's, whose browser (Playwright's synchronous API, started once for the session) keeps
# an event loop running in this thread until the session ends, where asyncio.run() would then fail.
LATE = ("test_data_parallel.py", "test_grading.py", "test_installed.py", "test_site.py")


def pytest_collection_modifyitems(config, items):
    """The unit tests first; then the notebooks' tests, while the environments the notebooks run in are as `.ci/run` made
    them (the index installs the wheel into each); then the files of `LATE`, in its order."""
    def group(item): return 1 if item.path.name == "test_notebooks.py" else 2 + LATE.index(item.path.name) if item.path.name in LATE else 0
    items.sort(key=group)
