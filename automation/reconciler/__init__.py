"""The control loop: observe, decide (a pure function), act, record."""
