"""planning package."""
