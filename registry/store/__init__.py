"""The registry's one database: the only package that sees the ORM and sessions (see core.py)."""

from registry.store.core import NotFound, Store, aware, utcnow

__all__ = ["NotFound", "Store", "aware", "utcnow"]
