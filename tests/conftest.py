"""Shared pytest configuration for the microtape test suite."""


def pytest_configure(config):
    """Register custom markers (so ``-m`` works and ``--strict-markers`` passes)."""
    config.addinivalue_line(
        "markers",
        "torch: cross-checks that need PyTorch installed (skipped without it)",
    )
