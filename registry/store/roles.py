"""A read-only PostgreSQL role for the dashboard: it may connect and read every registry table, now and after
later migrations, and write nothing.

The password never appears in SQL text: libpq hashes it client-side (SCRAM-SHA-256, as psql's \\password does),
so neither the server's statement log nor an error message can show it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import psycopg
from psycopg import sql
from sqlalchemy import Engine

from registry.errors import UserError

ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class RoleError(UserError, ValueError):
    """A role that cannot be made read-only here; the message is one line for the user and holds no secret."""


@dataclass(frozen=True)
class ReadOnlyRole:
    name: str
    database: str
    created: bool  # False: the role existed; its password and grants were renewed


def _check(name: str, password: str) -> None:
    if not ROLE_NAME.match(name):
        raise RoleError(f"role name {name!r} must be lowercase letters, digits and _ (at most 63, not starting "
                        "with a digit)")
    if not password:
        raise RoleError("the role's password is empty")


def _statements(name: str, database: str, verifier: str, *, create: bool) -> list[sql.Composed]:
    role, schema = sql.Identifier(name), sql.Identifier("public")
    login = sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}" if create else "ALTER ROLE {} WITH LOGIN PASSWORD {}")
    return [
        login.format(role, sql.Literal(verifier)),
        # Even a grant added by mistake later cannot make its sessions write.
        sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(role),
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(database), role),
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, role),
        sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(schema, role),
        # Tables that later migrations create (run by this same owner role) are readable too.
        sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA {} GRANT SELECT ON TABLES TO {}").format(schema, role),
    ]


def create_readonly_role(engine: Engine, name: str, password: str) -> ReadOnlyRole:
    """Create (or renew) role `name` able to read the registry at `engine` and nothing else.

    Run it as the role that owns the registry's tables (the one `drafters db upgrade` runs as)."""
    _check(name, password)
    if engine.dialect.name != "postgresql":
        raise RoleError("read-only roles need PostgreSQL; a SQLite registry is a file, protect it with file "
                        "permissions")
    raw = engine.raw_connection()
    try:
        connection = raw.driver_connection
        with connection.transaction(), connection.cursor() as cursor:
            cursor.execute("SELECT current_user, current_database()")
            owner, database = cursor.fetchone()  # type: ignore[misc]
            if name == owner:
                raise RoleError(f"{name} is the role this command runs as (the registry's owner), not a dashboard "
                                "role")
            cursor.execute("SELECT rolsuper OR rolcreaterole OR rolcreatedb FROM pg_roles WHERE rolname = %s",
                           (name,))
            found = cursor.fetchone()
            if found is not None and found[0]:
                raise RoleError(f"role {name} exists with superuser, createrole or createdb rights; it cannot be "
                                "made a read-only role")
            verifier = connection.pgconn.encrypt_password(password.encode(), name.encode(), b"scram-sha-256")
            for statement in _statements(name, database, verifier.decode(), create=found is None):
                cursor.execute(statement)
    except psycopg.Error as error:
        # psycopg's message is the server's; the statement (with the hashed password) is not part of it.
        raise RoleError(f"cannot set up role {name}: {' '.join(str(error).split())}") from None
    finally:
        raw.close()
    return ReadOnlyRole(name=name, database=database, created=found is None)
