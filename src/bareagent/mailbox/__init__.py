"""mailbox package."""
