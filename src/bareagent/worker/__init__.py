"""worker package."""
