"""Alembic migrations of the registry schema (`model_store/tables.py`).

One revision per schema change in `versions/`; `model_store.schema.upgrade_schema` applies
them when a registry opens. A new table or column in tables.py needs a new revision here:
tests/model_store/test_store_schema.py fails while the migrated schema and the metadata differ.
"""
