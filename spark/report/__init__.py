"""The comparison report: plots and HTML rendered from the summary and collected samples; no analysis."""
