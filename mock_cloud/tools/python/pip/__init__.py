"""The mock cloud's pip: a stand-in that installs a package's metadata, not its code (see __main__.py)."""

__version__ = "24.0"
