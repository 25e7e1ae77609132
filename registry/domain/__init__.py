"""Pure domain rules: no database, no network, no clock."""
