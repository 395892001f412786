"""BareAgent: a terminal coding agent whose long-running parts are supervised OS processes."""

__version__ = "0.1.0"
