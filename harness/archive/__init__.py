"""Run archives: ``runs/<run-id>/`` with a versioned manifest, events as Parquet, Locust output and logs."""
