"""The Locust side of a run: pop consumers that nack, producers, and what they record."""
