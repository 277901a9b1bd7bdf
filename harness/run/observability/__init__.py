"""Prometheus for a run: started beside the brokers, scraping workers, broker exporters and probes."""
