"""What the events mean: THE wakeup / pickup / redelivery definition, the message ledger, per-message tallies,
FIFO order, what a fault did; pure functions over events, shared by the run and by Spark."""
