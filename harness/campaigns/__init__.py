"""Many runs toward one answer, on one loop (loop): the scenario matrix, the release sweep, the ramp, bisection,
and calibration of the rule."""
