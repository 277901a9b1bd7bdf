"""Post-processing of run archives on Spark: read (io), analyse (analysis), compare, report."""
