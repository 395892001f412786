"""Base tool handlers: plain functions taking the workspace first (bound by get_handlers)."""
