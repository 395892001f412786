"""permission package."""
