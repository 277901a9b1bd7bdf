"""Many runs toward one answer: the scenario matrix, the release sweep, bisection, and calibration of the rule."""
