"""What every stage stands on: errors and exit codes, paths, processes started and stopped by PID, YAML input."""
