import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "notebooks: runs every notebook under nbdev_test (slow; deselect with -m 'not notebooks')")
