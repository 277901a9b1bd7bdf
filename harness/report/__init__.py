"""What a reader sees: the terminal's tables, report.html with its plots, and one spelling of every figure
(formats)."""
