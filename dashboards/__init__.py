"""Grafana dashboards as code (generate.py, grafana-foundation-sdk) and the JSON it writes."""
