"""What a user hands the harness: variants (the builds), scenarios (the load and its faults) and
expectations (what a correct broker does)."""
