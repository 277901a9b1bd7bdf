"""Tools that build what the harness runs on, outside the runtime package."""
